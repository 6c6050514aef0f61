package apiserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/strategy"
	"skiff.dev/skiff/controlplane/serviceaccount"
	"skiff.dev/skiff/controlplane/store"
)

// Kinds the registry treats specially. Read-only lookups into api.Kinds.
var (
	namespaceKind   = api.MustKindOf(&api.Namespace{})
	podKind         = api.MustKindOf(&api.Pod{})
	nodeKind        = api.MustKindOf(&api.Node{})
	traceKind       = api.MustKindOf(&api.PodTrace{})
	hpaKind         = api.MustKindOf(&api.HorizontalPodAutoscaler{})
	deploymentKind  = api.MustKindOf(&api.Deployment{})
	replicaSetKind  = api.MustKindOf(&api.ReplicaSet{})
	daemonSetKind   = api.MustKindOf(&api.DaemonSet{})
	statefulSetKind = api.MustKindOf(&api.StatefulSet{})
	cronJobKind     = api.MustKindOf(&api.CronJob{})
	pdbKind         = api.MustKindOf(&api.PodDisruptionBudget{})
)

// DefaultNamespace is where namespaced objects go when none is named.
const DefaultNamespace = api.NamespaceDefault

// NamespaceFinalizer is the spec finalizer every namespace gets on create;
// the namespace controller removes it (FinalizeNamespace) once the
// namespace is empty, and the namespace then disappears.
const NamespaceFinalizer = strategy.NamespaceFinalizer

// The registry's errors, as api/strategy words them (shared with
// client/fake).
var (
	forbidden        = strategy.Forbidden
	methodNotAllowed = strategy.MethodNotAllowed
	notFoundPath     = strategy.NotFoundPath
)

// conflictRetries bounds internal retries after a lost optimistic-concurrency
// race, for writes whose caller did not name a resourceVersion.
const conflictRetries = 5

// Registry holds the API's rules: everything between a decoded request and
// the store. The HTTP server and Local both call it, so a controller running
// in process is held to exactly what a remote client is.
//
// It is safe for concurrent use; it keeps no state besides the store
// (and pod traces, in memory: traces.go).
// Objects passed in are copied, never retained or changed.
type Registry struct {
	store store.Store
	log   *slog.Logger
	// services allocates Service cluster IPs and node ports
	// (allocate_service.go); the allocations live in the store.
	services *serviceAllocator
	// traces keeps pod traces in memory (traces.go).
	traces *traceBook
	// freshWait bounds the wait for a resourceVersion the store has not
	// reached (resourceversion.go); freshnessTimeout, shorter in tests.
	freshWait time.Duration
	// podSecurity is the Pod Security admission configuration
	// (admission_podsecurity.go); nil admits every pod.
	podSecurity atomic.Pointer[podSecurity]
	// saTokens signs and verifies ServiceAccount tokens
	// (serviceaccount_token.go); nil: no token subresource, no
	// ServiceAccount admission.
	saTokens *serviceaccount.Tokens
	// authorizer is the server that serves this registry: escalation
	// checks of RBAC writes (escalation.go) ask it.
	authorizer atomic.Pointer[Server]
	// quotas queues ResourceQuota admission per namespace
	// (admission_quota.go).
	quotas quotaAdmission
	// lists are the lists admission keeps between requests (sharedlist.go).
	lists sharedLists
}

// NewRegistry returns a registry over st. A nil logger discards.
func NewRegistry(st store.Store, logger *slog.Logger) *Registry {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Registry{store: st, log: logger, services: newServiceAllocator(), traces: newTraceBook(MaxTracedPods, MaxTraceBytes), freshWait: freshnessTimeout}
}

