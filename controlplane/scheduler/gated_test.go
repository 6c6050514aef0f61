package scheduler

import (
	"slices"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

// A pod the PreEnqueue gate holds says why (KEP-5501): after a second
// with the same message, the PodScheduled condition, an Event and a trace
// span carry DynamicResources' message, once; the first cycle after the
// gate opens replaces the condition.
func TestGatedPodReported(t *testing.T) {
	tmpl := "single-gpu"
	p := gpuPod("p", 0, func(p *api.Pod) {
		p.Spec.ResourceClaims = []api.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
	})
	f := newDRAFixture(t, gpuNode("dgx-1", 0), gpuClass(), gpuSlice("dgx-1", "nvl-0"), p)
	const msg = `pod "gpu-demo/p": ResourceClaim not created yet`

	f.s.reportGated(f.ctx)
	if c := f.condition(f.pod("gpu-demo", "p")); c.Type != "" {
		t.Fatalf("reported at once (a transient wait): %+v", c)
	}
	if ev := f.ev.take(); len(ev) != 0 {
		t.Fatalf("events at once: %q", ev)
	}

	f.clock = f.clock.Add(gatedReportAfter)
	f.s.reportGated(f.ctx)
	c := f.condition(f.pod("gpu-demo", "p"))
	if c.Status != api.ConditionFalse || c.Reason != ReasonNotReadyForScheduling || c.Message != msg {
		t.Errorf("condition %+v, want PodScheduled False %s %q", c, ReasonNotReadyForScheduling, msg)
	}
	if ev, want := f.ev.take(), []string{"gpu-demo/p Normal NotReadyForScheduling: " + msg}; !slices.Equal(ev, want) {
		t.Errorf("events %q, want %q", ev, want)
	}
	tr, err := f.c.GetTrace(f.ctx, "gpu-demo", "p")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(tr.Spans, func(s api.TraceSpan) bool { return s.Component == "scheduler" && s.Step == "queue" })
	if i < 0 || !strings.Contains(tr.Spans[i].Message, "PreEnqueue DynamicResources") || !strings.Contains(tr.Spans[i].Message, msg) {
		t.Fatalf("no queue span naming the plugin and message: %+v", tr.Spans)
	}
	if got := api.ExplainSchedulingTrace("p", tr.Spans); got != "" {
		t.Errorf("ExplainTrace of a pod never tried: %q", got)
	}

	f.clock = f.clock.Add(time.Minute)
	f.s.reportGated(f.ctx)
	if ev := f.ev.take(); len(ev) != 0 {
		t.Errorf("reported twice: %q", ev)
	}

	f.createTemplateClaim()
	if res := f.step(); res == nil || res.SelectedNode != "dgx-1" {
		t.Fatalf("after the claim exists: %+v", res)
	}
	f.s.reportGated(f.ctx)
	if ev := f.ev.take(); slices.ContainsFunc(ev, func(e string) bool { return strings.Contains(e, ReasonNotReadyForScheduling) }) {
		t.Errorf("reported after the gate opened: %q", ev)
	}
}
