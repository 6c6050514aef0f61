package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/controllers"
	"skiff.dev/skiff/controlplane/quota"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/internal/testwait"
)

func quantities(kv ...string) api.ResourceList {
	out := api.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = resource.MustParse(kv[i+1])
	}
	return out
}

func gpuPodIn(ns, name string) *api.Pod {
	p := nginx(ns, name)
	p.Spec.Containers[0].Resources = api.ResourceRequirements{Limits: quantities("nvidia.com/gpu", "1")}
	return p
}

// runQuotaController runs the real resourcequota controller over the
// registry (its pods from an informer, the rest listed) until the test ends.
func runQuotaController(t *testing.T, e *env) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pods := client.NewInformer(e.local, podKind, "", api.ListOptions{}, nil)
	quotas := client.NewInformer(e.local, quotaKind, "", api.ListOptions{}, nil)
	rc := controllers.NewResourceQuotaController(e.local, quotas, map[string]controllers.Lister{"Pod": pods}, slog.New(slog.DiscardHandler))
	opts := client.DefaultLoopOptions("quota")
	opts.Resync = time.Second
	loop := client.NewLoop(rc, opts)
	loop.SetResyncFunc(quotas.Keys)
	quotas.AddHandler(rc.QuotaHandler(loop))
	pods.AddHandler(rc.ObjectHandler(podKind, loop))
	var wg sync.WaitGroup
	wg.Go(func() { pods.Run(ctx) })
	wg.Go(func() { quotas.Run(ctx) })
	if !pods.WaitForSync(ctx) || !quotas.WaitForSync(ctx) {
		t.Fatal("informers did not sync")
	}
	wg.Go(func() { _ = loop.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// waitUsed waits until the quota's status.used of name reads want and the
// controller's count agrees (no reservation of an object it does not see).
func waitUsed(t *testing.T, e *env, ns, q, name, want string) {
	t.Helper()
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		o, err := e.local.Get(context.Background(), quotaKind, ns, q)
		if err != nil {
			return false, err.Error()
		}
		rq := o.(*api.ResourceQuota)
		got, ok := rq.Status.Used[name]
		var objs []quota.Objects
		for _, k := range quota.KindsFor(rq.Spec.Hard, api.Kinds) {
			items, _, err := e.local.List(context.Background(), k, ns, api.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			objs = append(objs, quota.Objects{Kind: k, Items: items})
		}
		st, _ := quota.Calculate(rq, objs, time.Now(), nil)
		counted := st.Used[name]
		return ok && got.String() == want && counted.String() == want,
			fmt.Sprintf("used %v, counted %v, reservations %v", rq.Status.Used, st.Used, quota.Reservations(rq))
	})
}

// Twelve students' pods race for three GPUs: exactly three are created,
// the others are refused in Kubernetes' words; the controller and
// admission agree on every count, while pods come and go.
func TestQuotaLastGPURace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ensureNamespace(t, e, ctx, "bob")
	runQuotaController(t, e)
	q := &api.ResourceQuota{ObjectMeta: api.ObjectMeta{Name: "gpus", Namespace: "bob"},
		Spec: api.ResourceQuotaSpec{Hard: quantities("requests.nvidia.com/gpu", "3", "pods", "10")}}
	if _, err := e.local.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, e, "bob", "gpus", "requests.nvidia.com/gpu", "0")

	const n = 12
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = e.local.Create(ctx, gpuPodIn("bob", fmt.Sprintf("gpu-%d", i))) })
	}
	wg.Wait()
	created := 0
	for i, err := range errs {
		if err == nil {
			created++
			continue
		}
		want := fmt.Sprintf(`pods "gpu-%d" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=3, limited: requests.nvidia.com/gpu=3`, i)
		if err.Error() != want || api.ReasonOf(err) != api.ReasonForbidden {
			t.Errorf("pod %d: %v, want %s", i, err, want)
		}
	}
	if created != 3 {
		t.Fatalf("%d GPU pods created against a quota of 3", created)
	}
	waitUsed(t, e, "bob", "gpus", "requests.nvidia.com/gpu", "3")

	// A pod that ends frees its GPU: the controller counts it out.
	pods, _, _ := e.local.List(ctx, podKind, "bob", api.ListOptions{})
	done := api.Clone(pods[0]).(*api.Pod)
	done.Status.Phase = api.PodSucceeded
	if _, err := e.local.UpdateStatus(ctx, done); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, e, "bob", "gpus", "requests.nvidia.com/gpu", "2")
	if _, err := e.local.Create(ctx, gpuPodIn("bob", "after")); err != nil {
		t.Fatalf("a GPU freed, a new pod: %v", err)
	}
	waitUsed(t, e, "bob", "gpus", "requests.nvidia.com/gpu", "3")
	o, _ := e.local.Get(ctx, quotaKind, "bob", "gpus")
	if used := o.(*api.ResourceQuota).Status.Used["pods"]; used.String() != "3" {
		t.Errorf("pods used %s, want 3 (the ended pod does not count)", used.String())
	}
}