// EnsureDefaults creates the namespaces every Kubernetes cluster has
// (api.SystemNamespaces: default, kube-system, kube-public and
// kube-node-lease, for the nodes' heartbeat Leases) and the default
// StorageClass local-path. It is idempotent; the server calls it at every
// start, so a namespace that was deleted (only kube-node-lease may be) is
// back after a restart; the namespace controller brings it back sooner
// (controllers.NamespaceController); and the default RBAC roles and
// bindings (reconciled with what is stored: rbac_defaults.go).
func (r *Registry) EnsureDefaults(ctx context.Context) error {
	for _, name := range api.SystemNamespaces {
		ns := &api.Namespace{ObjectMeta: api.ObjectMeta{Name: name}}
		if _, err := r.Create(ctx, namespaceKind, ns); err != nil && !api.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %q: %w", name, err)
		}
	}
	if err := r.ensureLocalPathClass(ctx); err != nil { // admission_storage.go
		return err
	}
	return r.ensureRBACDefaults(ctx) // rbac_defaults.go
}

// Get returns one object. A namespaced kind with namespace "" reads from "default".
func (r *Registry) Get(ctx context.Context, k *api.Kind, namespace, name string) (api.Object, error) {
	if k == traceKind {
		// Traces live in memory (traces.go), readable as objects too.
		return r.GetTrace(ctx, namespace, name)
	}
	obj, err := r.store.Get(ctx, k, scope(k, namespace), name)
	if err != nil {
		return nil, err
	}
	return withTypeMeta(k, obj), nil
}

// List returns the objects of a kind that match opts' selectors, in one
// namespace or all (""), and the resourceVersion the list was read at.
// opts.ResourceVersion and ResourceVersionMatch mean what they mean to
// kube-apiserver (resourceversion.go).
func (r *Registry) List(ctx context.Context, k *api.Kind, namespace string, opts api.ListOptions) ([]api.Object, string, error) {
	if err := checkListOptions(opts, false, "", nil); err != nil {
		return nil, "", err
	}
	ls, fs, err := strategy.ParseSelectors(k, opts)
	if err != nil {
		return nil, "", err
	}
	if !k.Namespaced {
		namespace = ""
	}
	items, rev, err := r.listAt(ctx, k, namespace, opts, api.FieldNeedles(fs))
	if err != nil {
		return nil, "", err
	}
	out := items[:0]
	for _, o := range items {
		if api.Matches(o, ls, fs) {
			out = append(out, withTypeMeta(k, o))
		}
	}
	return out, strconv.FormatInt(rev, 10), nil
}

// Create admits and stores a new object of kind k: namespace defaulted and
// checked, generateName completed, server-owned metadata set, status reset,
// defaults applied, validated.
func (r *Registry) Create(ctx context.Context, k *api.Kind, in api.Object) (api.Object, error) {
	out, _, err := r.create(ctx, k, in, false)
	return out, err
}

// CreateEncoded is Create of an object the caller gives up, that also
// returns the created object's JSON as the store wrote it. The HTTP handler
// hands over the object it has just decoded from the request: obj is
// admitted and stored as it is, without a copy, and is the object returned
// (on an error, half admitted: drop it). The JSON (store.EncodingCreator)
// is encoding/json's Marshal of the returned object, which the handler
// sends without encoding the object again; it is nil when the store does
// not hand it back (etcd) and for a dry run, and nobody may change it.
// Nobody may change the returned object either: the store's live
// watchers share it (store.EncodingCreator's share).
func (r *Registry) CreateEncoded(ctx context.Context, k *api.Kind, obj api.Object) (api.Object, []byte, error) {
	return r.create(ctx, k, obj, true)
}

