package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/controlplane/apiserver"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/pki"
)

// RBAC's cost per request: API create p99 at 50 clients (TestBenchAPI's
// load) by a user RBAC authorizes (a client certificate bound to edit in
// the namespace, as a student), against the same load on a server whose
// authorizer allows every authenticated user (RBAC off), in the same run:
// three rounds, alternating which goes first, medians compared. Record the
// figures in docs/performance.md.
//
//	SKIFF_BENCH=1 go test -count=1 -run TestBenchRBAC -v ./integration/
func TestBenchRBAC(t *testing.T) {
	requireBench(t)
	const rounds = 3
	var p99 = map[string][]time.Duration{}
	for r := range rounds {
		order := []string{apiserver.AuthorizationRBAC, apiserver.AuthorizationAlwaysAllow}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, mode := range order {
			elapsed, lats := benchCreatesAs(t, mode)
			name := "RBAC"
			if mode == apiserver.AuthorizationAlwaysAllow {
				name = "off"
			}
			p := percentile(lats, 0.99)
			p99[name] = append(p99[name], p)
			t.Logf("round %d, RBAC %s: %d creates in %v (%.0f/s), p50 %v, p99 %v", r, name, len(lats), elapsed.Round(time.Millisecond),
				float64(len(lats))/elapsed.Seconds(), percentile(lats, 0.5), p)
		}
	}
	med := func(d []time.Duration) time.Duration { s := slices.Clone(d); slices.Sort(s); return s[len(s)/2] }
	on, off := med(p99["RBAC"]), med(p99["off"])
	t.Logf("API create p99 at %d clients, median of %d rounds: RBAC off %v, RBAC on %v: %.2f×", benchClients, rounds, off, on, float64(on)/float64(off))
}

// benchCreatesAs runs the create load against a fresh server in mode, as
// a user bound to edit in default.
func benchCreatesAs(t *testing.T, mode string) (time.Duration, []time.Duration) {
	t.Helper()
	cp, admin := startControlPlane(t, func(cfg *controlplane.Config) {
		cfg.Scheduler = false
		cfg.API.Authorization = mode
	})
	ctx := context.Background()
	if _, err := admin.Create(ctx, &api.RoleBinding{ObjectMeta: api.ObjectMeta{Name: "bench-edit", Namespace: "default"},
		RoleRef:  api.RoleRef{APIGroup: api.RBACGroup, Kind: "ClusterRole", Name: "edit"},
		Subjects: []api.Subject{{Kind: api.SubjectUser, APIGroup: api.RBACGroup, Name: "bench-user"}}}); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := cp.CA().Issue(pki.Leaf{CommonName: "bench-user", Organization: []string{"students"}, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	cc := cp.ClientConfig()
	cc.Token, cc.CertData, cc.KeyData = "", certPEM, keyPEM
	probe, err := client.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) { // the binding reaches the RBAC cache
		_, _, err := probe.List(ctx, api.MustKindOf(&api.Pod{}), "default", api.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
	return concurrently(t, benchClients, benchPerClient, func(worker int) (func(i int) error, error) {
		c, err := client.New(cc)
		if err != nil {
			return nil, err
		}
		return func(j int) error {
			_, err := c.Create(ctx, benchPod("default", fmt.Sprintf("p-%d-%d", worker, j)))
			return err
		}, nil
	})
}