// A create that fails after its charge (the name is taken) takes the
// charge back at once, without waiting for the controller; a dry run
// charges nothing.
func TestQuotaFailedCreateReleases(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ensureNamespace(t, e, ctx, "bob")
	q := &api.ResourceQuota{ObjectMeta: api.ObjectMeta{Name: "gpus", Namespace: "bob"},
		Spec: api.ResourceQuotaSpec{Hard: quantities("requests.nvidia.com/gpu", "2")}}
	out, err := e.local.Create(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	// Not counted yet: what it covers waits for the count.
	_, err = e.local.Create(ctx, gpuPodIn("bob", "early"))
	if want := `pods "early" is forbidden: status unknown for quota: gpus, resources: requests.nvidia.com/gpu`; err == nil || err.Error() != want {
		t.Errorf("before the first count: %v, want %s", err, want)
	}
	// No controller here: write the status it would.
	q = api.Clone(out).(*api.ResourceQuota)
	q.Status = api.ResourceQuotaStatus{Hard: quantities("requests.nvidia.com/gpu", "2"), Used: quantities("requests.nvidia.com/gpu", "0")}
	if _, err := e.local.UpdateStatus(ctx, q); err != nil {
		t.Fatal(err)
	}
	used := func() string {
		o, err := e.local.Get(ctx, quotaKind, "bob", "gpus")
		if err != nil {
			t.Fatal(err)
		}
		u := o.(*api.ResourceQuota).Status.Used["requests.nvidia.com/gpu"]
		return fmt.Sprintf("%s/%d", u.String(), len(quota.Reservations(o.(*api.ResourceQuota))))
	}
	if _, err := e.local.Create(ctx, gpuPodIn("bob", "a")); err != nil {
		t.Fatal(err)
	}
	if got := used(); got != "1/1" {
		t.Fatalf("after one pod: used/reservations %s, want 1/1", got)
	}
	if _, err := e.local.Create(ctx, gpuPodIn("bob", "a")); !api.IsAlreadyExists(err) {
		t.Fatalf("the same name again: %v", err)
	}
	// Its charge was taken back; the first pod's reservation settled in
	// that write (the pod is stored).
	if got := used(); got != "1/0" {
		t.Errorf("after a failed create: used/reservations %s, want 1/0 (its charge taken back)", got)
	}
	code, b := e.do("POST", "/api/v1/namespaces/bob/pods?dryRun=All", gpuPodIn("bob", "dry"))
	if code != 201 {
		t.Fatalf("dry run: %d %s", code, b)
	}
	if got := used(); got != "1/0" {
		t.Errorf("after a dry run: used/reservations %s, want 1/0", got)
	}
	code, b = e.do("POST", "/api/v1/namespaces/bob/pods", gpuPodIn("bob", "b"))
	if code != 201 {
		t.Fatalf("second GPU: %d %s", code, b)
	}
	code, b = e.do("POST", "/api/v1/namespaces/bob/pods", gpuPodIn("bob", "c"))
	st := status(t, b, 403, api.ReasonForbidden)
	if want := `pods "c" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2`; code != 403 || st.Message != want {
		t.Errorf("third GPU: %d %q, want 403 %q", code, st.Message, want)
	}
}

// LimitRange defaults apply before quota counts: pods without resources
// get the defaults, say so in their annotation, and are charged them.
func TestLimitRangeDefaultsBeforeQuota(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ensureNamespace(t, e, ctx, "lab")
	runQuotaController(t, e)
	lr := &api.LimitRange{ObjectMeta: api.ObjectMeta{Name: "defaults", Namespace: "lab"}, Spec: api.LimitRangeSpec{Limits: []api.LimitRangeItem{
		{Type: api.LimitTypeContainer, Default: quantities("cpu", "500m", "memory", "256Mi"), DefaultRequest: quantities("cpu", "500m", "memory", "128Mi"), Max: quantities("cpu", "1")}}}}
	q := &api.ResourceQuota{ObjectMeta: api.ObjectMeta{Name: "compute", Namespace: "lab"},
		Spec: api.ResourceQuotaSpec{Hard: quantities("requests.cpu", "1", "limits.memory", "1Gi")}}
	for _, o := range []api.Object{lr, q} {
		if _, err := e.local.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitUsed(t, e, "lab", "compute", "requests.cpu", "0")
	out, err := e.local.Create(ctx, nginx("lab", "one"))
	if err != nil {
		t.Fatal(err)
	}
	p := out.(*api.Pod)
	if want := "LimitRanger plugin set: cpu, memory request for container web; cpu, memory limit for container web"; p.Annotations[api.AnnotationLimitRanger] != want {
		t.Errorf("annotation %q, want %q", p.Annotations[api.AnnotationLimitRanger], want)
	}
	if _, err := e.local.Create(ctx, nginx("lab", "two")); err != nil {
		t.Fatal(err)
	}
	_, err = e.local.Create(ctx, nginx("lab", "three"))
	if want := `pods "three" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=1, limited: requests.cpu=1`; err == nil || err.Error() != want {
		t.Errorf("third pod: %v, want %s", err, want)
	}
	big := nginx("lab", "big")
	big.Spec.Containers[0].Resources = api.ResourceRequirements{Limits: quantities("cpu", "2")}
	_, err = e.local.Create(ctx, big)
	if want := `pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2`; err == nil || err.Error() != want {
		t.Errorf("over the limit range: %v, want %s", err, want)
	}
	waitUsed(t, e, "lab", "compute", "limits.memory", "512Mi")
	if !strings.Contains(fmt.Sprint(err), "forbidden") {
		t.Error("no refusal")
	}
}

// Between batches, admission keeps the namespace's quotas as it wrote them
// (listShared, keepAfterOwnWrites) instead of listing them again, and still sees at once every
// write that is not its own: a quota lowered, a quota added, a quota gone.
func TestQuotaKnownBetweenBatches(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ensureNamespace(t, e, ctx, "bob")
	counted := func(name, hard string) *api.ResourceQuota {
		t.Helper()
		q := &api.ResourceQuota{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "bob"},
			Spec: api.ResourceQuotaSpec{Hard: quantities("requests.nvidia.com/gpu", hard)}}
		out, err := e.local.Create(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		q = api.Clone(out).(*api.ResourceQuota) // no controller here: write the status it would
		q.Status = api.ResourceQuotaStatus{Hard: quantities("requests.nvidia.com/gpu", hard), Used: quantities("requests.nvidia.com/gpu", "0")}
		out, err = e.local.UpdateStatus(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*api.ResourceQuota)
	}
	create := func(name string) error {
		_, err := e.local.Create(ctx, gpuPodIn("bob", name))
		return err
	}
	counted("gpus", "4")
	if err := create("a"); err != nil {
		t.Fatal(err)
	}
	stored, err := e.local.Get(ctx, quotaKind, "bob", "gpus")
	if err != nil {
		t.Fatal(err)
	}
	// The create rode in its charge's commit; the batch keeps the quota
	// it wrote once it hears that commit, which may be after the create's
	// answer.
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		known, _, ok := e.reg.kept(quotaKind, "bob")
		return ok && len(known) == 1 && known[0].GetObjectMeta().ResourceVersion == stored.GetObjectMeta().ResourceVersion,
			fmt.Sprintf("after a charged create: known %v (%v), want the stored quota at %s", known, ok, stored.GetObjectMeta().ResourceVersion)
	})
	if n, err := e.reg.countQuotas(ctx, "bob"); err != nil || n != 1 {
		t.Fatalf("countQuotas = %d, %v; want 1", n, err)
	}

	// Someone else lowers the quota to the one GPU in use (its status.hard,
	// which admission checks against, as the controller would write it).
	q := api.Clone(stored).(*api.ResourceQuota)
	q.Status.Hard = quantities("requests.nvidia.com/gpu", "1")
	if _, err := e.local.UpdateStatus(ctx, q); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := e.reg.kept(quotaKind, "bob"); ok {
		t.Fatal("a quota written by someone else is still known as it was")
	}
	err = create("b")
	if want := `pods "b" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=1`; err == nil || err.Error() != want {
		t.Fatalf("after the quota was lowered: %v, want %s", err, want)
	}

	// The quota raised again; a second quota appears, then goes: each is
	// seen.
	o, err := e.local.Get(ctx, quotaKind, "bob", "gpus")
	if err != nil {
		t.Fatal(err)
	}
	raised := api.Clone(o).(*api.ResourceQuota)
	raised.Status.Hard = quantities("requests.nvidia.com/gpu", "5")
	if _, err := e.local.UpdateStatus(ctx, raised); err != nil {
		t.Fatal(err)
	}
	if err := create("c"); err != nil {
		t.Fatal(err)
	}
	counted("tight", "0")
	err = create("d")
	if want := `pods "d" is forbidden: exceeded quota: tight, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=0`; err == nil || err.Error() != want {
		t.Fatalf("after a second quota of 0: %v, want %s", err, want)
	}
	if err := e.local.Delete(ctx, quotaKind, "bob", "tight", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := create("d"); err != nil {
		t.Fatalf("the quota of 0 deleted: %v", err)
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		known, _, ok := e.reg.kept(quotaKind, "bob")
		return ok && len(known) == 1 && known[0].GetObjectMeta().Name == "gpus",
			fmt.Sprintf("after the delete and a create: known %v (%v), want gpus alone", known, ok)
	})
}

