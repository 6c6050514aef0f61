package apiserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/serviceaccount"
	"skiff.dev/skiff/controlplane/store"
)

// Kinds the registry treats specially. Read-only lookups into api.Kinds.
var (
	namespaceKind  = api.MustKindOf(&api.Namespace{})
	podKind        = api.MustKindOf(&api.Pod{})
	nodeKind       = api.MustKindOf(&api.Node{})
	traceKind      = api.MustKindOf(&api.PodTrace{})
	deploymentKind = api.MustKindOf(&api.Deployment{})
	replicaSetKind = api.MustKindOf(&api.ReplicaSet{})
	daemonSetKind  = api.MustKindOf(&api.DaemonSet{})
)

// DefaultNamespace is where namespaced objects go when none is named.
const DefaultNamespace = api.NamespaceDefault

// NamespaceFinalizer is the spec finalizer every namespace gets on create;
// the namespace controller removes it (FinalizeNamespace) once the
// namespace is empty, and the namespace then disappears.
const NamespaceFinalizer = "kubernetes"

// protectedNamespaces may not be deleted, as in Kubernetes.
var protectedNamespaces = api.ImmortalNamespaces

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
}

// NewRegistry returns a registry over st. A nil logger discards.
func NewRegistry(st store.Store, logger *slog.Logger) *Registry {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Registry{store: st, log: logger, services: newServiceAllocator(), traces: newTraceBook(MaxTracedPods), freshWait: freshnessTimeout}
}

// EnsureDefaults creates the namespaces every Kubernetes cluster has
// (api.SystemNamespaces: default, kube-system, kube-public and
// kube-node-lease, for the nodes' heartbeat Leases) and the default
// StorageClass local-path. It is idempotent; the server calls it at every
// start, so a namespace that was deleted (only kube-node-lease may be) is
// back after a restart; the namespace controller brings it back sooner
// (controllers.NamespaceController).
func (r *Registry) EnsureDefaults(ctx context.Context) error {
	for _, name := range api.SystemNamespaces {
		ns := &api.Namespace{ObjectMeta: api.ObjectMeta{Name: name}}
		if _, err := r.Create(ctx, namespaceKind, ns); err != nil && !api.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %q: %w", name, err)
		}
	}
	return r.ensureLocalPathClass(ctx) // admission_storage.go
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
	ls, fs, err := parseSelectors(k, opts)
	if err != nil {
		return nil, "", err
	}
	if !k.Namespaced {
		namespace = ""
	}
	items, rev, err := r.listAt(ctx, k, namespace, opts)
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
	start := time.Now()
	if err := checkType(k, in); err != nil {
		return nil, err
	}
	if k.Internal {
		return nil, methodNotAllowed("create", k)
	}
	obj := api.Clone(in)
	*obj.GetTypeMeta() = api.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
	m := obj.GetObjectMeta()
	m.Namespace = scope(k, m.Namespace)
	if m.ResourceVersion != "" {
		return nil, api.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	m.UID = newUID()
	m.CreationTimestamp = api.Now()
	m.Generation = 1
	m.DeletionTimestamp, m.DeletionGracePeriodSeconds = nil, nil
	prepareForCreate(k, obj)
	generated := m.Name == "" && m.GenerateName != ""
	if generated {
		m.Name = generateName(m.GenerateName)
	}
	if m.Name == "" {
		return nil, api.NewInvalid(k, "", api.FieldErrors{api.Required("metadata.name", "name or generateName is required")})
	}
	if j, ok := obj.(*api.Job); ok {
		api.GenerateJobSelector(j) // api/batch.go: the job strategy's controller-uid selector and labels
	}
	if err := nodeRestriction(ctx, k, obj); err != nil { // authz.go: a node creates only its own Node and Lease
		return nil, err
	}
	api.SetDefaults(obj)
	prepareStrategy(obj, nil)
	r.trackFields(ctx, k, nil, obj) // apply.go: managedFields of an HTTP write
	if err := r.admitPriority(ctx, k, obj); err != nil {
		return nil, err
	}
	if err := r.admitServiceAccount(ctx, k, obj); err != nil { // serviceaccount_token.go
		return nil, err
	}
	admitKueueJob(obj) // admission_kueue.go: a queued Job starts suspended
	// admission_storage.go: a claim's default class, protection finalizers.
	if err := r.admitStorage(ctx, obj); err != nil {
		return nil, err
	}
	if errs := api.Validate(obj); len(errs) > 0 {
		return nil, api.NewInvalid(k, m.Name, errs)
	}
	if k.Namespaced {
		if err := r.checkNamespace(ctx, k, m.Namespace, m.Name); err != nil {
			return nil, err
		}
	}
	if err := r.admitPodSecurity(ctx, k, obj, nil); err != nil {
		return nil, err
	}
	alloc := r.serviceWrite(k)
	defer alloc.done(ctx)
	if err := alloc.allocate(ctx, obj, nil); err != nil {
		return nil, err
	}
	if isDryRun(ctx) { // dryrun.go: all of the above, nothing stored
		return r.dryRunCreate(ctx, k, obj, generated)
	}
	out, err := r.store.Create(ctx, obj)
	for i := 0; generated && api.IsAlreadyExists(err) && i < conflictRetries; i++ {
		m.Name = generateName(m.GenerateName)
		out, err = r.store.Create(ctx, obj)
	}
	if err != nil {
		return nil, err
	}
	out = withTypeMeta(k, out)
	if pod, ok := out.(*api.Pod); ok {
		r.recordCreate(ctx, pod, start)
	}
	return out, nil
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
	out, err := r.store.GuaranteedUpdate(ctx, k, m.Namespace, m.Name, func(cur api.Object) (api.Object, error) {
		cm := cur.GetObjectMeta()
		if err := checkPrecondition(k, cur, m.UID, m.ResourceVersion); err != nil {
			return nil, err
		}
		var next api.Object
		if status {
			next = api.Clone(cur)
			setField(next, api.Clone(obj), "Status")
		} else {
			next = api.Clone(obj)
			nm := next.GetObjectMeta()
			nm.UID, nm.CreationTimestamp, nm.Generation = cm.UID, cm.CreationTimestamp, cm.Generation
			nm.DeletionTimestamp, nm.DeletionGracePeriodSeconds = cm.DeletionTimestamp, cm.DeletionGracePeriodSeconds
			if nm.ManagedFields == nil {
				nm.ManagedFields = cm.ManagedFields // left out: kept
			}
			if k.HasStatus {
				setField(next, cur, "Status")
			}
			carryOver(next, cur)
		}
		*next.GetTypeMeta() = *obj.GetTypeMeta()
		next.GetObjectMeta().ResourceVersion = cm.ResourceVersion
		api.SetDefaults(next)
		if !status {
			prepareStrategy(next, cur)
			r.trackFields(ctx, k, cur, next) // apply.go
		}
		if !status && specChanged(next, cur) {
			next.GetObjectMeta().Generation = cm.Generation + 1
		}
		if errs := api.ValidateUpdate(next, cur); len(errs) > 0 {
			return nil, api.NewInvalid(k, m.Name, errs)
		}
		if !status {
			if err := r.admitPodSecurity(ctx, k, next, cur); err != nil {
				return nil, err
			}
			if err := alloc.allocate(ctx, next, cur); err != nil {
				return nil, err
			}
		}
		if sameJSON(next, cur) {
			next = cur
		}
		if isDryRun(ctx) {
			dryOut = next
			return nil, errDryRun
		}
		return next, nil
	})
	if errors.Is(err, errDryRun) {
		return withTypeMeta(k, api.Clone(dryOut)), nil
	}
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
	if err := api.CheckPropagationPolicy(opts.PropagationPolicy); err != nil {
		return nil, false, err
	}
	namespace = scope(k, namespace)
	if k == namespaceKind && slices.Contains(protectedNamespaces, name) {
		return nil, false, forbidden(k, name, "this namespace may not be deleted")
	}
	if g := opts.GracePeriodSeconds; g != nil && *g < 0 {
		return nil, false, api.NewBadRequest(fmt.Sprintf("gracePeriodSeconds %d: must not be negative", *g))
	}
	var wantUID, wantRV string
	if p := opts.Preconditions; p != nil {
		if p.UID != nil {
			wantUID = *p.UID
		}
		if p.ResourceVersion != nil {
			wantRV = *p.ResourceVersion
		}
	}
	for attempt := 0; ; attempt++ {
		cur, err := r.store.Get(ctx, k, namespace, name)
		if err != nil {
			return nil, false, err
		}
		if err := checkPrecondition(k, cur, wantUID, ""); err != nil {
			return nil, false, err
		}
		cm := cur.GetObjectMeta()
		if wantRV != "" && wantRV != cm.ResourceVersion {
			// As Kubernetes' storage.Preconditions: compared as given, so
			// a malformed one is a failed precondition (409), not a 400.
			return nil, false, api.NewConflict(k, cm.Name, fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", wantRV, cm.ResourceVersion))
		}
		grace := gracePeriod(cur, opts)
		if isDryRun(ctx) { // dryrun.go: what the delete would do, nothing written
			return dryRunDelete(k, cur, grace)
		}
		var out api.Object
		removed := false
		if grace == 0 && !hasFinalizers(cur) {
			rv := cm.ResourceVersion
			out, err = r.store.Delete(ctx, k, namespace, name, &api.Preconditions{UID: &cm.UID, ResourceVersion: &rv})
			removed = err == nil
		} else {
			next := api.Clone(cur)
			markDeleting(next, grace, time.Now())
			if sameJSON(next, cur) {
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
// A pod already on a node, or being deleted, is a Conflict.
func (r *Registry) Bind(ctx context.Context, b *api.Binding) (*api.Pod, error) {
	ns := scope(podKind, b.Namespace)
	var errs api.FieldErrors
	if b.Name == "" {
		errs = append(errs, api.Required("metadata.name", "name of the pod"))
	}
	if b.Target.Name == "" {
		errs = append(errs, api.Required("target.name", "name of the node"))
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		errs = append(errs, api.NotSupported("target.kind", b.Target.Kind, "Node"))
	}
	if len(errs) > 0 {
		return nil, api.NewInvalid(&api.Kind{Kind: "Binding", Resource: "bindings", Version: "v1"}, b.Name, errs)
	}
	out, err := r.store.GuaranteedUpdate(ctx, podKind, ns, b.Name, func(cur api.Object) (api.Object, error) {
		pod := cur.(*api.Pod)
		if err := checkPrecondition(podKind, pod, b.UID, ""); err != nil {
			return nil, err
		}
		if pod.DeletionTimestamp != nil {
			return nil, api.NewConflict(podKind, pod.Name, fmt.Sprintf("pod %s is being deleted, cannot be assigned to a host", pod.Name))
		}
		if pod.Spec.NodeName != "" {
			return nil, api.NewConflict(podKind, pod.Name, fmt.Sprintf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
		}
		next := api.Clone(pod)
		next.Spec.NodeName = b.Target.Name
		setPodCondition(next, api.PodCondition{Type: api.PodScheduled, Status: api.ConditionTrue, LastTransitionTime: api.Now()})
		return next, nil
	})
	if err != nil {
		return nil, err
	}
	return withTypeMeta(podKind, out).(*api.Pod), nil
}

// GetScale reads the scale subresource of a deployment or replica set.
func (r *Registry) GetScale(ctx context.Context, k *api.Kind, namespace, name string) (*api.Scale, error) {
	if k != deploymentKind && k != replicaSetKind {
		return nil, notFoundPath()
	}
	obj, err := r.store.Get(ctx, k, scope(k, namespace), name)
	if err != nil {
		return nil, err
	}
	return scaleOf(obj), nil
}

// UpdateScale sets spec.replicas of a deployment or replica set. A set
// resourceVersion in s must be the stored one.
func (r *Registry) UpdateScale(ctx context.Context, k *api.Kind, namespace, name string, s *api.Scale) (*api.Scale, error) {
	if k != deploymentKind && k != replicaSetKind {
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
		if err := checkPrecondition(k, cur, want.UID, want.ResourceVersion); err != nil {
			return nil, err
		}
		next := api.Clone(cur)
		switch o := next.(type) {
		case *api.Deployment:
			o.Spec.Replicas = &replicas
		case *api.ReplicaSet:
			o.Spec.Replicas = &replicas
		}
		if !specChanged(next, cur) {
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
		return scaleOf(dryOut), nil
	}
	if err != nil {
		return nil, err
	}
	return scaleOf(out), nil
}

// markDeleting marks obj as being deleted with grace seconds, from now: a
// deletionTimestamp (never later than one already set: a shorter grace
// period brings it forward) and deletionGracePeriodSeconds; a namespace
// turns Terminating.
func markDeleting(obj api.Object, grace int64, now time.Time) {
	m := obj.GetObjectMeta()
	if m.DeletionTimestamp == nil || m.DeletionGracePeriodSeconds == nil || grace < *m.DeletionGracePeriodSeconds {
		ts := api.NewTime(now.Add(time.Duration(grace) * time.Second).Truncate(time.Second))
		if m.DeletionTimestamp == nil || ts.Before(m.DeletionTimestamp.Time) {
			m.DeletionTimestamp = &ts
		}
		m.DeletionGracePeriodSeconds = &grace
	}
	if ns, ok := obj.(*api.Namespace); ok {
		ns.Status.Phase = api.NamespaceTerminating
	}
}

// validateTraceSpans checks spans posted to pod's trace: each names its
// component and step.
func validateTraceSpans(pod string, spans []api.TraceSpan) error {
	var errs api.FieldErrors
	for i, s := range spans {
		if s.Component == "" {
			errs = append(errs, api.Required(fmt.Sprintf("spans[%d].component", i), ""))
		}
		if s.Step == "" {
			errs = append(errs, api.Required(fmt.Sprintf("spans[%d].step", i), ""))
		}
	}
	if len(errs) > 0 {
		return api.NewInvalid(traceKind, pod, errs)
	}
	return nil
}

// AddTrace appends spans to a pod's trace, keeping the newest
// api.MaxTraceSpans. The pod must exist.
func (r *Registry) AddTrace(ctx context.Context, namespace, podName string, spans ...api.TraceSpan) (*api.PodTrace, error) {
	namespace = scope(podKind, namespace)
	if err := validateTraceSpans(podName, spans); err != nil {
		return nil, err
	}
	obj, err := r.store.Get(ctx, podKind, namespace, podName)
	if err != nil {
		return nil, err
	}
	return r.appendTrace(ctx, obj.(*api.Pod), false, spans)
}

// GetTrace returns a pod's trace (empty when nothing was recorded yet).
func (r *Registry) GetTrace(ctx context.Context, namespace, podName string) (*api.PodTrace, error) {
	namespace = scope(podKind, namespace)
	obj, err := r.store.Get(ctx, podKind, namespace, podName)
	if err != nil {
		return nil, err
	}
	pod := obj.(*api.Pod)
	return withTypeMeta(traceKind, newTrace(pod, r.traces.get(pod))).(*api.PodTrace), nil
}

// recordCreate writes the API server's own span for a new pod. It starts a
// fresh trace: a leftover one of an older pod with the same name is replaced.
// A failure is logged, never returned: the pod exists.
func (r *Registry) recordCreate(ctx context.Context, pod *api.Pod, start time.Time) {
	span := api.TraceSpan{
		Component: "apiserver", Step: "create",
		Start: api.MicroTime{Time: start}, End: api.MicroTime{Time: time.Now()},
		Node:    pod.Spec.NodeName,
		Message: "admitted, defaulted, validated and stored at resourceVersion " + pod.ResourceVersion,
		Details: map[string]any{"resourceVersion": pod.ResourceVersion, "uid": pod.UID},
	}
	if _, err := r.appendTrace(ctx, pod, true, []api.TraceSpan{span}); err != nil {
		r.log.Warn("record pod trace", "pod", api.KeyOf(pod), "err", err)
	}
}

func (r *Registry) appendTrace(_ context.Context, pod *api.Pod, reset bool, spans []api.TraceSpan) (*api.PodTrace, error) {
	return withTypeMeta(traceKind, newTrace(pod, r.traces.append(pod, reset, spans))).(*api.PodTrace), nil
}

func newTrace(pod *api.Pod, spans []api.TraceSpan) *api.PodTrace {
	t := true
	return &api.PodTrace{
		TypeMeta: api.TypeMeta{APIVersion: traceKind.APIVersion(), Kind: traceKind.Kind},
		ObjectMeta: api.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace,
			OwnerReferences: []api.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: &t}},
		},
		Spans: boundSpans(spans),
	}
}

func boundSpans(s []api.TraceSpan) []api.TraceSpan {
	if len(s) > api.MaxTraceSpans {
		s = slices.Clone(s[len(s)-api.MaxTraceSpans:])
	}
	return s
}

// removeIfFinalized removes a deleting object that has nothing left to
// wait for, and returns its last state and true (or obj and false when it stays).
func (r *Registry) removeIfFinalized(ctx context.Context, k *api.Kind, obj api.Object) (api.Object, bool) {
	m := obj.GetObjectMeta()
	if m.DeletionTimestamp == nil || hasFinalizers(obj) ||
		(m.DeletionGracePeriodSeconds != nil && *m.DeletionGracePeriodSeconds > 0) {
		return obj, false
	}
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

// afterRemove cleans up what belongs to a removed object: a pod's trace.
func (r *Registry) afterRemove(ctx context.Context, k *api.Kind, obj api.Object) {
	if k != podKind {
		return
	}
	m := obj.GetObjectMeta()
	r.traces.remove(m.Namespace, m.Name)
}

// checkNamespace: objects may only be created in an existing namespace
// that is not being deleted.
func (r *Registry) checkNamespace(ctx context.Context, k *api.Kind, namespace, name string) error {
	obj, err := r.store.Get(ctx, namespaceKind, "", namespace)
	if err != nil {
		return err
	}
	ns := obj.(*api.Namespace)
	if ns.DeletionTimestamp != nil || ns.Status.Phase == api.NamespaceTerminating {
		return forbidden(k, name, fmt.Sprintf("unable to create new content in namespace %s because it is being terminated", namespace))
	}
	return nil
}

// prepareForCreate resets what a client may not choose at create: status
// (except a Node's, which its agent reports as it registers), and sets a
// namespace's finalizer.
func prepareForCreate(k *api.Kind, obj api.Object) {
	if k.HasStatus && k != nodeKind {
		f := reflect.ValueOf(obj).Elem().FieldByName("Status")
		f.SetZero()
	}
	switch o := obj.(type) {
	case *api.Pod:
		o.Status.Phase = api.PodPending
	case *api.Namespace:
		o.Spec.Finalizers = []string{NamespaceFinalizer}
		o.Status.Phase = api.NamespaceActive
	}
}

// prepareStrategy sets what a kind's registry strategy derives from the
// object and its stored version (cur nil at create), after defaults: a
// DaemonSet's template generation annotation.
func prepareStrategy(obj, cur api.Object) {
	if d, ok := obj.(*api.DaemonSet); ok {
		old, _ := cur.(*api.DaemonSet)
		api.PrepareDaemonSet(d, old)
	}
}

// carryOver copies into an update what the server owns or assigned and a
// client may leave out, as Kubernetes' apply does: a namespace's spec
// finalizers (changed only by the finalize subresource), a bound pod's
// node, a service's cluster IPs and node ports.
func carryOver(next, cur api.Object) {
	switch n := next.(type) {
	case *api.Namespace:
		n.Spec.Finalizers = cur.(*api.Namespace).Spec.Finalizers
	case *api.Pod:
		if n.Spec.NodeName == "" {
			n.Spec.NodeName = cur.(*api.Pod).Spec.NodeName
		}
	case *api.Service:
		c := cur.(*api.Service)
		if n.Spec.ClusterIP == "" && len(n.Spec.ClusterIPs) == 0 {
			n.Spec.ClusterIP, n.Spec.ClusterIPs = c.Spec.ClusterIP, slices.Clone(c.Spec.ClusterIPs)
		}
		if n.Spec.Type != c.Spec.Type {
			return
		}
		for i := range n.Spec.Ports {
			p := &n.Spec.Ports[i]
			for _, old := range c.Spec.Ports {
				if p.NodePort == 0 && old.Name == p.Name && old.Port == p.Port {
					p.NodePort = old.NodePort
				}
			}
		}
	}
}

// gracePeriod of a delete, in seconds; 0 means remove at once.
func gracePeriod(obj api.Object, opts api.DeleteOptions) int64 {
	pod, ok := obj.(*api.Pod)
	if !ok {
		return 0
	}
	// Nothing runs an unbound or finished pod: no one to wait for.
	if pod.Spec.NodeName == "" || pod.Status.Phase == api.PodSucceeded || pod.Status.Phase == api.PodFailed {
		return 0
	}
	if opts.GracePeriodSeconds != nil {
		return *opts.GracePeriodSeconds
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return *g
	}
	return api.DefaultTerminationGracePeriod
}

func hasFinalizers(obj api.Object) bool {
	if len(obj.GetObjectMeta().Finalizers) > 0 {
		return true
	}
	ns, ok := obj.(*api.Namespace)
	return ok && len(ns.Spec.Finalizers) > 0
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

// checkPrecondition: a named uid or resourceVersion must be the stored one.
func checkPrecondition(k *api.Kind, cur api.Object, uid, rv string) error {
	cm := cur.GetObjectMeta()
	if uid != "" && uid != cm.UID {
		return api.NewConflict(k, cm.Name, fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", uid, cm.UID))
	}
	if rv != "" && rv != cm.ResourceVersion {
		return api.NewConflict(k, cm.Name, "the object has been modified; please apply your changes to the latest version and try again")
	}
	return nil
}

func scaleOf(obj api.Object) *api.Scale {
	s := &api.Scale{TypeMeta: api.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"}}
	m := obj.GetObjectMeta()
	s.ObjectMeta = api.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, CreationTimestamp: m.CreationTimestamp}
	var replicas *int32
	var sel *api.LabelSelector
	switch o := obj.(type) {
	case *api.Deployment:
		replicas, sel, s.Status.Replicas = o.Spec.Replicas, o.Spec.Selector, o.Status.Replicas
	case *api.ReplicaSet:
		replicas, sel, s.Status.Replicas = o.Spec.Replicas, o.Spec.Selector, o.Status.Replicas
	}
	s.Spec.Replicas = 1
	if replicas != nil {
		s.Spec.Replicas = *replicas
	}
	if sel != nil {
		s.Status.Selector = sel.String()
	}
	return s
}

func setPodCondition(pod *api.Pod, c api.PodCondition) {
	for i, old := range pod.Status.Conditions {
		if old.Type == c.Type {
			if old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}

// setField copies the named struct field (Status) from src to dst.
func setField(dst, src api.Object, name string) {
	reflect.ValueOf(dst).Elem().FieldByName(name).Set(reflect.ValueOf(src).Elem().FieldByName(name))
}

// specChanged compares everything but metadata and status: the spec, or for
// kinds without one (ConfigMap, Secret, Endpoints) their data.
func specChanged(a, b api.Object) bool {
	return !bytes.Equal(specJSON(a), specJSON(b))
}

func specJSON(o api.Object) []byte {
	var m map[string]json.RawMessage
	b, err := json.Marshal(o)
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", o, err))
	}
	for _, f := range []string{"apiVersion", "kind", "metadata", "status"} {
		delete(m, f)
	}
	out, _ := json.Marshal(m)
	return out
}

func sameJSON(a, b api.Object) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
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

func forbidden(k *api.Kind, name, why string) *api.StatusError {
	e := api.NewStatusError(http.StatusForbidden, api.ReasonForbidden, fmt.Sprintf("%s %q is forbidden: %s", k.GroupResource(), name, why))
	e.Status.Details = &api.StatusDetails{Name: name, Group: k.Group, Kind: k.Resource}
	return e
}

func methodNotAllowed(verb string, k *api.Kind) *api.StatusError {
	return api.NewStatusError(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowd,
		fmt.Sprintf("%s is not supported on resources of kind %q", verb, k.GroupKind()))
}

func notFoundPath() *api.StatusError {
	return api.NewStatusError(http.StatusNotFound, api.ReasonNotFound, "the server could not find the requested resource")
}

// newUID returns a random (version 4) UUID.
func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
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