// create is Create; owned: in is the registry's to change (CreateEncoded).
func (r *Registry) create(ctx context.Context, k *api.Kind, in api.Object, owned bool) (api.Object, []byte, error) {
	start := time.Now()
	if err := checkType(k, in); err != nil {
		return nil, nil, err
	}
	if k.Internal || k.CreateOnly { // reviews are answered over HTTP (selfsubject.go), never stored
		return nil, nil, methodNotAllowed("create", k)
	}
	obj := in
	if !owned {
		obj = api.Clone(in)
	}
	*obj.GetTypeMeta() = api.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
	m := obj.GetObjectMeta()
	m.Namespace = scope(k, m.Namespace)
	if err := strategy.PrepareForCreate(k, obj); err != nil {
		return nil, nil, err
	}
	m.UID = newUID()
	m.CreationTimestamp = api.Now()
	generated := m.Name == "" && m.GenerateName != ""
	if generated {
		m.Name = generateName(m.GenerateName)
	}
	if err := strategy.RequireName(k, m); err != nil {
		return nil, nil, err
	}
	if j, ok := obj.(*api.Job); ok {
		api.GenerateJobSelector(j) // api/batch.go: the job strategy's controller-uid selector and labels
	}
	if err := nodeRestriction(ctx, k, obj); err != nil { // authz.go: a node creates only its own Node and Lease
		return nil, nil, err
	}
	if err := admitCSRCreate(ctx, k, obj); err != nil { // certificates.go: the requester, no system:masters
		return nil, nil, err
	}
	api.SetDefaults(obj)
	strategy.PrepareStrategy(obj, nil)
	r.trackFields(ctx, k, nil, obj) // apply.go: managedFields of an HTTP write
	if err := r.admitPriority(ctx, k, obj); err != nil {
		return nil, nil, err
	}
	if err := r.admitServiceAccount(ctx, k, obj); err != nil { // serviceaccount_token.go
		return nil, nil, err
	}
	admitKueueJob(obj) // admission_kueue.go: a queued Job starts suspended
	// admission_hami.go: HAMi's webhook (CUDA_TASK_PRIORITY, its checks).
	if err := admitHAMi(obj); err != nil {
		return nil, nil, err
	}
	// admission_storage.go: a claim's default class, protection finalizers.
	if err := r.admitStorage(ctx, obj); err != nil {
		return nil, nil, err
	}
	ranges, err := r.defaultLimits(ctx, obj) // admission_limitrange.go
	if err != nil {
		return nil, nil, err
	}
	if errs := append(api.Validate(obj), api.ValidateCreate(obj)...); len(errs) > 0 {
		return nil, nil, api.NewInvalid(k, m.Name, errs)
	}
	if err := r.admitRBAC(ctx, k, obj); err != nil { // escalation.go: no one grants what they lack
		return nil, nil, err
	}
	if err := validateLimits(k, obj, ranges); err != nil {
		return nil, nil, err
	}
	var ns *api.Namespace // read once, for the lifecycle check and Pod Security
	if k.Namespaced {
		if ns, err = r.checkNamespace(ctx, k, m.Namespace, m.Name); err != nil {
			return nil, nil, err
		}
	}
	if err := r.admitPodSecurity(ctx, k, obj, nil, ns); err != nil {
		return nil, nil, err
	}
	alloc := r.serviceWrite(k)
	defer alloc.done(ctx)
	if err := alloc.allocate(ctx, obj, nil); err != nil {
		return nil, nil, err
	}
	var out api.Object
	var raw []byte
	for attempt := 1; ; attempt++ {
		// admission_quota.go: the last step. The create rides in the commit
		// of its charge (after); a charge that lost a race is made again.
		quotaDone, after, err := r.chargeQuota(ctx, k, obj, nil)
		if err != nil {
			return nil, nil, err
		}
		if isDryRun(ctx) { // dryrun.go: all of the above, nothing stored
			out, err := r.dryRunCreate(ctx, k, obj, generated)
			return out, nil, err
		}
		out, raw, err = r.storeCreate(ctx, obj, after, owned)
		for i := 0; generated && api.IsAlreadyExists(err) && i < conflictRetries; i++ {
			m.Name = generateName(m.GenerateName)
			out, raw, err = r.storeCreate(ctx, obj, after, owned)
		}
		quotaDone(ctx, err == nil)
		if err == nil {
			break
		}
		if errors.Is(err, store.ErrDependencyFailed) {
			if retryCharge(err, attempt) {
				continue
			}
			err = quotaWriteFailed(err)
		}
		return nil, nil, err
	}
	if tm := out.GetTypeMeta(); tm.APIVersion != k.APIVersion() || tm.Kind != k.Kind {
		out, raw = withTypeMeta(k, api.Clone(out)), nil // not what the store wrote; out may be shared
	}
	if pod, ok := out.(*api.Pod); ok {
		r.recordCreate(pod, start)
	}
	return out, raw, nil
}

