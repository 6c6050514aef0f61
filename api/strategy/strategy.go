// Package strategy is the registry's rules on a write, in the spirit of
// Kubernetes' registry strategies (k8s.io/apiserver/pkg/registry/rest:
// PrepareForCreate, PrepareForUpdate, the pod strategy's binding): what
// the server owns and sets on a new object, what an update keeps of the
// stored one, when a write conflicts, how a delete waits, which errors a
// verb a kind lacks gets.
//
// Two callers hold every write to these rules: the API server's registry
// (controlplane/apiserver/registry.go), and the in-memory client of unit
// tests (client/fake), so the fake cannot drift from the server; and
// client/clienttest runs one suite against both. Admission (priority,
// ServiceAccounts, Pod Security, quotas, storage), address allocation,
// namespace existence and storage are the server's alone.
//
// Everything here is pure: objects in, objects (changed in place where
// the function says so) or errors out; no I/O, no clock but the one
// passed in.
//
// Moved here from controlplane/apiserver (issue 25: client/fake no longer
// imports the API server).
package strategy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
)

// NamespaceFinalizer is the spec finalizer every namespace gets at create;
// the namespace controller removes it (the finalize subresource) once the
// namespace is empty, and the namespace then disappears.
const NamespaceFinalizer = "kubernetes"

var (
	nodeKind  = api.MustKindOf(&api.Node{})
	traceKind = api.MustKindOf(&api.PodTrace{})
)

