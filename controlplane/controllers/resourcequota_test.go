package controllers

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

// laggingCache is a Lister the test fills by hand: an informer's cache
// behind the store.
type laggingCache struct {
	mu   sync.Mutex
	objs staticLister
}

func (l *laggingCache) Get(namespace, name string) (api.Object, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.objs.Get(namespace, name)
}

func (l *laggingCache) ListBy(sel labels.Selector, namespace string) []api.Object {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.objs.ListBy(sel, namespace)
}

func (l *laggingCache) add(o api.Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.objs[api.KeyOf(o)] = o
}

type nopQueue struct{}

func (nopQueue) Enqueue(string)                     {}
func (nopQueue) EnqueueAfter(string, time.Duration) {}

func quotaPod(name string) *api.Pod {
	return &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "room"},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "busybox"}}}}
}

// settledQuota is a quota whose status counts two pods, both charged by
// admission and settled (no reservation left): written after them.
func settledQuota() *api.ResourceQuota {
	hard := api.ResourceList{"pods": resource.MustParse("10")}
	return &api.ResourceQuota{ObjectMeta: api.ObjectMeta{Name: "q", Namespace: "room"},
		Spec:   api.ResourceQuotaSpec{Hard: hard},
		Status: api.ResourceQuotaStatus{Hard: hard, Used: api.ResourceList{"pods": resource.MustParse("2")}}}
}

func usedPods(t *testing.T, c *fake.Client) string {
	t.Helper()
	q := get[*api.ResourceQuota](t, c, "room", "q")
	n := q.Status.Used["pods"]
	return n.String()
}

// countPodLists counts, from now on, the lists of pods c serves.
func countPodLists(c *fake.Client) func() int64 {
	var n atomic.Int64
	c.Intercept(func(a fake.Action) error {
		if a.Verb == "list" && a.Kind == "Pod" {
			n.Add(1)
		}
		return nil
	})
	return n.Load
}

// A count from a cache behind a settled charge is not lowered: the
// controller counts again once the cache has reached the quota's
// resourceVersion (here: a later pod's add), without listing the pods.
func TestResourceQuotaWaitsForItsCache(t *testing.T) {
	c := fake.New(quotaPod("a"), quotaPod("b"), settledQuota())
	a := get[*api.Pod](t, c, "room", "a")
	b := get[*api.Pod](t, c, "room", "b")
	cache := &laggingCache{objs: newStaticLister(a)} // b is stored, not cached yet
	rc := NewResourceQuotaController(c, newStaticLister(), map[string]Lister{"Pod": cache}, nil)
	h := rc.ObjectHandler(podKind(), nopQueue{})
	h.OnAdd(a)
	podLists := countPodLists(c)

	done := make(chan error, 1)
	go func() { done <- rc.Reconcile(context.Background(), "room/q") }()
	// The cache catches up: b, then a pod created after the quota's write.
	later, err := c.Create(context.Background(), quotaPod("c"))
	if err != nil {
		t.Fatal(err)
	}
	cache.add(b)
	h.OnAdd(b)
	cache.add(later)
	h.OnAdd(later)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := usedPods(t, c); got != "3" {
		t.Errorf("used pods = %s, want 3 (a, b and c counted from the cache)", got)
	}
	if n := podLists(); n != 0 {
		t.Errorf("%d lists of pods, want none: the cache had reached the quota", n)
	}
}

// When the cache does not reach the quota's resourceVersion (no change of
// the kind since), the controller counts from a fresh list, and lowers
// nothing that is stored.
func TestResourceQuotaListsWhenItsCacheStaysBehind(t *testing.T) {
	c := fake.New(quotaPod("a"), quotaPod("b"), settledQuota())
	a := get[*api.Pod](t, c, "room", "a")
	rc := NewResourceQuotaController(c, newStaticLister(), map[string]Lister{"Pod": &laggingCache{objs: newStaticLister(a)}}, nil)
	rc.ObjectHandler(podKind(), nopQueue{}).OnAdd(a)
	podLists := countPodLists(c)
	if err := rc.Reconcile(context.Background(), "room/q"); err != nil {
		t.Fatal(err)
	}
	if got := usedPods(t, c); got != "2" {
		t.Errorf("used pods = %s, want 2 (a and b, listed)", got)
	}
	if n := podLists(); n != 1 {
		t.Errorf("%d lists of pods, want 1", n)
	}
}

