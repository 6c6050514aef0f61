package table

import (
	"fmt"
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

func TestEndpointSliceAndLeaseCells(t *testing.T) {
	now := time.Date(2026, 5, 1, 0, 10, 0, 0, time.UTC)
	p := func(n int32) api.EndpointSlicePort { return api.EndpointSlicePort{Port: &n} }
	named := "http"
	ep := func(ips ...string) api.Endpoint { return api.Endpoint{Addresses: ips} }
	var five []api.Endpoint
	for i := range 5 {
		five = append(five, ep(fmt.Sprintf("10.0.0.%d", i+1)))
	}
	for _, tc := range []struct {
		name  string
		slice api.EndpointSlice
		want  []any
	}{
		{"empty", api.EndpointSlice{AddressType: "IPv4"}, []any{"web-abcde", "IPv4", "<unset>", "<unset>", "10m"}},
		{"ports and endpoints", api.EndpointSlice{AddressType: "IPv4", Ports: []api.EndpointSlicePort{p(80), p(443)},
			Endpoints: []api.Endpoint{ep("10.0.0.2"), ep("10.0.0.1")}}, []any{"web-abcde", "IPv4", "80,443", "10.0.0.2,10.0.0.1", "10m"}},
		{"more than three; a port without number", api.EndpointSlice{AddressType: "IPv4",
			Ports: []api.EndpointSlicePort{{Name: &named}, {}}, Endpoints: five},
			[]any{"web-abcde", "IPv4", "http,*", "10.0.0.1,10.0.0.2,10.0.0.3 + 2 more...", "10m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.slice
			s.Name, s.CreationTimestamp = "web-abcde", api.NewTime(now.Add(-10*time.Minute))
			got := For(api.MustKindOf(&s)).Cells(&s, now)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("cells %v, want %v", got, tc.want)
			}
		})
	}
	holder := "node-1"
	l := &api.Lease{Spec: api.LeaseSpec{HolderIdentity: &holder}}
	l.Name, l.CreationTimestamp = "node-1", api.NewTime(now.Add(-time.Hour))
	if got := For(api.MustKindOf(l)).Cells(l, now); fmt.Sprint(got) != fmt.Sprint([]any{"node-1", "node-1", "60m"}) {
		t.Errorf("lease cells %v", got)
	}
}