// storeCreate stores obj, with the JSON written where the store hands it
// back (store.EncodingCreator), unless a write of after (its quota charge)
// failed: then it fails with store.ErrDependencyFailed, having written
// nothing. Where the store can (store.Chainer) the create is queued behind
// them, else it waits for them. share: the caller only reads the object
// returned, which the store may then share with its watchers.
func (r *Registry) storeCreate(ctx context.Context, obj api.Object, after []*store.Queued, share bool) (api.Object, []byte, error) {
	if len(after) > 0 {
		if c, ok := r.store.(store.Chainer); ok {
			return c.CreateEncodedAfter(ctx, obj, after, share)
		}
		if err := store.WaitAll(after); err != nil {
			return nil, nil, err
		}
	}
	if c, ok := r.store.(store.EncodingCreator); ok {
		return c.CreateEncoded(ctx, obj, share)
	}
	out, err := r.store.Create(ctx, obj)
	return out, nil, err
}

// Update replaces an object's spec and metadata. Status (for kinds with a
// status subresource), uid, creationTimestamp and deletion fields are kept
// from the stored object; generation bumps when the spec changes. A set
// resourceVersion must be the stored one (else Conflict); an empty one
// updates whatever is stored. An update that clears the last finalizer of
// a deleting object removes it, and returns its last state.
func (r *Registry) Update(ctx context.Context, k *api.Kind, in api.Object) (api.Object, error) {
	return r.update(ctx, k, in, false)
}

// UpdateStatus writes only the status of an object; spec and metadata
// changes in obj are ignored.
func (r *Registry) UpdateStatus(ctx context.Context, k *api.Kind, in api.Object) (api.Object, error) {
	if !k.HasStatus {
		return nil, notFoundPath()
	}
	return r.update(ctx, k, in, true)
}

func (r *Registry) update(ctx context.Context, k *api.Kind, in api.Object, status bool) (api.Object, error) {
	if err := checkType(k, in); err != nil {
		return nil, err
	}
	if k.Internal {
		return nil, methodNotAllowed("update", k)
	}
	obj := api.Clone(in)
	*obj.GetTypeMeta() = api.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
	m := obj.GetObjectMeta()
	m.Namespace = scope(k, m.Namespace)
	if m.Name == "" {
		return nil, api.NewInvalid(k, "", api.FieldErrors{api.Required("metadata.name", "")})
	}
	if err := normalizeResourceVersion(m); err != nil {
		return nil, err
	}
	alloc := r.serviceWrite(k)
	defer alloc.done(ctx)
	var dryOut api.Object
	quotaDone := func(context.Context, bool) {} // the last attempt's quota charge
	// A status update's status: obj's on the first try, then a fresh copy of in's.
	statusFrom := obj
	guaranteedUpdate := r.store.GuaranteedUpdate
	if ro, ok := r.store.(store.ReadOnlyUpdater); ok && status && k == podKind {
		// A pod's status write only reads cur (a copy of it becomes next;
		// validateUpdate checks a pod's name, namespace and uid alone on a
		// status write): the store need not copy it first.
		guaranteedUpdate = ro.GuaranteedUpdateReadOnly
	}
	out, err := guaranteedUpdate(ctx, k, m.Namespace, m.Name, func(cur api.Object) (api.Object, error) {
		cm := cur.GetObjectMeta()
		if err := strategy.CheckPrecondition(k, cur, m.UID, m.ResourceVersion); err != nil {
			return nil, err
		}
		var next api.Object
		if status {
			next = api.Clone(cur)
			if statusFrom == nil { // a retry: an earlier try's next, the store's now, holds obj's status
				statusFrom = api.Clone(in)
			}
			strategy.SetStatus(next, statusFrom)
			statusFrom = nil
		} else {
			next = api.Clone(obj)
			strategy.PrepareForUpdate(k, next, cur)
			if nm := next.GetObjectMeta(); nm.ManagedFields == nil {
				nm.ManagedFields = cm.ManagedFields // left out: kept
			}
		}
		*next.GetTypeMeta() = *obj.GetTypeMeta()
		next.GetObjectMeta().ResourceVersion = cm.ResourceVersion
		api.SetDefaults(next)
		if !status {
			strategy.PrepareStrategy(next, cur)
			r.trackFields(ctx, k, cur, next) // apply.go
			strategy.BumpGeneration(next, cur)
		}
		validate := api.ValidateUpdate
		if status {
			validate = api.ValidateStatusUpdate // next is cur with obj's status
		}
		if errs := validate(next, cur); len(errs) > 0 {
			return nil, api.NewInvalid(k, m.Name, errs)
		}
		if status {
			if err := r.admitCSRStatus(ctx, next, cur); err != nil { // certificates.go: only a signer issues
				return nil, err
			}
		}
		if !status {
			if err := nodeRestrictUpdate(ctx, k, next, cur); err != nil { // authz.go: a node writes only HAMi's bind phase
				return nil, err
			}
			if err := r.admitRBAC(ctx, k, next); err != nil {
				return nil, err
			}
			if err := r.admitPodSecurity(ctx, k, next, cur, nil); err != nil {
				return nil, err
			}
			if err := alloc.allocate(ctx, next, cur); err != nil {
				return nil, err
			}
			// admission_quota.go; on a retry after a conflict, charge again from cur.
			quotaDone(ctx, false)
			done, err := r.chargeQuotaWritten(ctx, k, next, cur)
			if err != nil {
				quotaDone = func(context.Context, bool) {}
				return nil, err
			}
			quotaDone = done
		}
		// A next that changes nothing is not written: the store sees that
		// its encoding is the stored one (Store.GuaranteedUpdate).
		if isDryRun(ctx) {
			dryOut = next
			return nil, errDryRun
		}
		return next, nil
	})
	if errors.Is(err, errDryRun) {
		return withTypeMeta(k, api.Clone(dryOut)), nil
	}
	quotaDone(ctx, err == nil)
	if err != nil {
		return nil, err
	}
	out, _ = r.removeIfFinalized(ctx, k, withTypeMeta(k, out))
	return out, nil
}

