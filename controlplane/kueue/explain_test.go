package kueue

import (
	"context"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

// Explain on homework task 4's shape: a quota of 2 GPUs, two one-GPU jobs
// admitted, then the third, a three-GPU one, and one in a StrictFIFO queue.
func TestExplain(t *testing.T) {
	strict := func(cq *api.ClusterQueue) { cq.Spec.QueueingStrategy = api.StrictFIFO }
	tests := []struct {
		name  string
		cq    *api.ClusterQueue
		third jobSpec
		check func(t *testing.T, w *world, e *Explanation)
	}{
		{"one GPU short", clusterQueue("cluster-queue", "", quota{nominal: "2"}), jobSpec{name: "c", queue: "user-queue", gpus: 1},
			func(t *testing.T, w *world, e *Explanation) {
				if len(e.Shortages) != 1 || len(e.Reasons) != 0 {
					t.Fatalf("shortages %+v reasons %v, want one shortage", e.Shortages, e.Reasons)
				}
				s := e.Shortages[0]
				got := []string{s.Flavor, s.Resource, s.Requested, s.Nominal, s.Used, s.Available, s.Needed}
				if strings.Join(got, " ") != "default-flavor nvidia.com/gpu 1 2 2 0 1" {
					t.Errorf("shortage %v, want default-flavor nvidia.com/gpu requested 1 nominal 2 used 2 available 0 needed 1", got)
				}
				a, b := w.workload("a").Name, w.workload("b").Name
				if len(s.Holders) != 2 || s.Holders[0].Name != a || s.Holders[1].Name != b || s.Holders[0].Amount != "1" || s.Holders[0].ClusterQueue != "cluster-queue" {
					t.Errorf("holders %+v, want %s then %s holding 1 each", s.Holders, a, b)
				}
				if len(s.Frees) < 2 || s.Frees[0] != "default/"+a+" finishing frees 1" ||
					s.Frees[1] != "raising nominalQuota of nvidia.com/gpu in flavor default-flavor of ClusterQueue cluster-queue from 2 to 3" {
					t.Errorf("frees %q", s.Frees)
				}
				if e.Position == nil || e.Position.InClusterQueue != 0 || e.ClusterQueue != "cluster-queue" {
					t.Errorf("position %+v in %q", e.Position, e.ClusterQueue)
				}
			}},
		{"more than the quota", clusterQueue("cluster-queue", "", quota{nominal: "2"}), jobSpec{name: "c", queue: "user-queue", gpus: 3},
			func(t *testing.T, w *world, e *Explanation) {
				if len(e.Shortages) != 1 || !e.Shortages[0].Never || e.Shortages[0].Max != "2" || len(e.Shortages[0].Holders) != 0 {
					t.Fatalf("shortages %+v, want one that never fits, max 2", e.Shortages)
				}
				if f := e.Shortages[0].Frees; len(f) != 1 || !strings.Contains(f[0], "raise nominalQuota of nvidia.com/gpu in flavor default-flavor to at least 3") {
					t.Errorf("frees %q", f)
				}
			}},
		{"fits behind a StrictFIFO head", clusterQueue("cluster-queue", "", quota{nominal: "3"}, strict), jobSpec{name: "c", queue: "user-queue", gpus: 1},
			func(t *testing.T, w *world, e *Explanation) {
				if len(e.Shortages) != 0 || len(e.Reasons) != 1 || !strings.Contains(e.Reasons[0], "StrictFIFO and 1 workload(s) ahead") {
					t.Errorf("shortages %+v reasons %q, want the StrictFIFO reason", e.Shortages, e.Reasons)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, tt.cq, localQueue("user-queue", "cluster-queue"))
			w.submit(jobSpec{name: "a", queue: "user-queue", gpus: 1}, jobSpec{name: "b", queue: "user-queue", gpus: 1})
			w.settle()
			if tt.name == "fits behind a StrictFIFO head" {
				w.submit(jobSpec{name: "head", queue: "user-queue", gpus: 2}) // blocks the queue
				w.settle()                                                    // its workload is created first
				w.now = w.now.Add(time.Second)
			}
			w.submit(tt.third)
			w.settle()
			e, err := Explain(context.Background(), w.c, "default", w.workload("c").Name, w.now)
			if err != nil || e == nil {
				t.Fatalf("Explain: %v, %v", e, err)
			}
			tt.check(t, w, e)
			// An admitted workload has nothing to explain.
			if e, err := Explain(context.Background(), w.c, "default", w.workload("a").Name, w.now); e != nil || err != nil {
				t.Errorf("Explain of an admitted workload: %+v, %v", e, err)
			}
		})
	}
}
