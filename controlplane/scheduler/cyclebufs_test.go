package scheduler

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// The scheduling loop's cycles take their per-node arrays from a pool and
// give them back after the trace (cycleBufs). A cycle on reused, dirty
// arrays must find what a cycle on fresh ones finds: the same verdict per
// node, the same scores, node and message, and the same trace.
func TestPooledCycleMatchesFresh(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 26))
	s, p := newDefaultScheduler(t)
	for round := range 30 {
		// Clusters of 50–400 nodes: below and above the sizes where only
		// part of the nodes is looked at (numFeasibleNodesToFind).
		var nodes []*api.Node
		for i := range 50 + r.IntN(350) {
			n := gpuNode(fmt.Sprintf("n%03d", i), r.IntN(3))
			if r.IntN(5) == 0 {
				n.Labels["zone"] = "a"
			}
			if r.IntN(10) == 0 {
				n.Spec.Unschedulable = true
			}
			nodes = append(nodes, n)
		}
		var pods []*api.Pod
		for i := range r.IntN(200) {
			pods = append(pods, gpuPod(fmt.Sprintf("b%d", i), r.IntN(2), onNode(nodes[r.IntN(len(nodes))].Name), cpu("500m")))
		}
		snap := NewSnapshot(nodes, pods)
		for i := range 5 {
			pod := gpuPod(fmt.Sprintf("p%d-%d", round, i), r.IntN(3), cpu(fmt.Sprintf("%dm", 100*r.IntN(20))))
			if r.IntN(3) == 0 {
				pod.Spec.NodeSelector = map[string]string{"zone": "a"}
			}
			start := r.IntN(len(nodes))
			fresh := s.algorithm(p)
			want, wn, err := fresh.schedule(t.Context(), framework.NewCycleState(), pod, snap, start, s.now)
			if err != nil {
				t.Fatal(err)
			}
			pooled := s.algorithm(p)
			pooled.pooled = true
			got, gn, err := pooled.schedule(t.Context(), framework.NewCycleState(), pod, snap, start, s.now)
			if err != nil {
				t.Fatal(err)
			}
			if got.bufs == nil {
				t.Fatal("pooled cycle has no buffers")
			}
			wantSpans, gotSpans := traceSpans(want, want.Start, want.Start, nil), traceSpans(got, want.Start, want.Start, nil)
			b := got.bufs
			got.bufs, got.Start, got.FilterEnd, got.ScoreEnd = nil, want.Start, want.FilterEnd, want.ScoreEnd
			for i := range gotSpans {
				gotSpans[i].Start, gotSpans[i].End = wantSpans[i].Start, wantSpans[i].End
			}
			if gn != wn || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotSpans, wantSpans) {
				t.Fatalf("round %d pod %d: pooled cycle differs from a fresh one\n got %d %+v\nwant %d %+v", round, i, gn, got, wn, want)
			}
			got.bufs = b
			got.release() // the next pooled cycle reuses these arrays
			if got.Nodes != nil || got.Scores != nil {
				t.Fatal("release left the result's arrays")
			}
			if !zeroToCap(b.nodes) || !zeroToCap(b.feasible) || !zeroToCap(b.scores) || !zeroToCap(b.list) {
				t.Fatalf("round %d pod %d: release left entries in the pooled arrays", round, i)
			}
		}
	}
}

// zeroToCap reports whether every entry of xs up to its capacity is zero.
func zeroToCap[T any](xs []T) bool {
	for _, x := range xs[:cap(xs)] {
		if !reflect.ValueOf(&x).Elem().IsZero() {
			return false
		}
	}
	return true
}

// selectFirst picks the same first k as a full sort, on lists with many
// ties in the first key (as nodes' equal totals).
func TestSelectFirstMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 26))
	for range 3000 {
		n := r.IntN(300)
		keys := make([]int, n)
		for i := range keys {
			keys[i] = r.IntN(1+r.IntN(20))*1000 + i // unique: ties broken by i
		}
		cmp := func(a, b int) int { return keys[a] - keys[b] }
		xs, want := make([]int, n), make([]int, n)
		for i := range xs {
			xs[i] = i
		}
		r.Shuffle(n, func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
		copy(want, xs)
		slices.SortFunc(want, cmp)
		k := r.IntN(n + 1)
		selectFirst(xs, k, cmp)
		got := slices.Clone(xs[:k])
		slices.SortFunc(got, cmp)
		if !slices.Equal(got, want[:k]) {
			t.Fatalf("n=%d k=%d: got %v, want %v", n, k, got, want[:k])
		}
	}
}
