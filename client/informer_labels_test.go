package client_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

// With IndexLabels, ListBy answers from the label index for selectors that
// require a value, and must give what a scan of the cache gives (the same
// objects, in key order) for every kind of selector, through random
// creates, relabels and deletes.
func TestListByWithLabelIndexIsAScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 4))
	f := fake.New()
	pods := kind(t, &api.Pod{})
	inf := client.NewInformer(f, pods, "", api.ListOptions{}, nil)
	inf.IndexLabels()
	inf.IndexLabels() // twice: a no-op
	startInformer(t, inf)

	randomLabels := func() map[string]string {
		l := map[string]string{}
		for _, k := range []string{"app", "tier", "hash"} {
			if rng.IntN(3) > 0 {
				l[k] = fmt.Sprint(rng.IntN(3))
			}
		}
		return l
	}
	var sels []labels.Selector
	for _, s := range []string{"", "app=1", "app==2", "app in (0)", "app in (0,1)", "app=1,tier=2", "app=0,tier!=1",
		"app notin (1)", "tier", "!hash", "app=1,hash in (2),tier", "app=9", "app in (0),tier in (1)"} {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		sels = append(sels, sel)
	}
	sels = append(sels, nil, labels.Nothing())
	scan := func(sel labels.Selector, ns string) []string {
		var out []string
		for _, o := range inf.List() {
			m := o.GetObjectMeta()
			if (ns == "" || m.Namespace == ns) && (sel == nil || sel.Matches(labels.Set(m.Labels))) {
				out = append(out, api.KeyOf(o))
			}
		}
		return out
	}
	indexed := false // some answer in a namespace, with a selector, was not empty
	f.ChurnPods(t, inf, fake.Churn{Rand: rng, Namespaces: []string{"x", "y"}, Names: 30, Steps: 240, Every: 12,
		New:    func(ns, name string) *api.Pod { return testPod(ns, name, "", randomLabels()) },
		Change: func(p *api.Pod) { p.Labels = randomLabels() },
		Check: func(step int) {
			for _, sel := range sels {
				for _, ns := range []string{"", "x", "y"} {
					got := keys(inf.ListBy(sel, ns))
					if w := scan(sel, ns); !slices.Equal(got, w) {
						t.Fatalf("step %d: ListBy(%v, %q) = %v, a scan gives %v", step, sel, ns, got, w)
					}
					if len(got) > 0 && sel != nil && !sel.Empty() && ns != "" {
						indexed = true
					}
				}
			}
		},
	})
	if !indexed {
		t.Fatal("no selector in a namespace ever matched anything: the test compared nothing the index answers")
	}
}

// BenchmarkListBySelector: a Service's sync lists the pods its selector
// picks out of 20,000 in its namespace (200 apps of 100), with and without
// the label index.
func BenchmarkListBySelector(b *testing.B) {
	var objs []api.Object
	for i := range 20000 {
		objs = append(objs, testPod("bench", fmt.Sprintf("p%05d", i), "", map[string]string{"app": fmt.Sprint(i % 200), "hash": "h"}))
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "7", "hash": "h"})
	for _, indexed := range []bool{false, true} {
		b.Run(fmt.Sprintf("indexed=%v", indexed), func(b *testing.B) {
			inf := client.NewInformer(fake.New(objs...), kind(b, &api.Pod{}), "", api.ListOptions{}, nil)
			if indexed {
				inf.IndexLabels()
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); inf.Run(ctx) }()
			defer func() { cancel(); <-done }()
			if !inf.WaitForSync(ctx) {
				b.Fatal("informer did not sync")
			}
			for b.Loop() {
				if n := len(inf.ListBy(sel, "bench")); n != 100 {
					b.Fatalf("%d pods, want 100", n)
				}
			}
		})
	}
}