// A usage that did go down (a pod deleted after the quota's last write) is
// lowered from the cache at once.
func TestResourceQuotaLowersFromACacheThatReachedIt(t *testing.T) {
	c := fake.New(quotaPod("a"), quotaPod("b"), settledQuota())
	a := get[*api.Pod](t, c, "room", "a")
	b := get[*api.Pod](t, c, "room", "b")
	if err := c.Delete(context.Background(), podKind(), "room", "b", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := api.Clone(b)
	gone.ResourceVersion = c.ResourceVersion()
	rc := NewResourceQuotaController(c, newStaticLister(), map[string]Lister{"Pod": &laggingCache{objs: newStaticLister(a)}}, nil)
	h := rc.ObjectHandler(podKind(), nopQueue{})
	h.OnAdd(a)
	h.OnDelete(gone)
	podLists := countPodLists(c)
	if err := rc.Reconcile(context.Background(), "room/q"); err != nil {
		t.Fatal(err)
	}
	if got := usedPods(t, c); got != "1" {
		t.Errorf("used pods = %s, want 1", got)
	}
	if n := podLists(); n != 0 {
		t.Errorf("%d lists of pods, want none", n)
	}
}

// recordingQueue records what the handlers enqueue, as "key" or
// "key after D".
type recordingQueue struct{ got []string }

func (r *recordingQueue) Enqueue(key string) { r.got = append(r.got, key) }
func (r *recordingQueue) EnqueueAfter(key string, d time.Duration) {
	if d <= 0 {
		r.Enqueue(key)
		return
	}
	r.got = append(r.got, key+" after "+d.String())
}

func (r *recordingQueue) take() []string {
	got := r.got
	r.got = nil
	return got
}

// A quota is counted when it comes, goes, changes its spec, or has a
// status that does not answer its spec; not on admission's writes of its
// usage and reservations. An object's add recounts its namespace's quotas
// addRecount later, its removal at once.
func TestResourceQuotaHandlers(t *testing.T) {
	q := settledQuota()
	q.ResourceVersion = "3"
	rc := NewResourceQuotaController(fake.New(), newStaticLister(q), nil, nil)
	var queue recordingQueue
	qh := rc.QuotaHandler(&queue)
	charged := api.Clone(q)
	charged.Status.Used["pods"] = resource.MustParse("3")
	charged.Annotations = map[string]string{"example": "reservations"}
	respec := api.Clone(q)
	respec.Spec.Hard["pods"] = resource.MustParse("20")
	scoped := api.Clone(q)
	scoped.Spec.Scopes = []string{"NotTerminating"}
	unknown := api.Clone(q)
	unknown.Status = api.ResourceQuotaStatus{}
	lacking := api.Clone(q)
	lacking.Spec.Hard["requests.nvidia.com/gpu"] = resource.MustParse("1")
	lacking.Status.Hard = lacking.Spec.Hard
	for _, c := range []struct {
		name string
		do   func()
		want []string
	}{
		{"add", func() { qh.OnAdd(q) }, []string{"room/q"}},
		{"admission's charge", func() { qh.OnUpdate(q, charged) }, nil},
		{"spec.hard", func() { qh.OnUpdate(q, respec) }, []string{"room/q"}},
		{"spec.scopes", func() { qh.OnUpdate(q, scoped) }, []string{"room/q"}},
		{"status emptied", func() { qh.OnUpdate(q, unknown) }, []string{"room/q"}},
		{"a hard resource without usage", func() { qh.OnUpdate(lacking, lacking) }, []string{"room/q"}},
		{"delete", func() { qh.OnDelete(q) }, []string{"room/q"}},
	} {
		c.do()
		if got := queue.take(); !slices.Equal(got, c.want) {
			t.Errorf("%s: enqueued %q, want %q", c.name, got, c.want)
		}
	}

	oh := rc.ObjectHandler(podKind(), &queue)
	p := quotaPod("a")
	p.ResourceVersion = "4"
	ended := api.Clone(p)
	ended.Status.Phase = api.PodSucceeded
	relabelled := api.Clone(p)
	relabelled.Labels = map[string]string{"x": "y"}
	for _, c := range []struct {
		name string
		do   func()
		want []string
	}{
		{"pod added", func() { oh.OnAdd(p) }, []string{"room/q after " + addRecount.String()}},
		{"pod relabelled", func() { oh.OnUpdate(p, relabelled) }, nil},
		{"pod ended", func() { oh.OnUpdate(p, ended) }, []string{"room/q"}},
		{"pod deleted", func() { oh.OnDelete(p) }, []string{"room/q"}},
	} {
		c.do()
		if got := queue.take(); !slices.Equal(got, c.want) {
			t.Errorf("%s: enqueued %q, want %q", c.name, got, c.want)
		}
	}
}

// The recount after an add waits recountDuty times what the namespace's
// last count took (at most maxAddRecount, at least addRecount), so a
// burst of creates into a large namespace does not spend the server's CPU
// recounting it; a namespace never counted, or counted quickly, waits
// addRecount. Its clock moves step at each reading: the count reads it at
// least twice.
func TestResourceQuotaAddRecountFollowsTheCountsCost(t *testing.T) {
	for _, c := range []struct {
		step     time.Duration
		min, max time.Duration // of the wait after an add in "room"
	}{
		{0, addRecount, addRecount},
		{time.Millisecond, addRecount, addRecount + time.Second},
		{50 * time.Millisecond, 5 * time.Second, maxAddRecount},
		{time.Second, maxAddRecount, maxAddRecount},
	} {
		fc := fake.New(quotaPod("a"), quotaPod("b"), settledQuota())
		a := get[*api.Pod](t, fc, "room", "a")
		b := get[*api.Pod](t, fc, "room", "b")
		q := get[*api.ResourceQuota](t, fc, "room", "q")
		other := quotaPod("x")
		other.Namespace = "lab"
		otherQ := api.Clone(q)
		otherQ.Namespace = "lab"
		rc := NewResourceQuotaController(fc, newStaticLister(q, otherQ), map[string]Lister{"Pod": newStaticLister(a, b)}, nil)
		var mu sync.Mutex
		clock := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		rc.now = func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			clock = clock.Add(c.step)
			return clock
		}
		var queue recordingQueue
		oh := rc.ObjectHandler(podKind(), &queue)
		oh.OnAdd(a)
		if got, want := queue.take(), []string{"room/q after " + addRecount.String()}; !slices.Equal(got, want) {
			t.Errorf("step %s, before any count: enqueued %q, want %q", c.step, got, want)
		}
		if err := rc.Reconcile(context.Background(), "room/q"); err != nil {
			t.Fatal(err)
		}
		oh.OnAdd(a)
		oh.OnAdd(other)
		got := queue.take()
		if len(got) != 2 || got[1] != "lab/q after "+addRecount.String() {
			t.Fatalf("step %s: enqueued %q, want room/q's wait, then lab/q after %s (never counted)", c.step, got, addRecount)
		}
		d, ok := strings.CutPrefix(got[0], "room/q after ")
		wait, err := time.ParseDuration(d)
		if !ok || err != nil || wait < c.min || wait > c.max {
			t.Errorf("step %s: enqueued %q after an add, want room/q after %s to %s", c.step, got[0], c.min, c.max)
		}
		// A change that frees usage is counted at once, however slow.
		oh.OnDelete(a)
		if got := queue.take(); !slices.Equal(got, []string{"room/q"}) {
			t.Errorf("step %s, pod deleted: enqueued %q, want room/q at once", c.step, got)
		}
	}
}
