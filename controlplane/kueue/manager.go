package kueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Names the manager signs its work with.
const (
	// ControllerName signs the manager's events ("kueue-admission" is the
	// reporting controller of Kueue's scheduler events).
	ControllerName = "kueue-admission"
	// JobUIDLabel on a Workload: the uid of its Job (Kueue's constants).
	JobUIDLabel = "kueue.x-k8s.io/job-uid"
	// scheduleKey is the one key of the scheduling cycle's loop.
	scheduleKey = "cycle"
)

var (
	workloadKind     = api.MustKindOf(&api.Workload{})
	clusterQueueKind = api.MustKindOf(&api.ClusterQueue{})
	localQueueKind   = api.MustKindOf(&api.LocalQueue{})
	flavorKind       = api.MustKindOf(&api.ResourceFlavor{})
	topologyKind     = api.MustKindOf(&api.Topology{})
	namespaceKind    = api.MustKindOf(&api.Namespace{})
	jobKind          = api.MustKindOf(&api.Job{})
	nodeKind         = api.MustKindOf(&api.Node{})
	podKind          = api.MustKindOf(&api.Pod{})
	priorityKind     = api.MustKindOf(&api.PriorityClass{})
)

// EventRecorder writes Events (client.Recorder).
type EventRecorder interface {
	Eventf(ctx context.Context, obj api.Object, eventType, reason, format string, args ...any)
}

// lister reads the objects the manager decides from: the informers' caches
// in a running manager, the client itself in tests (so that a test calls
// Schedule and ReconcileJob and sees every write at once).
type lister interface {
	list(ctx context.Context, k *api.Kind) ([]api.Object, error)
	get(ctx context.Context, k *api.Kind, namespace, name string) (api.Object, bool, error)
}

type clientLister struct{ c client.Interface }

func (l clientLister) list(ctx context.Context, k *api.Kind) ([]api.Object, error) {
	objs, _, err := l.c.List(ctx, k, "", api.ListOptions{})
	return objs, err
}

func (l clientLister) get(ctx context.Context, k *api.Kind, ns, name string) (api.Object, bool, error) {
	o, err := l.c.Get(ctx, k, ns, name)
	if api.IsNotFound(err) {
		return nil, false, nil
	}
	return o, err == nil, err
}

type informerLister map[*api.Kind]*client.Informer

func (l informerLister) list(_ context.Context, k *api.Kind) ([]api.Object, error) {
	return l[k].List(), nil
}

func (l informerLister) get(_ context.Context, k *api.Kind, ns, name string) (api.Object, bool, error) {
	o, ok := l[k].Get(ns, name)
	return o, ok, nil
}

// Manager is the queue manager. Build it with New, run it with Run; tests
// drive it with Schedule and ReconcileJob.
type Manager struct {
	c      client.Interface
	cfg    Config
	log    *slog.Logger
	events EventRecorder
	now    func() time.Time
	read   lister

	// mu guards assumed: admissions and releases this manager wrote that
	// its cache may not show yet, by "namespace/name", with the
	// resourceVersion written. The next cycle counts them, so no quota is
	// given twice while the cache catches up.
	mu      sync.Mutex
	assumed map[string]*api.Workload

	// run-time parts (New)
	factory   *client.InformerFactory
	ownsInfs  bool // factory made by New: Run waits for it
	informers []*client.Informer
	recorder  *client.Recorder
	jobLoop   *client.Loop
	cycleLoop *client.Loop
}

// NewForTest returns a manager that reads through c directly and writes
// events to events (nil: none), with the clock now.
func NewForTest(c client.Interface, cfg Config, events EventRecorder, now func() time.Time) *Manager {
	if events == nil {
		events = nopEvents{}
	}
	return &Manager{c: c, cfg: cfg, log: slog.New(slog.DiscardHandler), events: events, now: now, read: clientLister{c}, assumed: map[string]*api.Workload{}}
}

type nopEvents struct{}

func (nopEvents) Eventf(context.Context, api.Object, string, string, string, ...any) {}

// New builds a running manager's informers and loops over c.
func New(c client.Interface, cfg Config, log *slog.Logger, metrics client.LoopMetrics) *Manager {
	return NewShared(nil, c, cfg, log, metrics)
}

// NewShared is New reading through the process's shared informer factory
// f (whose client must be c), so the queue manager's pods, nodes, jobs and
// namespaces are the controllers' and the scheduler's caches; nil f: a
// factory of its own, run by Run.
func NewShared(f *client.InformerFactory, c client.Interface, cfg Config, log *slog.Logger, metrics client.LoopMetrics) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{c: c, cfg: cfg, log: log, now: time.Now, assumed: map[string]*api.Workload{}, factory: f}
	if m.factory == nil {
		m.factory, m.ownsInfs = client.NewInformerFactory(c, log), true
	}
	m.recorder = client.NewRecorder(c, ControllerName, "", log)
	m.events = m.recorder
	infs := informerLister{}
	for _, k := range []*api.Kind{workloadKind, clusterQueueKind, localQueueKind, flavorKind, topologyKind, namespaceKind, jobKind, nodeKind, podKind, priorityKind} {
		inf := m.factory.Informer(k)
		infs[k] = inf
		m.informers = append(m.informers, inf)
	}
	m.read = infs
	loop := func(name string, r client.Reconciler, keys func() []string) *client.Loop {
		lo := client.DefaultLoopOptions(name)
		lo.Workers, lo.Log, lo.Metrics = 1, log, metrics
		l := client.NewLoop(r, lo)
		l.SetResyncFunc(keys)
		return l
	}
	m.cycleLoop = loop("kueue-scheduler", client.ReconcilerFunc(func(ctx context.Context, _ string) error { return m.Schedule(ctx) }),
		func() []string { return []string{scheduleKey} })
	m.jobLoop = loop("kueue-job-controller", client.ReconcilerFunc(m.ReconcileJob), infs[jobKind].Keys)
	cycle := func(api.Object) { m.cycleLoop.Enqueue(scheduleKey) }
	every := client.Handler{OnAdd: cycle, OnUpdate: func(_, o api.Object) { cycle(o) }, OnDelete: cycle}
	for _, k := range []*api.Kind{clusterQueueKind, localQueueKind, flavorKind, topologyKind, namespaceKind} {
		infs[k].AddHandler(every)
	}
	infs[jobKind].AddHandler(m.jobLoop.Handler())
	// A workload's change matters to the cycle (queue order, usage) and to
	// its job (admitted, evicted).
	byOwner := func(o api.Object) {
		cycle(o)
		for _, ref := range o.GetObjectMeta().OwnerReferences {
			if ref.Kind == "Job" {
				m.jobLoop.Enqueue(api.Key(o.GetObjectMeta().Namespace, ref.Name))
			}
		}
	}
	infs[workloadKind].AddHandler(client.Handler{OnAdd: byOwner, OnUpdate: func(_, o api.Object) { byOwner(o) }, OnDelete: byOwner})
	return m
}

// Run runs the manager until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	if m.ownsInfs {
		defer m.factory.Wait()
	}
	m.factory.Start(ctx) // a no-op when another component started it
	wg.Go(func() { _ = m.recorder.Run(ctx) })
	for _, inf := range m.informers {
		if !inf.WaitForSync(ctx) {
			return nil
		}
	}
	m.log.Info("queue manager started", "waitForPodsReady", m.cfg.WaitForPodsReady.Enable)
	var errs [2]error
	wg.Go(func() { errs[0] = m.cycleLoop.Run(ctx) })
	wg.Go(func() { errs[1] = m.jobLoop.Run(ctx) })
	m.cycleLoop.Enqueue(scheduleKey)
	wg.Wait()
	return errors.Join(errs[:]...)
}

// assume records wl (as written) until the cache shows it.
func (m *Manager) assume(wl *api.Workload) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.assumed[api.Key(wl.Namespace, wl.Name)] = wl
}

// overlay returns the workloads of the cache with the assumed writes in
// place of older cached versions, and forgets assumptions the cache has
// caught up with.
func (m *Manager) overlay(cached []api.Object) []*api.Workload {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*api.Workload, 0, len(cached))
	seen := map[string]bool{}
	for _, o := range cached {
		wl := o.(*api.Workload)
		k := api.Key(wl.Namespace, wl.Name)
		seen[k] = true
		if a, ok := m.assumed[k]; ok {
			if rvNewerOrEqual(wl.ResourceVersion, a.ResourceVersion) {
				delete(m.assumed, k)
			} else {
				wl = a
			}
		}
		out = append(out, wl)
	}
	for k, a := range m.assumed {
		if !seen[k] {
			out = append(out, a) // created, not yet in the cache
		}
	}
	return out
}