// Delete deletes an object, or begins to:
//   - a pod bound to a node and not terminated gets deletionTimestamp and
//     deletionGracePeriodSeconds (opts, else its terminationGracePeriodSeconds);
//     the node stops it and deletes again with gracePeriodSeconds 0;
//   - an object with finalizers gets deletionTimestamp and goes when an
//     update clears the last one;
//   - a namespace turns Terminating until its spec finalizers are removed
//     (FinalizeNamespace); default, kube-system and kube-public may not
//     be deleted (api.ImmortalNamespaces);
//   - anything else is removed at once.
//
// It returns the object's last state and whether it is gone.
func (r *Registry) Delete(ctx context.Context, k *api.Kind, namespace, name string, opts api.DeleteOptions) (api.Object, bool, error) {
	if k.Internal {
		return nil, false, methodNotAllowed("delete", k)
	}
	if err := strategy.CheckDelete(k, name, opts); err != nil {
		return nil, false, err
	}
	namespace = scope(k, namespace)
	wantUID, wantRV := strategy.DeletePreconditions(opts)
	for attempt := 0; ; attempt++ {
		cur, err := r.store.Get(ctx, k, namespace, name)
		if err != nil {
			return nil, false, err
		}
		if err := strategy.CheckDeletePrecondition(k, cur, wantUID, wantRV); err != nil {
			return nil, false, err
		}
		cm := cur.GetObjectMeta()
		grace := strategy.GracePeriod(cur, opts)
		if isDryRun(ctx) { // dryrun.go: what the delete would do, nothing written
			return dryRunDelete(k, cur, grace)
		}
		var out api.Object
		removed := false
		if grace == 0 && !strategy.HasFinalizers(cur) {
			rv := cm.ResourceVersion
			out, err = r.store.Delete(ctx, k, namespace, name, &api.Preconditions{UID: &cm.UID, ResourceVersion: &rv})
			removed = err == nil
		} else {
			next := api.Clone(cur)
			strategy.MarkDeleting(next, grace, time.Now())
			if strategy.SameObject(next, cur) {
				return withTypeMeta(k, cur), false, nil
			}
			out, err = r.store.Update(ctx, next)
		}
		if api.IsConflict(err) && wantRV == "" && attempt < conflictRetries {
			continue // changed between read and write: decide again
		}
		if err != nil {
			return nil, false, err
		}
		out = withTypeMeta(k, out)
		if removed {
			r.afterRemove(ctx, k, out)
			return out, true, nil
		}
		out, removed = r.removeIfFinalized(ctx, k, out)
		return out, removed, nil
	}
}