// PrepareForCreate checks and resets on a new object what a client may
// not choose: no resourceVersion (400), generation 1, no deletion fields,
// the status reset (except a Node's, which its agent reports as it
// registers); and sets what every new object of its kind gets (a pod's
// Pending phase, a namespace's finalizer and Active phase). The uid,
// creationTimestamp and name are the caller's to set.
func PrepareForCreate(k *api.Kind, obj api.Object) error {
	m := obj.GetObjectMeta()
	if m.ResourceVersion != "" {
		return api.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	m.Generation = 1
	m.DeletionTimestamp, m.DeletionGracePeriodSeconds = nil, nil
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
	return nil
}

// RequireName is the error of a create that names no object (nor a
// generateName to complete); nil when m has a name.
func RequireName(k *api.Kind, m *api.ObjectMeta) error {
	if m.Name == "" {
		return api.NewInvalid(k, "", api.FieldErrors{api.Required("metadata.name", "name or generateName is required")})
	}
	return nil
}

// PrepareStrategy sets what a kind's strategy derives from the object and
// its stored version (cur nil at create), after defaults: a DaemonSet's
// template generation annotation, a new ResourceQuota's status.hard.
func PrepareStrategy(obj, cur api.Object) {
	switch o := obj.(type) {
	case *api.DaemonSet:
		old, _ := cur.(*api.DaemonSet)
		api.PrepareDaemonSet(o, old)
	case *api.ResourceQuota:
		if cur == nil {
			api.PrepareResourceQuota(o)
		}
	}
}

// PrepareForUpdate keeps in next, an update of cur, what the server owns:
// uid, creationTimestamp, generation and the deletion fields, the status
// of a kind with a status subresource, and what the server assigned and a
// client may leave out (CarryOver). managedFields and resourceVersion are
// the caller's.
func PrepareForUpdate(k *api.Kind, next, cur api.Object) {
	nm, cm := next.GetObjectMeta(), cur.GetObjectMeta()
	nm.UID, nm.CreationTimestamp, nm.Generation = cm.UID, cm.CreationTimestamp, cm.Generation
	nm.DeletionTimestamp, nm.DeletionGracePeriodSeconds = cm.DeletionTimestamp, cm.DeletionGracePeriodSeconds
	if k.HasStatus {
		SetStatus(next, api.Clone(cur))
	}
	CarryOver(next, cur)
}

// SetStatus copies the Status field of src into dst (same kind), and
// what belongs to the status but lives in an annotation: a
// ResourceQuota's reservations (api.QuotaReservationsAnnotation), which
// the resourcequota controller prunes as it counts (a status write brings
// them), and which a spec write keeps as stored.
func SetStatus(dst, src api.Object) {
	reflect.ValueOf(dst).Elem().FieldByName("Status").Set(reflect.ValueOf(src).Elem().FieldByName("Status"))
	q, ok := dst.(*api.ResourceQuota)
	if !ok {
		return
	}
	if v, set := src.GetObjectMeta().Annotations[api.QuotaReservationsAnnotation]; set {
		if q.Annotations == nil {
			q.Annotations = map[string]string{}
		}
		q.Annotations[api.QuotaReservationsAnnotation] = v
	} else {
		delete(q.Annotations, api.QuotaReservationsAnnotation)
	}
}

// CarryOver copies into an update what the server owns or assigned and a
// client may leave out, as Kubernetes' apply does: a namespace's spec
// finalizers (changed only by the finalize subresource), a bound pod's
// node, a service's cluster IPs and node ports.
func CarryOver(next, cur api.Object) {
	switch n := next.(type) {
	case *api.Namespace:
		n.Spec.Finalizers = cur.(*api.Namespace).Spec.Finalizers
	case *api.Pod:
		if n.Spec.NodeName == "" {
			n.Spec.NodeName = cur.(*api.Pod).Spec.NodeName
		}
		// Changed only through pods/ephemeralcontainers.
		if n.Spec.EphemeralContainers == nil {
			n.Spec.EphemeralContainers = cur.(*api.Pod).Spec.EphemeralContainers
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

// BumpGeneration sets next's metadata.generation to cur's plus one when
// anything outside metadata and status changed (SpecChanged).
func BumpGeneration(next, cur api.Object) {
	if SpecChanged(next, cur) {
		next.GetObjectMeta().Generation = cur.GetObjectMeta().Generation + 1
	}
}

// SpecChanged compares everything but metadata and status: the spec, or
// for kinds without one (ConfigMap, Secret, Endpoints) their data.
func SpecChanged(a, b api.Object) bool {
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

// SameObject reports that an update changes nothing (a no-op: no new
// resourceVersion, no watch event).
func SameObject(a, b api.Object) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// CheckPrecondition fails with Conflict when uid or rv is set and is not
// the stored object's (cur).
func CheckPrecondition(k *api.Kind, cur api.Object, uid, rv string) error {
	cm := cur.GetObjectMeta()
	if uid != "" && uid != cm.UID {
		return api.NewConflict(k, cm.Name, fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", uid, cm.UID))
	}
	if rv != "" && rv != cm.ResourceVersion {
		return api.NewConflict(k, cm.Name, "the object has been modified; please apply your changes to the latest version and try again")
	}
	return nil
}

// DeletePreconditions are the uid and resourceVersion a delete names
// ("" when not).
func DeletePreconditions(opts api.DeleteOptions) (uid, rv string) {
	if p := opts.Preconditions; p != nil {
		if p.UID != nil {
			uid = *p.UID
		}
		if p.ResourceVersion != nil {
			rv = *p.ResourceVersion
		}
	}
	return uid, rv
}

// CheckDelete refuses a delete before anything is read: a protected
// namespace (Forbidden), a negative grace period or an unknown
// propagation policy (400).
func CheckDelete(k *api.Kind, name string, opts api.DeleteOptions) error {
	if err := api.CheckPropagationPolicy(opts.PropagationPolicy); err != nil {
		return err
	}
	if k.Kind == "Namespace" && IsProtectedNamespace(name) {
		return Forbidden(k, name, "this namespace may not be deleted")
	}
	if g := opts.GracePeriodSeconds; g != nil && *g < 0 {
		return api.NewBadRequest(fmt.Sprintf("gracePeriodSeconds %d: must not be negative", *g))
	}
	return nil
}

// GracePeriod is how long a delete of obj waits, in seconds; 0 means
// remove at once (when nothing else, such as a finalizer, holds it).
func GracePeriod(obj api.Object, opts api.DeleteOptions) int64 {
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

// MarkDeleting marks obj as being deleted with grace seconds, from now: a
// deletionTimestamp (never later than one already set: a shorter grace
// period brings it forward) and deletionGracePeriodSeconds; a namespace
// turns Terminating.
func MarkDeleting(obj api.Object, grace int64, now time.Time) {
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

// HasFinalizers reports metadata.finalizers, or a namespace's spec
// finalizers.
func HasFinalizers(obj api.Object) bool {
	if len(obj.GetObjectMeta().Finalizers) > 0 {
		return true
	}
	ns, ok := obj.(*api.Namespace)
	return ok && len(ns.Spec.Finalizers) > 0
}

// Finalized reports a deleting object that has nothing left to wait for
// (no finalizer, no grace period left): it goes.
func Finalized(obj api.Object) bool {
	m := obj.GetObjectMeta()
	return m.DeletionTimestamp != nil && !HasFinalizers(obj) &&
		(m.DeletionGracePeriodSeconds == nil || *m.DeletionGracePeriodSeconds <= 0)
}

// IsProtectedNamespace reports a namespace that may not be deleted, as in
// Kubernetes (api.ImmortalNamespaces).
func IsProtectedNamespace(name string) bool { return slices.Contains(api.ImmortalNamespaces, name) }

// ValidateBinding checks a pod's binding (the binding subresource, the
// scheduler's last step): the pod's name and a node as target.
func ValidateBinding(b *api.Binding) error {
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
		return api.NewInvalid(&api.Kind{Kind: "Binding", Resource: "bindings", Version: "v1"}, b.Name, errs)
	}
	return nil
}

// Bind assigns pod to b's node and returns it: spec.nodeName set and the
// PodScheduled condition True since now. pod is changed: pass a copy (the
// store's GuaranteedUpdate gives tryUpdate one). The uid precondition of b
// must hold, and a pod already on a node, or being deleted, is a Conflict
// (pod unchanged).
func Bind(pod *api.Pod, b *api.Binding, now time.Time) (*api.Pod, error) {
	k := api.MustKindOf(pod)
	if err := CheckPrecondition(k, pod, b.UID, ""); err != nil {
		return nil, err
	}
	if pod.DeletionTimestamp != nil {
		return nil, api.NewConflict(k, pod.Name, fmt.Sprintf("pod %s is being deleted, cannot be assigned to a host", pod.Name))
	}
	if pod.Spec.NodeName != "" {
		return nil, api.NewConflict(k, pod.Name, fmt.Sprintf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
	}
	pod.Spec.NodeName = b.Target.Name
	SetPodCondition(pod, api.PodCondition{Type: api.PodScheduled, Status: api.ConditionTrue, LastTransitionTime: api.NewTime(now.Truncate(time.Second))})
	return pod, nil
}

// SetPodCondition sets a condition of a pod, keeping its
// lastTransitionTime when its status does not change.
func SetPodCondition(pod *api.Pod, c api.PodCondition) {
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

// ParseSelectors parses a list's or watch's label and field selectors (the
// fields k supports); a bad one is a 400.
func ParseSelectors(k *api.Kind, opts api.ListOptions) (labels.Selector, fields.Selector, error) {
	ls, err := api.ParseSelector(opts.LabelSelector)
	if err != nil {
		return nil, nil, api.NewBadRequest(err.Error())
	}
	fs, err := api.ParseFieldSelector(k, opts.FieldSelector)
	if err != nil {
		return nil, nil, api.NewBadRequest(err.Error())
	}
	return ls, fs, nil
}

// Scalable reports the kinds with a scale subresource.
func Scalable(k *api.Kind) bool { return k.HasScale }

// ScaleOf is the scale subresource of a deployment, replica set or stateful set.
func ScaleOf(obj api.Object) *api.Scale {
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
	case *api.StatefulSet:
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

// ValidateTraceSpans checks spans posted to pod's trace: each names its
// component and step.
func ValidateTraceSpans(pod string, spans []api.TraceSpan) error {
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

// CreateSpan is the API server's own trace span of a new pod, stored
// between start and end: it starts the pod's trace.
func CreateSpan(pod *api.Pod, start, end time.Time) api.TraceSpan {
	return api.TraceSpan{
		Component: "apiserver", Step: "create",
		Start: api.MicroTime{Time: start}, End: api.MicroTime{Time: end},
		Node:    pod.Spec.NodeName,
		Message: "admitted, defaulted, validated and stored at resourceVersion " + pod.ResourceVersion,
		Details: map[string]any{"resourceVersion": pod.ResourceVersion, "uid": pod.UID},
	}
}

// NewObjectTrace is the trace object of obj (of kind k: a pod, or an
// autoscaler whose spans are its controller's decisions) with spans (the
// newest api.MaxTraceSpans), owned by obj.
func NewObjectTrace(k *api.Kind, obj api.Object, spans []api.TraceSpan) *api.PodTrace {
	t := true
	m := obj.GetObjectMeta()
	if len(spans) > api.MaxTraceSpans {
		spans = slices.Clone(spans[len(spans)-api.MaxTraceSpans:])
	}
	return &api.PodTrace{
		TypeMeta: api.TypeMeta{APIVersion: traceKind.APIVersion(), Kind: traceKind.Kind},
		ObjectMeta: api.ObjectMeta{
			Name: m.Name, Namespace: m.Namespace,
			OwnerReferences: []api.OwnerReference{{APIVersion: k.APIVersion(), Kind: k.Kind, Name: m.Name, UID: m.UID, Controller: &t}},
		},
		Spans: spans,
	}
}

// Forbidden is the 403 the registry answers with, e.g. for a write in a
// terminating namespace.
func Forbidden(k *api.Kind, name, why string) *api.StatusError {
	e := api.NewStatusError(http.StatusForbidden, api.ReasonForbidden, fmt.Sprintf("%s %q is forbidden: %s", k.GroupResource(), name, why))
	e.Status.Details = &api.StatusDetails{Name: name, Group: k.Group, Kind: k.Resource}
	return e
}

// MethodNotAllowed is the error for a verb a kind does not support (writes
// of an internal kind such as PodTrace).
func MethodNotAllowed(verb string, k *api.Kind) *api.StatusError {
	return api.NewStatusError(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowd,
		fmt.Sprintf("%s is not supported on resources of kind %q", verb, k.GroupKind()))
}

// NotFoundPath is the error for a subresource a kind does not have.
// Its details are present and empty, as kube-apiserver's
// (kubectl debug tells a missing subresource from a missing pod by them).
func NotFoundPath() *api.StatusError {
	e := api.NewStatusError(http.StatusNotFound, api.ReasonNotFound, "the server could not find the requested resource")
	e.Status.Details = &api.StatusDetails{}
	return e
}

// CheckDeletePrecondition is CheckPrecondition for a delete: a named
// resourceVersion is compared as given, as Kubernetes'
// storage.Preconditions, so a malformed one is a failed precondition
// (409), not a 400.
func CheckDeletePrecondition(k *api.Kind, cur api.Object, uid, rv string) error {
	if err := CheckPrecondition(k, cur, uid, ""); err != nil {
		return err
	}
	cm := cur.GetObjectMeta()
	if rv != "" && rv != cm.ResourceVersion {
		return api.NewConflict(k, cm.Name, fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", rv, cm.ResourceVersion))
	}
	return nil
}
