package devices_test

import (
	"fmt"
	"slices"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"skiff.dev/skiff/agent/devices"
	"skiff.dev/skiff/agent/devices/testplugin"
)

// The call log holds the course's sequence from the real calls: Register,
// GetDevicePluginOptions, the ListAndWatch answers (a health change
// included), GetPreferredAllocation, Allocate and PreStartContainer with
// their payloads, in order.
func TestCallLogRecordsTheSequence(t *testing.T) {
	dir := shortDir(t)
	m := startManager(t, dir)
	p := startWidgets(t, dir, func(c *testplugin.Config) {
		c.PreStart = true
		c.Preferred = func(avail []string, n int) []string { return avail[len(avail)-n:] }
	}, "w0", "w1", "w2")
	if err := p.Register(ctxT(t), &pluginapi.RegisterRequest{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "3 widgets", healthyCount(widget, 3))
	p.SetHealth("w0", pluginapi.Unhealthy)
	waitFor(t, m, "2 healthy widgets", healthyCount(widget, 2))
	pa, ca := pod("a", 1, widget)
	if _, err := m.Allocate(ctxT(t), pa, ca); err != nil {
		t.Fatal(err)
	}

	calls := m.Calls()
	var methods []string
	for i, c := range calls {
		methods = append(methods, c.Method)
		if c.Resource != widget {
			t.Errorf("call %d %s: resource %q, want %q", i, c.Method, c.Resource, widget)
		}
		if i > 0 && c.Start.Before(calls[i-1].Start) {
			t.Errorf("call %d %s starts before call %d", i, c.Method, i-1)
		}
		if c.End.Before(c.Start) {
			t.Errorf("call %d %s ends before it starts", i, c.Method)
		}
	}
	want := []string{"Register", "GetDevicePluginOptions", "ListAndWatch", "ListAndWatch", "GetPreferredAllocation", "Allocate", "PreStartContainer"}
	if !slices.Equal(methods, want) {
		t.Fatalf("methods %v, want %v", methods, want)
	}
	from := map[string]string{"Register": devices.FromPlugin, "ListAndWatch": devices.FromPlugin, "Allocate": devices.FromManager}
	for _, c := range calls {
		if f, ok := from[c.Method]; ok && c.From != f {
			t.Errorf("%s from %q, want %q", c.Method, c.From, f)
		}
	}
	health := fmt.Sprint(calls[3].Response)
	if !slices.Contains([]string{"map[devices:[map[health:Unhealthy id:w0] map[health:Healthy id:w1] map[health:Healthy id:w2]]]"}, health) {
		t.Errorf("second ListAndWatch answer %s: want w0 Unhealthy", health)
	}
	alloc := calls[5]
	if alloc.Pod != "default/p-a" || fmt.Sprint(alloc.Request) != "map[devicesIDs:[w2]]" {
		t.Errorf("Allocate pod %q request %v, want default/p-a and [w2]", alloc.Pod, alloc.Request)
	}
	if alloc.Response == nil || alloc.Error != "" {
		t.Errorf("Allocate response %v error %q", alloc.Response, alloc.Error)
	}
}