// FinalizeNamespace sets a namespace's spec finalizers (the finalize
// subresource). A Terminating namespace left with no finalizers is removed.
func (r *Registry) FinalizeNamespace(ctx context.Context, name string, finalizers []string) (*api.Namespace, error) {
	out, err := r.store.GuaranteedUpdate(ctx, namespaceKind, "", name, func(cur api.Object) (api.Object, error) {
		ns := cur.(*api.Namespace)
		if slices.Equal(ns.Spec.Finalizers, finalizers) {
			return cur, nil
		}
		next := api.Clone(ns)
		next.Spec.Finalizers = slices.Clone(finalizers)
		return next, nil
	})
	if err != nil {
		return nil, err
	}
	out, _ = r.removeIfFinalized(ctx, namespaceKind, withTypeMeta(namespaceKind, out))
	return out.(*api.Namespace), nil
}

// Bind assigns a pod to a node (the binding subresource, the scheduler's
// last step): spec.nodeName is set and the PodScheduled condition turns True.
// A pod already on a node, or being deleted, is a Conflict. Its answer is
// a Status, not the pod, as kube-apiserver's: the bound pod is not kept
// here, and the store's live watchers share it (store.SharingUpdater).
func (r *Registry) Bind(ctx context.Context, b *api.Binding) error {
	ns := scope(podKind, b.Namespace)
	if err := strategy.ValidateBinding(b); err != nil {
		return err
	}
	bind := func(cur api.Object) (api.Object, error) {
		return strategy.Bind(cur.(*api.Pod), b, time.Now())
	}
	if su, ok := r.store.(store.SharingUpdater); ok {
		return su.GuaranteedUpdateShared(ctx, podKind, ns, b.Name, bind)
	}
	_, err := r.store.GuaranteedUpdate(ctx, podKind, ns, b.Name, bind)
	return err
}

// GetScale reads the scale subresource of a deployment or replica set.
func (r *Registry) GetScale(ctx context.Context, k *api.Kind, namespace, name string) (*api.Scale, error) {
	if !strategy.Scalable(k) {
		return nil, notFoundPath()
	}
	obj, err := r.store.Get(ctx, k, scope(k, namespace), name)
	if err != nil {
		return nil, err
	}
	return strategy.ScaleOf(obj), nil
}

// UpdateScale sets spec.replicas of a deployment or replica set. A set
// resourceVersion in s must be the stored one.
func (r *Registry) UpdateScale(ctx context.Context, k *api.Kind, namespace, name string, s *api.Scale) (*api.Scale, error) {
	if !strategy.Scalable(k) {
		return nil, notFoundPath()
	}
	if s.Name != "" && s.Name != name {
		return nil, api.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", s.Name, name))
	}
	if s.Spec.Replicas < 0 {
		return nil, api.NewInvalid(&api.Kind{Kind: "Scale", Group: "autoscaling", Version: "v1", Resource: "scale"}, name,
			api.FieldErrors{api.Invalid("spec.replicas", s.Spec.Replicas, "must be greater than or equal to 0")})
	}
	replicas := s.Spec.Replicas
	want := s.ObjectMeta
	if err := normalizeResourceVersion(&want); err != nil {
		return nil, err
	}
	var dryOut api.Object
	out, err := r.store.GuaranteedUpdate(ctx, k, scope(k, namespace), name, func(cur api.Object) (api.Object, error) {
		if err := strategy.CheckPrecondition(k, cur, want.UID, want.ResourceVersion); err != nil {
			return nil, err
		}
		next := api.Clone(cur)
		switch o := next.(type) {
		case *api.Deployment:
			o.Spec.Replicas = &replicas
		case *api.ReplicaSet:
			o.Spec.Replicas = &replicas
		case *api.StatefulSet:
			o.Spec.Replicas = &replicas
		}
		if !strategy.SpecChanged(next, cur) {
			return cur, nil
		}
		next.GetObjectMeta().Generation++
		if errs := api.ValidateUpdate(next, cur); len(errs) > 0 {
			return nil, api.NewInvalid(k, name, errs)
		}
		if isDryRun(ctx) {
			dryOut = next
			return nil, errDryRun
		}
		return next, nil
	})
	if errors.Is(err, errDryRun) {
		return strategy.ScaleOf(dryOut), nil
	}
	if err != nil {
		return nil, err
	}
	return strategy.ScaleOf(out), nil
}

