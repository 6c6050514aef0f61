package framework

import (
	"math/rand/v2"
	"testing"

	"skiff.dev/skiff/api"
)

// CompiledHints answer every event as Hints.Requeue does for the same
// rejectors: random profiles of registrations (with hints that say Queue
// or QueueSkip by the pod), random rejector lists (some naming plugins
// the profile does not have), random events.
func TestCompiledHintsMatchRequeue(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 26))
	resources := []EventResource{AssignedPod, Node, ResourceClaim, WildCard}
	actions := []ActionType{Add, Delete, UpdateNodeLabel, UpdateNodeTaint, UpdatePodLabel, All}
	names := []string{"A", "B", "C", "D", "Gone"}
	podA, podB := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "a"}}, &api.Pod{ObjectMeta: api.ObjectMeta{Name: "b"}}
	onlyA := func(pod *api.Pod, _, _ any) QueueingHint {
		if pod.Name == "a" {
			return Queue
		}
		return QueueSkip
	}
	for range 2000 {
		h := Hints{}
		for _, n := range names[:4] {
			if r.IntN(4) == 0 {
				continue
			}
			var regs []ClusterEventWithHint
			for range r.IntN(3) {
				reg := ClusterEventWithHint{Event: ClusterEvent{Resource: resources[r.IntN(len(resources))], ActionType: actions[r.IntN(len(actions))]}}
				if r.IntN(2) == 0 {
					reg.QueueingHintFn = onlyA
				}
				regs = append(regs, reg)
			}
			h[n] = regs
		}
		var rejectors []string
		for range r.IntN(3) {
			rejectors = append(rejectors, names[r.IntN(len(names))])
		}
		c := h.Compile(rejectors)
		for range 10 {
			ev := ClusterEvent{Resource: resources[r.IntN(len(resources))], ActionType: actions[r.IntN(len(actions))]}
			for _, pod := range []*api.Pod{podA, podB} {
				if got, want := c.Requeue(pod, ev, nil, nil), h.Requeue(pod, rejectors, ev, nil, nil); got != want {
					t.Fatalf("hints %v, rejectors %v, event %v, pod %s: compiled %v, Requeue %v", h, rejectors, ev, pod.Name, got, want)
				} else if want && !c.MayRequeue(ev) {
					t.Fatalf("hints %v, rejectors %v, event %v: MayRequeue false, yet pod %s moves", h, rejectors, ev, pod.Name)
				}
			}
		}
	}
}
