package client_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/internal/testwait"
)

// countingClient counts the lists and watches its informers open.
type countingClient struct {
	*fake.Client
	mu      sync.Mutex
	watches map[string]int
}

func (c *countingClient) Watch(ctx context.Context, k *api.Kind, ns string, opts api.ListOptions) (client.Watcher, error) {
	c.mu.Lock()
	c.watches[k.Resource]++
	c.mu.Unlock()
	return c.Client.Watch(ctx, k, ns, opts)
}

func (c *countingClient) count(resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watches[resource]
}

func TestFactorySharesOneInformerAndOneWatchPerKind(t *testing.T) {
	c := &countingClient{Client: fake.New(testPod("default", "a", "n1", nil)), watches: map[string]int{}}
	f := client.NewInformerFactory(c, nil)
	p1, p2 := f.InformerFor(&api.Pod{}), f.Informer(kind(t, &api.Pod{}))
	if p1 != p2 {
		t.Fatal("two informers for pods")
	}
	nodes := f.InformerFor(&api.Node{})
	if nodes == p1 {
		t.Fatal("nodes share the pods' informer")
	}
	var a, b changeLog
	p1.AddHandler(a.handler())
	p2.AddHandler(b.handler())
	ctx, cancel := context.WithCancel(t.Context())
	f.Start(ctx)
	f.Start(ctx) // a second component's Start is a no-op
	defer func() { cancel(); f.Wait() }()
	if !f.WaitForCacheSync(ctx) {
		t.Fatal("caches did not sync")
	}
	if _, err := c.Create(ctx, testPod("default", "b", "n1", nil)); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		return a.has("add default/b") && b.has("add default/b"), fmt.Sprintf("a=%v b=%v", a.snapshot(), b.snapshot())
	})
	// An informer asked for after Start runs at once.
	late := f.InformerFor(&api.Namespace{})
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if !late.WaitForSync(wctx) {
		t.Fatal("an informer made after Start never synced")
	}
	if got := c.count("pods"); got != 1 {
		t.Errorf("pods watched %d times; want 1 (one stream for both handlers)", got)
	}
	if got := len(f.Informers()); got != 3 {
		t.Errorf("%d informers; want 3 (pods, nodes, namespaces)", got)
	}
}

// A handler added while the informer runs first sees every cached object
// as an add, then the changes after it, each once, even while changes
// stream in.
func TestInformerLateHandlerSeesEveryObjectOnce(t *testing.T) {
	f := fake.New()
	ctx := t.Context()
	for i := range 20 {
		if _, err := f.Create(ctx, testPod("default", fmt.Sprintf("p%02d", i), "n1", nil)); err != nil {
			t.Fatal(err)
		}
	}
	inf := client.NewInformer(f, kind(t, &api.Pod{}), "", api.ListOptions{}, nil)
	startInformer(t, inf)
	writes := make(chan struct{})
	go func() {
		defer close(writes)
		for i := 20; i < 60; i++ {
			if _, err := f.Create(ctx, testPod("default", fmt.Sprintf("p%02d", i), "n1", nil)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var cl changeLog
	reg := inf.AddHandler(cl.handler())
	<-writes
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		return len(inf.List()) == 60 && cl.has("add default/p59"), fmt.Sprintf("%d cached, %d seen", len(inf.List()), len(cl.snapshot()))
	})
	seen := map[string]int{}
	for _, s := range cl.snapshot() {
		seen[s]++
	}
	for i := range 60 {
		if n := seen[fmt.Sprintf("add default/p%02d", i)]; n != 1 {
			t.Errorf("p%02d added %d times; want once", i, n)
		}
	}
	// Removed: no more calls.
	inf.RemoveHandler(reg)
	inf.RemoveHandler(reg) // twice is fine
	before := len(cl.snapshot())
	if _, err := f.Create(ctx, testPod("default", "after", "n1", nil)); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		_, ok := inf.Get("default", "after")
		return ok, "the informer has not seen the pod"
	})
	if got := cl.snapshot(); len(got) != before || slices.Contains(got, "add default/after") {
		t.Errorf("a removed handler was called: %v", got[before:])
	}
}

// An index added while the informer runs indexes what is cached already.
func TestInformerLateIndex(t *testing.T) {
	f := fake.New(testPod("default", "a", "n1", nil), testPod("default", "b", "n2", nil), testPod("default", "c", "n1", nil))
	inf := client.NewInformer(f, kind(t, &api.Pod{}), "", api.ListOptions{}, nil)
	startInformer(t, inf)
	inf.AddIndex("node", func(o api.Object) []string { return []string{o.(*api.Pod).Spec.NodeName} })
	var names []string
	for _, o := range inf.ByIndex("node", "n1") {
		names = append(names, o.GetObjectMeta().Name)
	}
	if !slices.Equal(names, []string{"a", "c"}) {
		t.Errorf("node n1: %v; want [a c]", names)
	}
	if _, err := f.Create(t.Context(), testPod("default", "d", "n1", nil)); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		return len(inf.ByIndex("node", "n1")) == 3, "d not indexed"
	})
}
