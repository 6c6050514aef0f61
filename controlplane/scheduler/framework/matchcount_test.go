package framework

import (
	"fmt"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
)

// Score runs on many nodes at once and several cycles may read one
// NodeInfo: counts asked concurrently, more keys than the memo keeps, are
// each what a scan finds.
func TestCountMatchingConcurrentAndBounded(t *testing.T) {
	n := &NodeInfo{}
	for i := range 60 {
		p := &api.Pod{ObjectMeta: api.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p%d", i),
			Labels: map[string]string{"app": fmt.Sprintf("a%d", i%7)}}}
		n.AddPod(NewPodInfo(p))
	}
	const keys = matchMemoMax + 50 // the memo starts again at least once
	var wg sync.WaitGroup
	errs := make(chan string, 8*keys)
	for w := range 8 {
		wg.Go(func() {
			for k := range keys {
				app := fmt.Sprintf("a%d", (k+w)%keys)
				sel := labels.SelectorFromSet(labels.Set{"app": app})
				want := n.countMatchingScan("ns", sel)
				if got := n.CountMatching("ns", sel, MatchKey("ns", sel)); got != want {
					errs <- fmt.Sprintf("app=%s: counted %d, a scan finds %d", app, got, want)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if m := n.matches.Load(); m == nil || len(m.counts) > matchMemoMax {
		t.Fatalf("memo %v, want at most %d counts", m, matchMemoMax)
	}
	// Apps a0..a6 have pods: the counts add up to every pod.
	var sum int64
	for a := range 7 {
		sel := labels.SelectorFromSet(labels.Set{"app": fmt.Sprintf("a%d", a)})
		sum += n.CountMatching("ns", sel, MatchKey("ns", sel))
	}
	if sum != 60 {
		t.Fatalf("counts of a0..a6 sum to %d, want 60", sum)
	}
}