// AddTrace appends spans to a pod's trace, keeping the newest
// api.MaxTraceSpans. The pod must exist.
func (r *Registry) AddTrace(ctx context.Context, namespace, podName string, spans ...api.TraceSpan) (*api.PodTrace, error) {
	return r.AddObjectTrace(ctx, podKind, namespace, podName, spans...)
}

// GetTrace returns a pod's trace (empty when nothing was recorded yet).
func (r *Registry) GetTrace(ctx context.Context, namespace, podName string) (*api.PodTrace, error) {
	return r.GetObjectTrace(ctx, podKind, namespace, podName)
}

// traced reports whether objects of k have a trace subresource: pods (the
// components' spans) and HorizontalPodAutoscalers (the controller's last
// decisions, posted by the leader after each sync: controllers/hpa.go).
func traced(k *api.Kind) bool { return k == podKind || k == hpaKind }

// AddObjectTrace appends spans to the trace of a pod or an autoscaler
// (traced), in memory (traces.go). The object must exist.
func (r *Registry) AddObjectTrace(ctx context.Context, k *api.Kind, namespace, name string, spans ...api.TraceSpan) (*api.PodTrace, error) {
	if !traced(k) {
		return nil, api.NewNotFound(k, name)
	}
	namespace = scope(k, namespace)
	if err := strategy.ValidateTraceSpans(name, spans); err != nil {
		return nil, err
	}
	obj, err := r.getMeta(ctx, k, namespace, name)
	if err != nil {
		return nil, err
	}
	return strategy.NewObjectTrace(k, obj, r.traces.append(obj, false, spans)), nil
}

// GetObjectTrace returns the trace of a pod or an autoscaler (empty when
// nothing was recorded yet).
func (r *Registry) GetObjectTrace(ctx context.Context, k *api.Kind, namespace, name string) (*api.PodTrace, error) {
	if !traced(k) {
		return nil, api.NewNotFound(k, name)
	}
	namespace = scope(k, namespace)
	obj, err := r.getMeta(ctx, k, namespace, name)
	if err != nil {
		return nil, err
	}
	return strategy.NewObjectTrace(k, obj, r.traces.get(obj)), nil
}

// getMeta reads an object for its identity alone: only its type and
// metadata are set when the store can skip decoding the rest
// (store.MetaGetter), a trace append after every bind being the reason.
func (r *Registry) getMeta(ctx context.Context, k *api.Kind, namespace, name string) (api.Object, error) {
	if g, ok := r.store.(store.MetaGetter); ok {
		return g.GetMeta(ctx, k, namespace, name)
	}
	return r.store.Get(ctx, k, namespace, name)
}

// getShared reads an object the caller never changes: shared with other
// readers where the store can (store.SharedGetter), a copy otherwise. Every
// create reads its namespace, and every pod create its ServiceAccount.
func (r *Registry) getShared(ctx context.Context, k *api.Kind, namespace, name string) (api.Object, error) {
	if g, ok := r.store.(store.SharedGetter); ok {
		return g.GetShared(ctx, k, namespace, name)
	}
	return r.store.Get(ctx, k, namespace, name)
}

// recordCreate writes the API server's own span for a new pod. It starts a
// fresh trace: a leftover one of an older pod with the same name is replaced.
func (r *Registry) recordCreate(pod *api.Pod, start time.Time) {
	r.traces.add(pod, true, []api.TraceSpan{strategy.CreateSpan(pod, start, time.Now())}, false)
}

