package agent

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

// hami.io/bind-phase as HAMi's device plugin moves it: success once the
// last container with cards has them (not after an earlier one), failed
// when an allocation fails; other annotations kept.
func TestHAMiBindPhase(t *testing.T) {
	pd := api.HAMiPodDevices{{{UUID: "GPU-0", Type: api.HAMiDeviceType, Usedmem: 3000, Usedcores: 30}}, nil,
		{{UUID: "GPU-1", Type: api.HAMiDeviceType, Usedmem: 1000}}}
	mk := func(name string) *api.Pod {
		p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{
			api.HAMiDevicesToAllocate: api.EncodeHAMiPodDevices(pd), api.HAMiBindPhase: api.HAMiBindPhaseAllocating, "keep": "x"}}}
		p.Spec.Containers = []api.Container{{Name: "a", Image: "i"}, {Name: "cpu-only", Image: "i"}, {Name: "b", Image: "i"}}
		return p
	}
	c := fake.New(mk("ok"), mk("bad"))
	g := &GPUs{client: c, log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	ctx := context.Background()
	phase := func(name string) string {
		t.Helper()
		p, err := client.Get[*api.Pod](ctx, c, "default", name)
		if err != nil {
			t.Fatal(err)
		}
		if p.Annotations["keep"] != "x" {
			t.Fatalf("annotations %v", p.Annotations)
		}
		return p.Annotations[api.HAMiBindPhase]
	}
	g.hamiBindPhase(ctx, "default/ok", "a", nil)
	if got := phase("ok"); got != api.HAMiBindPhaseAllocating {
		t.Fatalf("after the first container: %q, want allocating", got)
	}
	g.hamiBindPhase(ctx, "default/ok", "b", nil)
	if got := phase("ok"); got != api.HAMiBindPhaseSuccess {
		t.Fatalf("after the last container: %q, want success", got)
	}
	g.hamiBindPhase(ctx, "default/bad", "a", errors.New("card GPU-0 is not on this node"))
	if got := phase("bad"); got != api.HAMiBindPhaseFailed {
		t.Fatalf("after a failed allocation: %q, want failed", got)
	}
	g.hamiBindPhase(ctx, "default/gone", "a", nil) // no such pod: nothing to do
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }
