package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Lister reads the objects of one kind from a cache. *client.Informer is
// the real one; tests use a lister over client/fake. Objects returned are
// shared with the cache: never modify them, api.Clone first (STYLE 8).
type Lister interface {
	// Get returns the cached object namespace/name.
	Get(namespace, name string) (api.Object, bool)
	// ListBy returns the cached objects in namespace ("" = all) whose
	// labels match selector (nil = all).
	ListBy(selector labels.Selector, namespace string) []api.Object
}

var _ Lister = (*client.Informer)(nil)

// EventRecorder writes Events about an object ("Scaled up replica set
// nginx-7c5ddbdf54 to 3"). It must not block for long and reports its own
// failures (an event is never worth failing a reconcile for).
type EventRecorder interface {
	Eventf(ctx context.Context, obj api.Object, eventType, reason, format string, args ...any)
}

// Options configure the controllers Run starts.
type Options struct {
	// Log receives every controller's lines; nil discards them.
	Log *slog.Logger
	// Metrics receives reconcile counts and queue depths; nil is fine.
	Metrics client.LoopMetrics
	// Workers per controller; 0 means client.DefaultLoopOptions' value.
	Workers int
	// Resync enqueues every object again this often; 0 means
	// client.DefaultLoopOptions' value (a minute).
	Resync time.Duration
	// Members is the gossip view the node lifecycle controller reads;
	// nil: it watches heartbeats only.
	Members MemberSource
	// NodeLifecycle are the node lifecycle controller's timeouts; zero
	// fields take DefaultNodeLifecycleConfig's.
	NodeLifecycle NodeLifecycleConfig
	// RootCA is the cluster CA certificate (PEM) the root CA publisher
	// puts in every namespace's kube-root-ca.crt; nil runs no publisher.
	RootCA []byte
	// KubernetesService configures the default/kubernetes Service and its
	// endpoints (kubernetes_service.go); nil runs no such controller.
	KubernetesService *KubernetesServiceConfig
	// Informers is the process's shared informer factory (one cache and
	// one watch per kind for the controllers, the scheduler and the queue
	// manager); nil: the Manager makes its own, and runs it.
	Informers *client.InformerFactory
	// HPA are the HorizontalPodAutoscaler controller's settings (hpa.go);
	// zero fields take DefaultHPAConfig's.
	HPA HPAConfig
	// HPAMetrics is where that controller reads metrics; nil: APIMetrics
	// over the client when it sends raw requests (*client.Client), else
	// every metric fails (FailedGetResourceMetric, ...).
	HPAMetrics MetricsSource
	// CSRSigner signs approved CertificateSigningRequests for
	// kubernetes.io/kube-apiserver-client (csrsigning.go: the cluster CA);
	// nil runs no signer.
	CSRSigner CSRSigner
}

// Manager owns the shared informers and the loops of every controller,
// like kube-controller-manager. Build it with NewManager, start it with Run.
type Manager struct {
	log       *slog.Logger
	factory   *client.InformerFactory
	ownsInfs  bool               // factory made here: Run waits for it
	informers []*client.Informer // the factory's informers the controllers read
	loops     []*client.Loop
	recorders []*client.Recorder
	runners   []func(context.Context) // more goroutines, started with the loops
}

// Run builds a Manager and runs it until ctx ends.
func Run(ctx context.Context, c client.Interface, fin NamespaceFinalizer, opts Options) error {
	return NewManager(c, fin, opts).Run(ctx)
}

// NewManager builds the informers (one per kind, shared by every
// controller that reads that kind), the controllers and their loops, and
// wires informer handlers to loop queues. Nothing runs until Run.
func NewManager(c client.Interface, fin NamespaceFinalizer, opts Options) *Manager {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{log: log, factory: opts.Informers}
	if m.factory == nil {
		m.factory, m.ownsInfs = client.NewInformerFactory(c, log), true
	}
	// Each controller signs its events with its own name, as in Kubernetes
	// (`describe` shows "deployment-controller" in the From column).
	events := func(component string) EventRecorder {
		r := client.NewRecorder(c, component, "", log)
		m.recorders = append(m.recorders, r)
		return r
	}

	// Shared caches (the factory's): every controller that reads pods
	// reads this one, and so do the scheduler and the queue manager.
	pods := m.informer(c, podKind(), log)
	rsets := m.informer(c, replicaSetKind(), log)
	deploys := m.informer(c, deploymentKind(), log)
	namespaces := m.informer(c, namespaceKind(), log)

	newLoop := func(name string, r client.Reconciler, keys func() []string) *client.Loop {
		lo := client.DefaultLoopOptions(name)
		if opts.Workers > 0 {
			lo.Workers = opts.Workers
		}
		if opts.Resync > 0 {
			lo.Resync = opts.Resync
		}
		lo.Log, lo.Metrics = log, opts.Metrics
		l := client.NewLoop(r, lo)
		l.SetResyncFunc(keys)
		m.loops = append(m.loops, l)
		return l
	}

	// ReplicaSet controller: a ReplicaSet changed, or one of its pods did.
	rsc := NewReplicaSetController(c, rsets, pods, events(replicaSetControllerName), log)
	rsLoop := newLoop(replicaSetControllerName, rsc, rsets.Keys)
	rsets.AddHandler(rsLoop.Handler())
	pods.AddHandler(rsc.PodHandler(rsLoop.Enqueue))

	// Deployment controller: a Deployment changed, or one of its ReplicaSets
	// did, or (for Recreate) one of its old pods went away.
	dc := NewDeploymentController(c, deploys, rsets, pods, events(deploymentControllerName), log)
	dLoop := newLoop(deploymentControllerName, dc, deploys.Keys)
	deploys.AddHandler(dLoop.Handler())
	rsets.AddHandler(dc.ReplicaSetHandler(dLoop.Enqueue))
	pods.AddHandler(dc.PodHandler(dLoop.Enqueue))

	// Job controller (job.go): a Job changed, or one of its pods did; the
	// TTL-after-finished controller (ttlafterfinished.go) deletes finished
	// Jobs whose ttlSecondsAfterFinished has passed.
	jobs := m.informer(c, jobKind(), log)
	jc := NewJobController(c, jobs, pods, events(jobControllerName), log)
	jLoop := newLoop(jobControllerName, jc, jobs.Keys)
	jobs.AddHandler(jLoop.Handler())
	pods.AddHandler(jc.PodHandler(jLoop.Enqueue))
	ttl := NewTTLAfterFinishedController(c, jobs, log)
	ttlLoop := newLoop(ttlAfterFinishedControllerName, ttl, jobs.Keys)
	jobs.AddHandler(ttlLoop.Handler())

	// The workload controllers beyond Deployments and Jobs (workloads.go):
	// DaemonSets, StatefulSets, CronJobs, disruption budgets; and the
	// storage controllers (storage.go), whose claims StatefulSets make.
	nodes := m.informer(c, api.MustKindOf(&api.Node{}), log)
	claims := m.addStorage(c, pods, newLoop, events, log)
	wl := m.addWorkloads(c, workloadCaches{pods: pods, rsets: rsets, deploys: deploys, jobs: jobs, nodes: nodes, claims: claims}, newLoop, events, log)
	m.addHPA(c, pods, opts, newLoop, events, log) // workloads.go

	// Garbage collector: dependents (pods, replica sets, revisions, claims) and their owners.
	graph := map[string]*client.Informer{"Pod": pods, "ReplicaSet": rsets, "Deployment": deploys, "Job": jobs, "PersistentVolumeClaim": claims}
	maps.Copy(graph, wl)
	gc := NewGarbageCollector(c, listersOf(graph), events(garbageCollectorName), log)
	gcLoop := newLoop(garbageCollectorName, gc, func() []string { return gcKeys(graph) })
	gc.Watch(graph, gcLoop.Enqueue)

	// Namespace controller: a namespace changed (its deletion began).
	nc := NewNamespaceController(c, fin, namespaces, events(namespaceControllerName), log)
	nc.UseCaches(listersOf(graph)) // pods, replica sets, deployments: the kinds a namespace holds most of
	nsLoop := newLoop(namespaceControllerName, nc, namespaces.Keys)
	namespaces.AddHandler(nsLoop.Handler())

	// ResourceClaim controller (resourceclaim.go): a pod with claims
	// changed, or a claim did; templates are read from their cache.
	rclaims := m.informer(c, resourceClaimKind(), log)
	rtemplates := m.informer(c, resourceClaimTemplateKind(), log)
	rcc := NewResourceClaimController(c, pods, rclaims, rtemplates, events(resourceClaimControllerName), log)
	rcLoop := newLoop(resourceClaimControllerName, rcc, rcc.Keys)
	rcPods, rcClaims := rcc.Handlers(rcLoop.Enqueue)
	pods.AddHandler(rcPods)
	rclaims.AddHandler(rcClaims)

	// Node lifecycle controller (nodelifecycle.go): a node stopped
	// reporting, or gossip lost it; its pods go elsewhere.
	nlc := NewNodeLifecycleController(c, nodes, pods, opts.Members, events(nodeLifecycleControllerName), opts.NodeLifecycle, log)
	nlLoop := newLoop(nodeLifecycleControllerName, nlc, nodes.Keys)
	nodes.AddHandler(nlLoop.Handler())
	pods.AddHandler(nlc.PodHandler(nlLoop.Enqueue))
	m.runners = append(m.runners, func(ctx context.Context) { nlc.WatchMembers(ctx, nlLoop.Enqueue) })

	// Endpoints controller (endpoints.go): a Service changed, a pod its
	// selector matches did, or its Endpoints did.
	services := m.informer(c, serviceKind(), log)
	// PodGroup controller (podgroup.go): a PodGroup changed, or one of
	// its pods did; the scheduler's Coscheduling plugin places the pods.
	pgroups := m.informer(c, podGroupKind(), log)
	pgc := NewPodGroupController(c, pgroups, pods, log)
	pgLoop := newLoop(podGroupControllerName, pgc, pgroups.Keys)
	pgroups.AddHandler(pgLoop.Handler())
	pods.AddHandler(pgc.PodHandler(pgLoop.Enqueue))

	endpoints := m.informer(c, endpointsKind(), log)
	epc := NewEndpointsController(c, services, pods, endpoints, log)
	epLoop := newLoop(endpointsControllerName, epc, serviceKeys(services, endpoints))
	services.AddHandler(epLoop.Handler())
	pods.AddHandler(epc.PodHandler(epLoop.Enqueue))
	endpoints.AddHandler(epc.EndpointsHandler(epLoop.Enqueue))

	// EndpointSlice controller (endpointslice.go): the same events, and
	// its slices'.
	eslices := m.informer(c, endpointSliceKind(), log)
	esc := NewEndpointSliceController(c, services, pods, eslices, log)
	esLoop := newLoop(endpointSliceControllerName, esc, sliceServiceKeys(services, eslices))
	services.AddHandler(esLoop.Handler())
	pods.AddHandler(esc.PodHandler(esLoop.Enqueue))
	eslices.AddHandler(esc.SliceHandler(esLoop.Enqueue))

	// ServiceAccount controller and root CA publisher (serviceaccount.go):
	// a namespace appeared, or its default account or CA config map changed.
	sas := m.informer(c, serviceAccountKind(), log)
	sac := NewServiceAccountController(c, namespaces, sas, log)
	saLoop := newLoop(serviceAccountControllerName, sac, namespaces.Keys)
	namespaces.AddHandler(saLoop.Handler())
	sas.AddHandler(ServiceAccountHandler(saLoop.Enqueue))
	if opts.RootCA != nil {
		cms := m.informer(c, configMapKind(), log)
		pub := NewRootCAPublisher(c, namespaces, cms, opts.RootCA, log)
		pubLoop := newLoop(rootCAPublisherName, pub, namespaces.Keys)
		namespaces.AddHandler(pubLoop.Handler())
		cms.AddHandler(pub.ConfigMapHandler(pubLoop.Enqueue))
	}
	// The kubernetes Service (kubernetes_service.go): its objects changed,
	// and every resync (the API servers come and go).
	if ks := opts.KubernetesService; ks != nil {
		kc := NewKubernetesServiceController(c, services, endpoints, eslices, *ks, log)
		kLoop := newLoop(kubernetesServiceControllerName, kc, func() []string { return []string{KubernetesServiceKey} })
		h := kc.Handler(kLoop.Enqueue)
		services.AddHandler(h)
		endpoints.AddHandler(h)
		eslices.AddHandler(h)
		m.runners = append(m.runners, func(context.Context) { kLoop.Enqueue(KubernetesServiceKey) })
	}

	// ClusterRole aggregation (clusterroleaggregation.go): any ClusterRole
	// changed; every aggregated one is recomputed.
	croles := m.informer(c, clusterRoleKind(), log)
	crac := NewClusterRoleAggregationController(c, croles, log)
	craLoop := newLoop(clusterRoleAggregationControllerName, crac, crac.Keys)
	croles.AddHandler(crac.Handler(craLoop.Enqueue))

	// CertificateSigningRequests, one cache for both controllers.
	// Signing (csrsigning.go): a request changed (approved, most often).
	// Cleaning (csrcleaner.go): a request issued, denied or failed an hour
	// ago, or pending a day, is deleted.
	csrs := m.informer(c, csrKind(), log)
	if opts.CSRSigner != nil {
		csc := NewCSRSigningController(c, csrs, opts.CSRSigner, log)
		csLoop := newLoop(csrSigningControllerName, csc, csrs.Keys)
		csrs.AddHandler(csLoop.Handler())
	}
	ccc := NewCSRCleanerController(c, csrs, log)
	ccLoop := newLoop(csrCleanerControllerName, ccc, csrs.Keys)
	csrs.AddHandler(ccLoop.Handler())

	// ResourceQuota controller (resourcequota.go): a quota changed, or an
	// object of a kind with a cache here came, went or changed its usage.
	// Last: it counts with every cache above.
	m.addResourceQuota(c, newLoop, log)

	// Node IPAM controller (nodeipam.go): a node without a pod CIDR.
	ipam := newDefaultNodeIPAM(c, nodes, log)
	ipamLoop := newLoop(nodeIPAMControllerName, ipam, nodes.Keys)
	nodes.AddHandler(ipam.Handler(ipamLoop.Enqueue))

	return m
}