func rvNewerOrEqual(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return a == b
	}
	return x >= y
}

// snapshot is one cycle's view.
type snapshot struct {
	now        time.Time
	cqs        map[string]*cqState
	cqNames    []string
	lqs        map[string]*api.LocalQueue
	flavors    map[string]*api.ResourceFlavor
	topologies map[string]*api.Topology
	namespaces map[string]*api.Namespace
	workloads  []*api.Workload
	// loadNodes lists nodes and pods once, when topology needs them.
	loadNodes func() ([]*api.Node, []*api.Pod)
}

func (m *Manager) snapshot(ctx context.Context) (*snapshot, error) {
	s := &snapshot{now: m.now(), cqs: map[string]*cqState{}, lqs: map[string]*api.LocalQueue{}, flavors: map[string]*api.ResourceFlavor{},
		topologies: map[string]*api.Topology{}, namespaces: map[string]*api.Namespace{}}
	lists := map[*api.Kind][]api.Object{}
	for _, k := range []*api.Kind{workloadKind, clusterQueueKind, localQueueKind, flavorKind, topologyKind, namespaceKind} {
		objs, err := m.read.list(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", k.Resource, err)
		}
		lists[k] = objs
	}
	for _, o := range lists[clusterQueueKind] {
		cq := o.(*api.ClusterQueue)
		s.cqs[cq.Name] = &cqState{cq: cq, usage: amounts{}}
		s.cqNames = append(s.cqNames, cq.Name)
	}
	slices.Sort(s.cqNames)
	for _, o := range lists[localQueueKind] {
		lq := o.(*api.LocalQueue)
		s.lqs[api.Key(lq.Namespace, lq.Name)] = lq
	}
	for _, o := range lists[flavorKind] {
		s.flavors[o.GetObjectMeta().Name] = o.(*api.ResourceFlavor)
	}
	for _, o := range lists[topologyKind] {
		s.topologies[o.GetObjectMeta().Name] = o.(*api.Topology)
	}
	for _, o := range lists[namespaceKind] {
		s.namespaces[o.GetObjectMeta().Name] = o.(*api.Namespace)
	}
	var nodes []*api.Node
	var pods []*api.Pod
	loaded := false
	s.loadNodes = func() ([]*api.Node, []*api.Pod) {
		if !loaded {
			loaded = true
			ns, _ := m.read.list(ctx, nodeKind)
			for _, o := range ns {
				nodes = append(nodes, o.(*api.Node))
			}
			ps, _ := m.read.list(ctx, podKind)
			for _, o := range ps {
				pods = append(pods, o.(*api.Pod))
			}
		}
		return nodes, pods
	}
	s.workloads = m.overlay(lists[workloadKind])
	slices.SortFunc(s.workloads, compareQueued)
	for _, wl := range s.workloads {
		if !holdsQuota(wl) {
			continue
		}
		if c := s.cqs[wl.Status.Admission.ClusterQueue]; c != nil {
			c.usage.add(admissionUsage(wl.Status.Admission), 1)
			c.admitted = append(c.admitted, wl)
		}
	}
	return s, nil
}

// admissionUsage is what an admission charges.
func admissionUsage(a *api.WorkloadAdmission) amounts {
	out := amounts{}
	for _, psa := range a.PodSetAssignments {
		for res, q := range psa.ResourceUsage {
			v, _ := api.ResourceAmount(res, q)
			out[fr{psa.Flavors[res], res}] += v
		}
	}
	return out
}

// clusterQueueOf is the ClusterQueue of wl's LocalQueue ("" when it has none).
func (s *snapshot) clusterQueueOf(wl *api.Workload) string {
	if lq := s.lqs[api.Key(wl.Namespace, wl.Spec.QueueName)]; lq != nil {
		return lq.Spec.ClusterQueue
	}
	return ""
}