// createGPUQuota creates the quota "gpus" of hard GPUs in ns, and writes
// the status the resourcequota controller would (there is none here),
// with used of them in use.
func createGPUQuota(t *testing.T, reg *Registry, ns, hard, used string) {
	t.Helper()
	ctx := context.Background()
	out, err := reg.Create(ctx, quotaKind, &api.ResourceQuota{ObjectMeta: api.ObjectMeta{Name: "gpus", Namespace: ns},
		Spec: api.ResourceQuotaSpec{Hard: quantities("requests.nvidia.com/gpu", hard)}})
	if err != nil {
		t.Fatal(err)
	}
	q := api.Clone(out).(*api.ResourceQuota)
	q.Status = api.ResourceQuotaStatus{Hard: quantities("requests.nvidia.com/gpu", hard), Used: quantities("requests.nvidia.com/gpu", used)}
	if _, err := reg.UpdateStatus(ctx, quotaKind, q); err != nil {
		t.Fatal(err)
	}
}

// racingStore is a bbolt store on which someone else writes a quota just
// before each of the first lose quota writes admission queues: those
// writes lose their race (a conflict), as to the resourcequota controller.
type racingStore struct {
	*store.Bolt
	mu   sync.Mutex
	lose int
	lost int
}

func (s *racingStore) UpdateQueued(ctx context.Context, obj api.Object) (*store.Queued, error) {
	s.mu.Lock()
	race := s.lost < s.lose
	if race {
		s.lost++
	}
	s.mu.Unlock()
	if q, ok := obj.(*api.ResourceQuota); ok && race {
		cur, err := s.Get(ctx, quotaKind, q.Namespace, q.Name)
		if err != nil {
			return nil, err
		}
		other := cur.(*api.ResourceQuota)
		if other.Labels == nil {
			other.Labels = map[string]string{}
		}
		other.Labels["touched"] = fmt.Sprint(s.lost)
		if _, err := s.Update(ctx, other); err != nil {
			return nil, err
		}
	}
	return s.Bolt.UpdateQueued(ctx, obj)
}