// informer is the factory's informer of kind k (c and log are the
// factory's own).
func (m *Manager) informer(_ client.Interface, k *api.Kind, _ *slog.Logger) *client.Informer {
	inf := m.factory.Informer(k)
	if !slices.Contains(m.informers, inf) {
		m.informers = append(m.informers, inf)
	}
	return inf
}

// Run starts the informer factory (a no-op when another component did)
// and the event recorders, waits until each informer the controllers read
// has filled its cache (a controller acting on an empty cache would, say,
// create every pod again), then starts the loops. It returns when ctx ends
// and everything it started has stopped.
func (m *Manager) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	if m.ownsInfs {
		defer m.factory.Wait()
	}
	m.factory.Start(ctx)
	for _, r := range m.recorders {
		wg.Go(func() { _ = r.Run(ctx) }) // Run only returns nil, when ctx ends
	}
	for _, inf := range m.informers {
		if !inf.WaitForSync(ctx) {
			return nil // ctx ended before the caches filled: a normal shutdown
		}
	}
	m.log.Info("controllers started", "controllers", len(m.loops))
	errs := make([]error, len(m.loops))
	for i, l := range m.loops {
		wg.Go(func() { errs[i] = l.Run(ctx) })
	}
	for _, f := range m.runners {
		wg.Go(func() { f(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Controller names, as in logs, metrics and the source of events.
const (
	deploymentControllerName = "deployment-controller"
	replicaSetControllerName = "replicaset-controller"
	garbageCollectorName     = "garbage-collector"
	namespaceControllerName  = "namespace-controller"
)

func podKind() *api.Kind        { return api.MustKindOf(&api.Pod{}) }
func replicaSetKind() *api.Kind { return api.MustKindOf(&api.ReplicaSet{}) }
func deploymentKind() *api.Kind { return api.MustKindOf(&api.Deployment{}) }
func namespaceKind() *api.Kind  { return api.MustKindOf(&api.Namespace{}) }

// nopRecorder drops events.
type nopRecorder struct{}

func (nopRecorder) Eventf(context.Context, api.Object, string, string, string, ...any) {}

// controllerRef is the owner reference a controller puts on what it
// creates or adopts. Objects read back from the API may lack apiVersion and
// kind, so they come from the registry.
func controllerRef(owner api.Object) api.OwnerReference {
	ref := api.NewControllerRef(owner)
	k := api.MustKindOf(owner)
	ref.APIVersion, ref.Kind = k.APIVersion(), k.Kind
	return ref
}

// replicasOf reads a replicas field; nil means 1, the API's default.
func replicasOf(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// Finding claim's candidates
//
// claim looks only at the objects its owner controls and at the orphans of
// the owner's namespace: one another controller controls is never touched.
// Listing the whole namespace to find them cost every sync of a ReplicaSet
// a scan and a sort of every pod in the namespace; with 20,000 pods from
// 200 Deployments in one namespace, and a sync after every change of one
// of its pods, that grew with the square of the pods. An informer index by
// controller (a controlled object's controller UID; an orphan's namespace)
// hands claim the same objects in the same order.

// indexByController is the pods informer's index claimCandidates reads.
const indexByController = "skiff.dev/controller"

// controllerIndexValues is indexByController's IndexFunc.
func controllerIndexValues(o api.Object) []string {
	if ref := api.ControllerOf(o); ref != nil {
		return []string{ref.UID}
	}
	return []string{orphanIndexValue(o.GetObjectMeta().Namespace)}
}

// orphanIndexValue is indexByController's value for the objects of
// namespace without a controller (no UID holds a NUL byte).
func orphanIndexValue(namespace string) string { return "\x00orphan/" + namespace }

// indexControllers adds indexByController to l when l is an informer
// without it (a controller's constructor calls it for its pods).
func indexControllers(l Lister) {
	if inf, ok := l.(*client.Informer); ok && !inf.HasIndex(indexByController) {
		inf.AddIndex(indexByController, controllerIndexValues)
	}
}

// indexLabels has an informer l index its objects' labels, so that
// ListBy with a Service's or an HPA's selector looks only at the objects
// carrying the selector's rarest label value (client.Informer.IndexLabels).
func indexLabels(l Lister) {
	if inf, ok := l.(*client.Informer); ok {
		inf.IndexLabels()
	}
}

// claimCandidates returns the objects of l that claim may take for owner:
// those in its namespace it controls and the orphans there, sorted by
// name, as listing the namespace and dropping the rest gives them. From
// the index when l has it; else from the whole namespace (claim skips
// the others).
func claimCandidates[T api.Object](l Lister, owner api.Object) []T {
	om := owner.GetObjectMeta()
	inf, ok := l.(*client.Informer)
	if !ok || !inf.HasIndex(indexByController) {
		return listAs[T](l.ListBy(nil, om.Namespace))
	}
	objs := inf.ByIndex(indexByController, om.UID)
	// A reference names an owner of the object's own namespace; one that
	// names a UID of another namespace's owner refers to no owner here.
	objs = slices.DeleteFunc(objs, func(o api.Object) bool { return o.GetObjectMeta().Namespace != om.Namespace })
	objs = append(objs, inf.ByIndex(indexByController, orphanIndexValue(om.Namespace))...)
	slices.SortFunc(objs, func(a, b api.Object) int { return strings.Compare(a.GetObjectMeta().Name, b.GetObjectMeta().Name) })
	return listAs[T](objs)
}

// claim decides which of candidates (objects in owner's namespace) the
// owner controls, as Kubernetes' ControllerRefManager does:
//
//   - an object controlled by another owner is never touched;
//   - an orphan (no controller) whose labels match the selector is adopted:
//     the owner's controller reference is added to it;
//   - an object the owner controls whose labels no longer match is released:
//     the reference is removed, and the object lives on by itself.
//
// Adopting and releasing are writes to the objects; what is returned are
// the objects the owner controls afterwards.
func claim[T api.Object](ctx context.Context, c client.Interface, owner api.Object, sel labels.Selector, candidates []T) ([]T, error) {
	om := owner.GetObjectMeta()
	var owned []T
	var errs []error
	checkedOwner := false // canAdopt is asked once per claim, and only when needed
	for _, obj := range candidates {
		m := obj.GetObjectMeta()
		ref := api.ControllerOf(obj)
		matches := sel.Matches(labels.Set(m.Labels))
		switch {
		case ref != nil && ref.UID != om.UID:
			// Someone else's.
		case ref != nil && matches:
			owned = append(owned, obj)
		case ref != nil:
			// Ours, but the labels moved away from the selector: release,
			// unless we are being deleted (the GC takes care of those).
			if om.DeletionTimestamp != nil {
				continue
			}
			u := api.Clone(obj)
			um := u.GetObjectMeta()
			um.OwnerReferences = removeRef(um.OwnerReferences, om.UID)
			if _, err := c.Update(ctx, u); err != nil && !api.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("release %s: %w", api.KeyOf(obj), err))
			}
		case matches && m.DeletionTimestamp == nil && om.DeletionTimestamp == nil:
			// An orphan that matches: adopt it. First make sure the owner
			// really exists (the cache may still show a deleted owner, and
			// adopting for it would hand the orphan to the garbage collector).
			if !checkedOwner {
				if err := canAdopt(ctx, c, owner); err != nil {
					return owned, err
				}
				checkedOwner = true
			}
			u := api.Clone(obj)
			um := u.GetObjectMeta()
			um.OwnerReferences = append(um.OwnerReferences, controllerRef(owner))
			out, err := c.Update(ctx, u)
			switch {
			case err == nil:
				owned = append(owned, out.(T))
			case api.IsNotFound(err):
			default:
				errs = append(errs, fmt.Errorf("adopt %s: %w", api.KeyOf(obj), err))
			}
		}
	}
	return owned, errors.Join(errs...)
}

// canAdopt reads the owner from the API (not the cache) and fails unless it
// is the same object (same uid) and not being deleted.
func canAdopt(ctx context.Context, c client.Interface, owner api.Object) error {
	om := owner.GetObjectMeta()
	fresh, err := c.Get(ctx, api.MustKindOf(owner), om.Namespace, om.Name)
	if err != nil {
		return fmt.Errorf("check %s before adopting: %w", api.KeyOf(owner), err)
	}
	fm := fresh.GetObjectMeta()
	if fm.UID != om.UID {
		return fmt.Errorf("check %s before adopting: uid is now %s, was %s", api.KeyOf(owner), fm.UID, om.UID)
	}
	if fm.DeletionTimestamp != nil {
		return fmt.Errorf("check %s before adopting: it is being deleted", api.KeyOf(owner))
	}
	return nil
}

// removeRef returns refs without the one to uid (a new slice).
func removeRef(refs []api.OwnerReference, uid string) []api.OwnerReference {
	var out []api.OwnerReference
	for _, r := range refs {
		if r.UID != uid {
			out = append(out, r)
		}
	}
	return out
}

// listAs converts cached objects to their concrete type.
func listAs[T api.Object](objs []api.Object) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// getAs reads one cached object as its concrete type.
func getAs[T api.Object](l Lister, namespace, name string) (T, bool) {
	o, ok := l.Get(namespace, name)
	if !ok {
		var zero T
		return zero, false
	}
	t, ok := o.(T)
	return t, ok
}

// conflictRetry is when a reconcile that hit a Conflict looks again, at
// the latest (see requeueOnConflict).
const conflictRetry = time.Second

// requeueOnConflict turns a Conflict into a quiet retry. A Conflict means
// the cache showed an older version of the object than the API server has
// (someone, often this controller itself, wrote it since): that is
// optimistic concurrency doing its job, not a failure. The newer version's
// watch event is on its way and will enqueue the key again; the
// RequeueAfter is only a safety net.
func requeueOnConflict(log *slog.Logger, key string, err error) error {
	if err != nil && api.IsConflict(err) {
		log.Debug("the cache was stale; trying again with the newer version", "key", key, "err", err)
		return client.RequeueAfter(conflictRetry)
	}
	return err
}

// logReconcile writes the one line a reconcile leaves, with what the loop
// observed, what it desires and what it did about the difference:
//
//	level=INFO msg=reconcile controller=replicaset key=default/web-7c5d observed="2 pods (1 ready, 1 available)" desired=3 action="created 1 pod: web-7c5d-x7k2p"
//
// At Info when it did something, at Debug when it found nothing to do
// (resyncs would flood Info).
func logReconcile(log *slog.Logger, acted bool, key, observed, desired, action string) {
	level := slog.LevelDebug
	if acted {
		level = slog.LevelInfo
	}
	log.Log(context.Background(), level, "reconcile", "key", key, "observed", observed, "desired", desired, "action", action)
}

// plural is "1 pod", "3 pods".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
