package apiserver

import (
	"context"
	"slices"
	"sync"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Local is client.Interface served in process by a Registry: the same
// admission, validation and watch semantics as HTTP, without the network.
// The controllers that run inside the server use it.
type Local struct {
	r *Registry
}

var _ client.Interface = (*Local)(nil)

// NewLocal returns an in-process client of r.
func NewLocal(r *Registry) *Local { return &Local{r: r} }

// Create implements client.Interface.
func (l *Local) Create(ctx context.Context, obj api.Object) (api.Object, error) {
	k, err := kindOf(obj)
	if err != nil {
		return nil, err
	}
	return l.r.Create(ctx, k, obj)
}

// Update implements client.Interface.
func (l *Local) Update(ctx context.Context, obj api.Object) (api.Object, error) {
	k, err := kindOf(obj)
	if err != nil {
		return nil, err
	}
	return l.r.Update(ctx, k, obj)
}

// UpdateStatus implements client.Interface.
func (l *Local) UpdateStatus(ctx context.Context, obj api.Object) (api.Object, error) {
	k, err := kindOf(obj)
	if err != nil {
		return nil, err
	}
	return l.r.UpdateStatus(ctx, k, obj)
}

// Delete implements client.Interface.
func (l *Local) Delete(ctx context.Context, kind *api.Kind, namespace, name string, opts api.DeleteOptions) error {
	_, _, err := l.r.Delete(ctx, kind, namespace, name, opts)
	return err
}

// Get implements client.Interface.
func (l *Local) Get(ctx context.Context, kind *api.Kind, namespace, name string) (api.Object, error) {
	return l.r.Get(ctx, kind, namespace, name)
}

// List implements client.Interface.
func (l *Local) List(ctx context.Context, kind *api.Kind, namespace string, opts api.ListOptions) ([]api.Object, string, error) {
	return l.r.List(ctx, kind, namespace, opts)
}

// Watch implements client.Interface. As over HTTP, a watch from "" or "0"
// first delivers the current objects as Added; a resourceVersion older
// than the store's history gives a watcher that ends at once with a Gone
// Err (list again).
func (l *Local) Watch(ctx context.Context, kind *api.Kind, namespace string, opts api.ListOptions) (client.Watcher, error) {
	var wctx context.Context
	var cancel context.CancelFunc
	if opts.TimeoutSeconds > 0 {
		wctx, cancel = context.WithTimeout(ctx, time.Duration(opts.TimeoutSeconds)*time.Second)
	} else {
		wctx, cancel = context.WithCancel(ctx)
	}
	w := &localWatcher{ch: make(chan client.Event), cancel: cancel, done: make(chan struct{})}
	ws, err := l.r.startWatch(wctx, kind, namespace, opts)
	if err != nil {
		if !streamedWatchError(err) { // Gone and too large end the stream, as over HTTP
			cancel()
			return nil, err
		}
		cancel()
		w.err = err
		close(w.ch)
		close(w.done)
		return w, nil
	}
	go func() {
		defer close(w.done)
		defer close(w.ch)
		err := ws.run(wctx, func(t api.WatchEventType, o api.Object) error {
			select {
			case w.ch <- client.Event{Type: t, Object: o}:
				return nil
			case <-wctx.Done():
				return wctx.Err()
			}
		})
		if wctx.Err() != nil {
			err = nil // stopped or timed out: a normal end
		}
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
	}()
	return w, nil
}

// Bind implements client.Interface.
func (l *Local) Bind(ctx context.Context, b *api.Binding) error {
	_, err := l.r.Bind(ctx, b)
	return err
}

// GetScale implements client.Interface.
func (l *Local) GetScale(ctx context.Context, kind *api.Kind, namespace, name string) (*api.Scale, error) {
	return l.r.GetScale(ctx, kind, namespace, name)
}

// UpdateScale implements client.Interface.
func (l *Local) UpdateScale(ctx context.Context, kind *api.Kind, namespace, name string, s *api.Scale) (*api.Scale, error) {
	return l.r.UpdateScale(ctx, kind, namespace, name, s)
}

// AddTrace implements client.Interface.
func (l *Local) AddTrace(ctx context.Context, namespace, pod string, spans ...api.TraceSpan) error {
	_, err := l.r.AddTrace(ctx, namespace, pod, spans...)
	return err
}

// GetTrace implements client.Interface.
func (l *Local) GetTrace(ctx context.Context, namespace, pod string) (*api.PodTrace, error) {
	return l.r.GetTrace(ctx, namespace, pod)
}

// FinalizeNamespace removes a namespace's spec finalizers; the namespace
// controller calls it once a Terminating namespace is empty, and the
// namespace is then removed.
func (l *Local) FinalizeNamespace(ctx context.Context, name string) error {
	_, err := l.r.FinalizeNamespace(ctx, name, nil)
	return err
}

func kindOf(obj api.Object) (*api.Kind, error) {
	if obj == nil {
		return nil, api.NewBadRequest("no object given")
	}
	k, err := api.KindOf(obj)
	if err != nil {
		return nil, api.NewBadRequest(err.Error())
	}
	return k, nil
}

// localWatcher is a client.Watcher fed by a goroutine it owns.
type localWatcher struct {
	ch     chan client.Event
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	err    error
}

func (w *localWatcher) Events() <-chan client.Event { return w.ch }

// Stop ends the watch and waits for its goroutine. Safe twice.
func (w *localWatcher) Stop() {
	if w.cancel != nil {
		w.cancel()
	}
	<-w.done
}

func (w *localWatcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// The registry's rules on server-owned fields, exported for client/fake (the
// in-memory client.Interface of unit tests) so that it keeps exactly these
// rules instead of a copy of them; client/clienttest runs one suite against
// both. Each is what Registry does at the step named.

// PrepareForCreate resets on a new object what a client may not choose
// (status, except a Node's) and sets what every new object of its kind gets
// (a pod's Pending phase, a namespace's finalizer and Active phase).
func PrepareForCreate(k *api.Kind, obj api.Object) { prepareForCreate(k, obj) }

// CarryOver copies into an update, from the stored object, what the server
// assigned and a client may leave out: a namespace's spec finalizers, a
// bound pod's spec.nodeName, a service's cluster IPs and node ports.
func CarryOver(next, cur api.Object) { carryOver(next, cur) }

// SpecChanged reports a change outside metadata and status, which bumps
// metadata.generation.
func SpecChanged(a, b api.Object) bool { return specChanged(a, b) }

// SameObject reports that an update changes nothing (a no-op: no new
// resourceVersion, no watch event).
func SameObject(a, b api.Object) bool { return sameJSON(a, b) }

// CheckPrecondition fails with Conflict when uid or rv is set and is not the
// stored object's.
func CheckPrecondition(k *api.Kind, cur api.Object, uid, rv string) error {
	return checkPrecondition(k, cur, uid, rv)
}

// ScaleOf is the scale subresource of a deployment or replica set.
func ScaleOf(obj api.Object) *api.Scale { return scaleOf(obj) }

// SetPodCondition sets a condition of a pod, keeping its
// lastTransitionTime when its status does not change.
func SetPodCondition(pod *api.Pod, c api.PodCondition) { setPodCondition(pod, c) }

// GracePeriod is how long a delete of obj waits, in seconds; 0 means remove
// at once (when nothing else, such as a finalizer, holds it).
func GracePeriod(obj api.Object, opts api.DeleteOptions) int64 { return gracePeriod(obj, opts) }

// MarkDeleting is the registry's marking of an object being deleted with
// grace seconds from now (deletionTimestamp, deletionGracePeriodSeconds, a
// namespace Terminating), for client/fake.
func MarkDeleting(obj api.Object, grace int64, now time.Time) { markDeleting(obj, grace, now) }

// HasFinalizers reports metadata.finalizers, or a namespace's spec finalizers.
func HasFinalizers(obj api.Object) bool { return hasFinalizers(obj) }

// IsProtectedNamespace reports a namespace that may not be deleted.
func IsProtectedNamespace(name string) bool { return slices.Contains(protectedNamespaces, name) }

// Forbidden is the 403 error the registry answers with, e.g. for a write in a
// terminating namespace.
func Forbidden(k *api.Kind, name, why string) *api.StatusError { return forbidden(k, name, why) }

// MethodNotAllowed is the error for a verb a kind does not support (writes of
// an internal kind such as PodTrace).
func MethodNotAllowed(verb string, k *api.Kind) *api.StatusError { return methodNotAllowed(verb, k) }

// NotFoundPath is the error for a subresource a kind does not have.
func NotFoundPath() *api.StatusError { return notFoundPath() }

// ValidateTraceSpans is the registry's check of spans posted to a pod's
// trace, for client/fake.
func ValidateTraceSpans(pod string, spans []api.TraceSpan) error {
	return validateTraceSpans(pod, spans)
}

// NewTrace is the PodTrace object of pod with spans (the newest
// api.MaxTraceSpans), as GetTrace returns it.
func NewTrace(pod *api.Pod, spans []api.TraceSpan) *api.PodTrace {
	return withTypeMeta(traceKind, newTrace(pod, spans)).(*api.PodTrace)
}