// registryWithNamespace is a registry over st (a store wrapped to watch
// or steer its writes) with the namespace ns created.
func registryWithNamespace(t *testing.T, st store.Store, ns string) *Registry {
	t.Helper()
	reg := NewRegistry(st, slog.New(slog.DiscardHandler))
	if _, err := reg.Create(context.Background(), namespaceKind, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return reg
}

// A create's charge rides in one commit with the create (store.Chainer).
// When the charge's quota write loses a race, the create is not stored;
// it is checked and charged again on the stored quota, and charged once.
// Past quotaRetries lost races it fails and changes nothing.
func TestQuotaChargeLostRace(t *testing.T) {
	st := &racingStore{Bolt: defaultsStore(t, store.Options{NoSync: true})}
	reg := registryWithNamespace(t, st, "bob")
	ctx := context.Background()
	createGPUQuota(t, reg, "bob", "4", "0")
	used := func() string {
		o, err := reg.Get(ctx, quotaKind, "bob", "gpus")
		if err != nil {
			t.Fatal(err)
		}
		rq := o.(*api.ResourceQuota)
		u := rq.Status.Used["requests.nvidia.com/gpu"]
		return fmt.Sprintf("%s/%d", u.String(), len(quota.Reservations(rq)))
	}

	st.mu.Lock()
	st.lose = 3
	st.mu.Unlock()
	if _, err := reg.Create(ctx, podKind, gpuPodIn("bob", "a")); err != nil {
		t.Fatalf("create after three lost quota writes: %v", err)
	}
	if st.lost != 3 {
		t.Fatalf("%d quota writes lost their race, want 3", st.lost)
	}
	if got := used(); got != "1/1" {
		t.Errorf("after the create: used/reservations %s, want 1/1 (charged once)", got)
	}

	st.mu.Lock()
	st.lose, st.lost = quotaRetries, 0
	st.mu.Unlock()
	_, err := reg.Create(ctx, podKind, gpuPodIn("bob", "b"))
	if !api.IsConflict(err) || !strings.Contains(err.Error(), "quota admission: update quota") {
		t.Fatalf("create after %d lost quota writes: %v, want the conflict", quotaRetries, err)
	}
	if _, err := reg.Get(ctx, podKind, "bob", "b"); !api.IsNotFound(err) {
		t.Fatalf("pod b, refused, is stored: %v", err)
	}
	if got := used(); got != "1/1" {
		t.Errorf("after the refused create: used/reservations %s, want 1/1 (nothing charged)", got)
	}
}

// countingStore counts the store's Count calls.
type countingStore struct {
	*store.Bolt
	counts atomic.Int64
}

func (s *countingStore) Count(ctx context.Context, kind *api.Kind, namespace string) (int, error) {
	s.counts.Add(1)
	return s.Bolt.Count(ctx, kind, namespace)
}

// A namespace without quotas is counted once: its creates then read no
// transaction to learn it has none. The first quota written there ends
// that, and the next create is checked against it.
func TestNoQuotaKeptUntilAQuotaIsWritten(t *testing.T) {
	st := &countingStore{Bolt: defaultsStore(t, store.Options{NoSync: true})}
	reg := registryWithNamespace(t, st, "ann")
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c"} {
		if _, err := reg.Create(ctx, podKind, gpuPodIn("ann", name)); err != nil {
			t.Fatal(err)
		}
	}
	if n := st.counts.Load(); n != 1 {
		t.Fatalf("three creates in a namespace without quotas counted its quotas %d times, want 1", n)
	}
	createGPUQuota(t, reg, "ann", "3", "3")
	_, err := reg.Create(ctx, podKind, gpuPodIn("ann", "d"))
	if api.ReasonOf(err) != api.ReasonForbidden || !strings.Contains(err.Error(), "exceeded quota: gpus") {
		t.Fatalf("a fourth GPU pod under a quota of three, all used: %v, want exceeded quota", err)
	}
}
