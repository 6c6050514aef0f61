package controllers

import (
	"fmt"
	"testing"

	"skiff.dev/skiff/api"
)

func TestPodGroupStatusFor(t *testing.T) {
	pods := func(phases ...string) []*api.Pod {
		var out []*api.Pod
		for i, ph := range phases {
			p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "ns",
				OwnerReferences: []api.OwnerReference{{Name: "train"}}}}
			p.Status.Phase = ph
			out = append(out, p)
		}
		return out
	}
	run, ok, bad, pend := api.PodRunning, api.PodSucceeded, api.PodFailed, api.PodPending
	cases := []struct {
		name  string
		phase string
		pods  []*api.Pod
		want  api.PodGroupStatus
	}{
		{"new group is Pending", "", pods(pend, pend, pend, pend), api.PodGroupStatus{Phase: api.PodGroupPending}},
		{"pending with too few pods stays", api.PodGroupPending, pods(pend, pend), api.PodGroupStatus{Phase: api.PodGroupPending}},
		{"enough pods: Scheduling", api.PodGroupPending, pods(pend, pend, pend, pend), api.PodGroupStatus{Phase: api.PodGroupScheduling, OccupiedBy: "ns/train"}},
		{"some running", api.PodGroupScheduling, pods(run, run, pend, pend), api.PodGroupStatus{Phase: api.PodGroupScheduling, Running: 2}},
		{"all running", api.PodGroupScheduling, pods(run, run, run, run), api.PodGroupStatus{Phase: api.PodGroupRunning, Running: 4}},
		{"running and succeeded", api.PodGroupRunning, pods(run, ok, ok, run), api.PodGroupStatus{Phase: api.PodGroupRunning, Running: 2, Succeeded: 2}},
		{"one failed", api.PodGroupRunning, pods(run, ok, bad, run), api.PodGroupStatus{Phase: api.PodGroupFailed, Running: 2, Succeeded: 1, Failed: 1}},
		{"all succeeded", api.PodGroupRunning, pods(ok, ok, ok, ok), api.PodGroupStatus{Phase: api.PodGroupFinished, Succeeded: 4}},
		{"members deleted: back to Pending", api.PodGroupScheduling, pods(run), api.PodGroupStatus{Phase: api.PodGroupPending, Running: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pg := &api.PodGroup{ObjectMeta: api.ObjectMeta{Name: "train", Namespace: "ns"}}
			pg.Spec.MinMember = 4
			pg.Status.Phase = tc.phase
			if got := PodGroupStatusFor(pg, tc.pods); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