// removeIfFinalized removes a deleting object that has nothing left to
// wait for, and returns its last state and true (or obj and false when it stays).
func (r *Registry) removeIfFinalized(ctx context.Context, k *api.Kind, obj api.Object) (api.Object, bool) {
	if !strategy.Finalized(obj) {
		return obj, false
	}
	m := obj.GetObjectMeta()
	rv := m.ResourceVersion
	out, err := r.store.Delete(ctx, k, m.Namespace, m.Name, &api.Preconditions{UID: &m.UID, ResourceVersion: &rv})
	if err != nil {
		// Changed meanwhile: whoever changed it decides again.
		r.log.Debug("remove finalized object", "kind", k.Kind, "key", api.KeyOf(obj), "err", err)
		return obj, false
	}
	out = withTypeMeta(k, out)
	r.afterRemove(ctx, k, out)
	return out, true
}

// afterRemove cleans up what belongs to a removed object: its trace.
func (r *Registry) afterRemove(ctx context.Context, k *api.Kind, obj api.Object) {
	if !traced(k) {
		return
	}
	r.traces.remove(obj)
}

// checkNamespace: objects may only be created in an existing namespace
// that is not being deleted.
// The namespace returned is shared (getShared): read only.
func (r *Registry) checkNamespace(ctx context.Context, k *api.Kind, namespace, name string) (*api.Namespace, error) {
	obj, err := r.getShared(ctx, namespaceKind, "", namespace)
	if err != nil {
		return nil, err
	}
	ns := obj.(*api.Namespace)
	if ns.DeletionTimestamp != nil || ns.Status.Phase == api.NamespaceTerminating {
		return nil, forbidden(k, name, fmt.Sprintf("unable to create new content in namespace %s because it is being terminated", namespace))
	}
	return ns, nil
}

// normalizeResourceVersion checks the resourceVersion of an object sent for
// an update (400 when malformed) and writes it as the store does: "0" is
// none (an unconditional update, as Kubernetes), "007" is "7".
func normalizeResourceVersion(m *api.ObjectMeta) error {
	rev, err := parseResourceVersion("metadata.resourceVersion", m.ResourceVersion)
	if err != nil {
		return err
	}
	m.ResourceVersion = ""
	if rev > 0 {
		m.ResourceVersion = strconv.FormatInt(rev, 10)
	}
	return nil
}

// withTypeMeta makes sure apiVersion and kind are set, writing only when
// they are not (objects from the store normally carry them).
func withTypeMeta(k *api.Kind, o api.Object) api.Object {
	tm := o.GetTypeMeta()
	if tm.APIVersion != k.APIVersion() || tm.Kind != k.Kind {
		*tm = api.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
	}
	return o
}

// scope is the namespace an object of k lives in: "" for cluster-scoped
// kinds, "default" when a namespaced one names none.
func scope(k *api.Kind, namespace string) string {
	if !k.Namespaced {
		return ""
	}
	if namespace == "" {
		return DefaultNamespace
	}
	return namespace
}

func checkType(k *api.Kind, obj api.Object) error {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return api.NewBadRequest("no object given")
	}
	if t := reflect.TypeOf(obj); t.Kind() != reflect.Pointer || t.Elem() != k.Type {
		return api.NewBadRequest(fmt.Sprintf("object of Go type %T is not a %s", obj, k.Kind))
	}
	return nil
}

// newUID returns a random (version 4) UUID.
func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte // 8-4-4-4-12 hex digits
	hex.Encode(s[0:8], b[0:4])
	hex.Encode(s[9:13], b[4:6])
	hex.Encode(s[14:18], b[6:8])
	hex.Encode(s[19:23], b[8:10])
	hex.Encode(s[24:], b[10:])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return string(s[:])
}

// generateName completes a generateName prefix with 5 random characters
// from Kubernetes' alphabet (no vowels, no confusable digits).
func generateName(prefix string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	const maxPrefix = 63 - 5
	if len(prefix) > maxPrefix {
		prefix = prefix[:maxPrefix]
	}
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[mrand.IntN(len(alphabet))]
	}
	return prefix + string(b)
}
