package framework

import (
	"context"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

// permitPlugin answers Permit with a fixed status and timeout.
type permitPlugin struct {
	name    string
	status  *Status
	timeout time.Duration
}

func (p *permitPlugin) Name() string { return p.name }
func (p *permitPlugin) Permit(context.Context, *CycleState, *api.Pod, string) (*Status, time.Duration) {
	return p.status, p.timeout
}

type binder struct{}

func (binder) Name() string                                                { return "Binder" }
func (binder) Bind(context.Context, *CycleState, *api.Pod, string) *Status { return nil }

func permitPod(uid string) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: uid, Namespace: "ns", UID: uid}}
	p.Spec.NodeName = "node-1"
	return p
}

func TestPermit(t *testing.T) {
	wait := func(name string, d time.Duration) Plugin {
		return &permitPlugin{name: name, status: NewStatus(Wait, name+" waits"), timeout: d}
	}
	cases := []struct {
		name    string
		plugins []Plugin
		// act runs on the waiting pod (nil: nothing, let it time out)
		act      func(WaitingPod)
		run      Code   // RunPermit's code
		wait     Code   // WaitOnPermit's code (when run is Wait)
		plugin   string // the plugin named by the final status
		contains string
	}{
		{name: "no plugins", run: Success},
		{name: "success", plugins: []Plugin{&permitPlugin{name: "A"}}, run: Success},
		{name: "unschedulable at once", plugins: []Plugin{&permitPlugin{name: "A", status: NewStatus(Unschedulable, "PodGroup not found")}},
			run: Unschedulable, plugin: "A", contains: "PodGroup not found"},
		{name: "error", plugins: []Plugin{&permitPlugin{name: "A", status: NewStatus(Error, "boom")}},
			run: Error, plugin: "A", contains: `running Permit plugin "A": boom`},
		{name: "allowed", plugins: []Plugin{wait("A", time.Minute)}, act: func(w WaitingPod) { w.Allow("A") },
			run: Wait, wait: Success},
		{name: "allowed by one of two keeps waiting, then times out", plugins: []Plugin{wait("A", time.Minute), wait("B", 20*time.Millisecond)},
			act: func(w WaitingPod) { w.Allow("A") }, run: Wait, wait: Unschedulable, plugin: "B",
			contains: "rejected due to timeout after waiting 20ms at plugin B"},
		{name: "allowed by both", plugins: []Plugin{wait("A", time.Minute), wait("B", time.Minute)},
			act: func(w WaitingPod) { w.Allow("B"); w.Allow("A") }, run: Wait, wait: Success},
		{name: "rejected", plugins: []Plugin{wait("A", time.Minute)}, act: func(w WaitingPod) { w.Reject("A", "rejection in Unreserve") },
			run: Wait, wait: Unschedulable, plugin: "A", contains: "rejection in Unreserve"},
		{name: "timeout", plugins: []Plugin{wait("A", 10*time.Millisecond)},
			run: Wait, wait: Unschedulable, plugin: "A", contains: "rejected due to timeout after waiting 10ms at plugin A"},
		{name: "a rejection wins over a wait", plugins: []Plugin{wait("A", time.Minute), &permitPlugin{name: "B", status: NewStatus(Unschedulable, "no")}},
			run: Unschedulable, plugin: "B", contains: "no"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := New(append(tc.plugins, binder{}), nil)
			if err != nil {
				t.Fatal(err)
			}
			pod := permitPod("uid-1")
			st := f.RunPermit(context.Background(), NewCycleState(), pod, "node-1")
			if st.Code() != tc.run {
				t.Fatalf("RunPermit: %v %q, want %v", st.Code(), st.Message(), tc.run)
			}
			if tc.run != Wait {
				if st.Plugin() != tc.plugin || !strings.Contains(st.Message(), tc.contains) {
					t.Errorf("RunPermit: plugin %q message %q, want %q containing %q", st.Plugin(), st.Message(), tc.plugin, tc.contains)
				}
				if f.Waiting.Len() != 0 {
					t.Errorf("%d waiting pods after %v", f.Waiting.Len(), st.Code())
				}
				return
			}
			wp := f.Waiting.Get("uid-1")
			if wp == nil || wp.NodeName() != "node-1" || len(wp.Pending()) != len(tc.plugins) {
				t.Fatalf("waiting pod: %+v", wp)
			}
			if tc.act != nil {
				tc.act(wp)
			}
			got := f.WaitOnPermit(context.Background(), pod)
			if got.Code() != tc.wait || got.Plugin() != tc.plugin || !strings.Contains(got.Message(), tc.contains) {
				t.Errorf("WaitOnPermit: %v plugin %q %q, want %v plugin %q containing %q", got.Code(), got.Plugin(), got.Message(), tc.wait, tc.plugin, tc.contains)
			}
			if f.Waiting.Get("uid-1") != nil {
				t.Error("still waiting after WaitOnPermit returned")
			}
			// Later decisions change nothing and do not block.
			wp.Allow("A")
			wp.Reject("A", "late")
		})
	}
}

func TestWaitOnPermitStopsWithContext(t *testing.T) {
	f, err := New([]Plugin{&permitPlugin{name: "A", status: NewStatus(Wait), timeout: time.Hour}, binder{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := permitPod("uid-2")
	if st := f.RunPermit(context.Background(), NewCycleState(), pod, "node-1"); st.Code() != Wait {
		t.Fatalf("RunPermit: %v", st.Code())
	}
	if !strings.Contains(f.RunPermit(context.Background(), NewCycleState(), permitPod("uid-3"), "n").Message(), "one or more plugins asked to wait") {
		t.Error("a Wait without reasons gets Kubernetes' message")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if st := f.WaitOnPermit(ctx, pod); st.Code() != Error {
		t.Fatalf("WaitOnPermit after cancel: %v %q", st.Code(), st.Message())
	}
	if f.WaitOnPermit(context.Background(), permitPod("not-waiting")) != nil {
		t.Error("a pod that does not wait is allowed at once")
	}
}

func TestPermitTimeoutCapped(t *testing.T) {
	f, err := New([]Plugin{&permitPlugin{name: "A", status: NewStatus(Wait), timeout: 24 * time.Hour}, binder{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := permitPod("uid-4")
	f.RunPermit(context.Background(), NewCycleState(), pod, "n")
	wp := f.Waiting.pods["uid-4"]
	if wp == nil {
		t.Fatal("not waiting")
	}
	if got := wp.timeouts["A"]; got != MaxPermitTimeout {
		t.Fatalf("a 24h wait is cut to %v, want %v", got, MaxPermitTimeout)
	}
	f.Waiting.Reject("uid-4", "A", "done")
	if st := f.WaitOnPermit(context.Background(), pod); st.Code() != Unschedulable {
		t.Fatalf("after Reject: %v", st.Code())
	}
}
