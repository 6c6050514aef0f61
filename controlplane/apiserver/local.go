package apiserver

import (
	"context"
	"net/http"
	"sync"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Local is client.Interface served in process by a Registry: the same
// admission, validation and watch semantics as HTTP, without the network.
// The controllers that run inside the server use it.
//
// A call whose ctx carries a user (WithUser: the web dashboard reading as
// its session's user) is authorized as that user first, exactly as the
// same request over HTTP (authz.go), and refused with the same 403. A
// call without one is the control plane's own and is not authorized.
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
	if err := l.authorize(ctx, "create", k, obj.GetObjectMeta().Namespace, "", ""); err != nil {
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
	m := obj.GetObjectMeta()
	if err := l.authorize(ctx, "update", k, m.Namespace, m.Name, ""); err != nil {
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
	m := obj.GetObjectMeta()
	if err := l.authorize(ctx, "update", k, m.Namespace, m.Name, "status"); err != nil {
		return nil, err
	}
	return l.r.UpdateStatus(ctx, k, obj)
}

// Delete implements client.Interface.
func (l *Local) Delete(ctx context.Context, kind *api.Kind, namespace, name string, opts api.DeleteOptions) error {
	if err := l.authorize(ctx, "delete", kind, namespace, name, ""); err != nil {
		return err
	}
	_, _, err := l.r.Delete(ctx, kind, namespace, name, opts)
	return err
}

// Get implements client.Interface.
func (l *Local) Get(ctx context.Context, kind *api.Kind, namespace, name string) (api.Object, error) {
	if err := l.authorize(ctx, "get", kind, namespace, name, ""); err != nil {
		return nil, err
	}
	return l.r.Get(ctx, kind, namespace, name)
}

// List implements client.Interface.
func (l *Local) List(ctx context.Context, kind *api.Kind, namespace string, opts api.ListOptions) ([]api.Object, string, error) {
	if err := l.authorize(ctx, "list", kind, namespace, "", ""); err != nil {
		return nil, "", err
	}
	return l.r.List(ctx, kind, namespace, opts)
}

// Watch implements client.Interface. As over HTTP, a watch from "" or "0"
// first delivers the current objects as Added; a resourceVersion older
// than the store's history gives a watcher that ends at once with a Gone
// Err (list again).
func (l *Local) Watch(ctx context.Context, kind *api.Kind, namespace string, opts api.ListOptions) (client.Watcher, error) {
	if err := l.authorize(ctx, "watch", kind, namespace, "", ""); err != nil {
		return nil, err
	}
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
	if err := l.authorize(ctx, "create", podKind, b.Namespace, b.Name, "binding"); err != nil {
		return err
	}
	return l.r.Bind(ctx, b)
}

// GetScale implements client.Interface.
func (l *Local) GetScale(ctx context.Context, kind *api.Kind, namespace, name string) (*api.Scale, error) {
	if err := l.authorize(ctx, "get", kind, namespace, name, "scale"); err != nil {
		return nil, err
	}
	return l.r.GetScale(ctx, kind, namespace, name)
}

// UpdateScale implements client.Interface.
func (l *Local) UpdateScale(ctx context.Context, kind *api.Kind, namespace, name string, s *api.Scale) (*api.Scale, error) {
	if err := l.authorize(ctx, "update", kind, namespace, name, "scale"); err != nil {
		return nil, err
	}
	return l.r.UpdateScale(ctx, kind, namespace, name, s)
}

// AddTrace implements client.Interface.
func (l *Local) AddTrace(ctx context.Context, namespace, pod string, spans ...api.TraceSpan) error {
	if err := l.authorize(ctx, "create", podKind, namespace, pod, "trace"); err != nil {
		return err
	}
	_, err := l.r.AddTrace(ctx, namespace, pod, spans...)
	return err
}

// AddObjectTrace implements client.ObjectTracer: a pod's or an
// autoscaler's trace.
func (l *Local) AddObjectTrace(ctx context.Context, k *api.Kind, namespace, name string, spans ...api.TraceSpan) error {
	if err := l.authorize(ctx, "create", k, namespace, name, "trace"); err != nil {
		return err
	}
	_, err := l.r.AddObjectTrace(ctx, k, namespace, name, spans...)
	return err
}

// GetObjectTrace implements client.ObjectTracer.
func (l *Local) GetObjectTrace(ctx context.Context, k *api.Kind, namespace, name string) (*api.PodTrace, error) {
	if err := l.authorize(ctx, "get", k, namespace, name, "trace"); err != nil {
		return nil, err
	}
	return l.r.GetObjectTrace(ctx, k, namespace, name)
}

// GetTrace implements client.Interface.
func (l *Local) GetTrace(ctx context.Context, namespace, pod string) (*api.PodTrace, error) {
	if err := l.authorize(ctx, "get", podKind, namespace, pod, "trace"); err != nil {
		return nil, err
	}
	return l.r.GetTrace(ctx, namespace, pod)
}

// FinalizeNamespace removes a namespace's spec finalizers; the namespace
// controller calls it once a Terminating namespace is empty, and the
// namespace is then removed.
func (l *Local) FinalizeNamespace(ctx context.Context, name string) error {
	if err := l.authorize(ctx, "update", namespaceKind, "", name, "finalize"); err != nil {
		return err
	}
	_, err := l.r.FinalizeNamespace(ctx, name, nil)
	return err
}

// authorize checks a call as ctx's user (none: the control plane's own
// call, allowed).
func (l *Local) authorize(ctx context.Context, verb string, k *api.Kind, namespace, name, sub string) error {
	u, ok := UserFrom(ctx)
	if !ok {
		return nil
	}
	s := l.r.authorizer.Load()
	if s == nil {
		return api.NewStatusError(http.StatusForbidden, api.ReasonForbidden, "forbidden: no authorizer serves this registry")
	}
	if k.Namespaced && namespace == "" && (verb == "create" || verb == "get" || verb == "update" || verb == "delete") {
		namespace = DefaultNamespace
	}
	a := attributes{user: u, verb: verb, resourceRequest: true, group: k.Group, version: k.Version, resource: k.Resource,
		sub: sub, namespace: scope(k, namespace), name: name}
	if k == namespaceKind {
		a.namespace = name
	}
	allowed, reason, err := s.authorize(ctx, a)
	if err != nil {
		return api.NewInternal(err)
	}
	if !allowed {
		return forbiddenError(a, reason)
	}
	return nil
}

// Can reports whether ctx's user may do verb on resource (group,
// subresource sub) in namespace ("" cluster-wide or all namespaces), as
// the dashboard asks before it shows a view; without a user, yes.
func (l *Local) Can(ctx context.Context, verb, group, resource, sub, namespace, name string) (bool, error) {
	u, ok := UserFrom(ctx)
	if !ok {
		return true, nil
	}
	s := l.r.authorizer.Load()
	if s == nil {
		return false, nil
	}
	ok, _, err := s.authorize(ctx, attributes{user: u, verb: verb, resourceRequest: true, group: group, resource: resource, sub: sub, namespace: namespace, name: name})
	return ok, err
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
