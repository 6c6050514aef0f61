package apiserver

import (
	"context"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/strategy"
	"skiff.dev/skiff/controlplane/store"
)

// watchStream is one watch: optional initial objects, then the store's
// changes filtered by the selectors.
//
// Selectors are applied to transitions as Kubernetes does: an object that
// stops matching is sent as DELETED, one that starts matching as ADDED.
// The store's events carry no previous state, so the stream remembers
// which keys it has seen match. A watch that began with a list (rev "" or
// "0") knows every key; one that resumes from a revision only knows what it
// has seen since, and misses "stopped matching" for objects it has not.
type watchStream struct {
	kind     *api.Kind
	ls       labels.Selector
	fs       fields.Selector
	initial  []api.Object
	events   <-chan store.Event
	known    map[string]bool // key → matched at its last event
	complete bool            // known covers every key (the watch began with a list)
}

// startWatch parses opts, lists first when the watch starts "now", and
// opens the store watch. It fails with Gone when the revision is older than
// the store's history, and with Timeout "Too large resource version" when
// the store does not reach it within the freshness timeout
// (resourceversion.go); a caller sends either as an ERROR event, as
// kube-apiserver does. The watch lives until ctx ends.
func (r *Registry) startWatch(ctx context.Context, k *api.Kind, namespace string, opts api.ListOptions) (*watchStream, error) {
	if err := checkListOptions(opts, true, "", nil); err != nil {
		return nil, err
	}
	ls, fs, err := strategy.ParseSelectors(k, opts)
	if err != nil {
		return nil, err
	}
	if !k.Namespaced {
		namespace = ""
	}
	w := &watchStream{kind: k, ls: ls, fs: fs, known: map[string]bool{}}
	var rev int64
	switch opts.ResourceVersion {
	case "", "0":
		// Like Kubernetes: the current objects first, as ADDED, then
		// changes after the list's revision. Nothing is lost in between
		// because the store's watch replays from its history.
		items, listRev, err := r.store.List(ctx, k, namespace)
		if err != nil {
			return nil, err
		}
		for _, o := range items {
			if api.Matches(o, ls, fs) {
				w.initial = append(w.initial, withTypeMeta(k, o))
				w.known[api.KeyOf(o)] = true
			}
		}
		w.complete = true
		rev = listRev
	default:
		if rev, err = parseResourceVersion("resourceVersion", opts.ResourceVersion); err != nil {
			return nil, err
		}
		if err := r.waitForRevision(ctx, rev); err != nil {
			return nil, err
		}
	}
	w.events, err = r.store.Watch(ctx, k, namespace, rev)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// streamedWatchError reports whether a startWatch error is answered as an
// ERROR event on an open stream (kube-apiserver's watch does so once the
// request is valid) rather than as the response's status.
func streamedWatchError(err error) bool {
	return api.IsGone(err) || api.IsTooLargeResourceVersion(err)
}

// run sends the initial objects and then each change until ctx ends, the
// store closes the stream, or send fails (whose error it returns).
func (w *watchStream) run(ctx context.Context, send func(api.WatchEventType, api.Object) error) error {
	for _, o := range w.initial {
		if err := send(api.Added, o); err != nil {
			return err
		}
	}
	w.initial = nil
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.events:
			if !ok {
				return nil
			}
			if typ, deliver := w.filter(ev); deliver {
				if err := send(typ, withTypeMeta(w.kind, ev.Object)); err != nil {
					return err
				}
			}
		}
	}
}

// filter decides whether a change is delivered, and as what.
func (w *watchStream) filter(ev store.Event) (api.WatchEventType, bool) {
	if (w.ls == nil || w.ls.Empty()) && (w.fs == nil || w.fs.Empty()) {
		return ev.Type, true
	}
	key := api.KeyOf(ev.Object)
	match := api.Matches(ev.Object, w.ls, w.fs)
	was, seen := w.known[key]
	if !seen && w.complete {
		seen = true // complete knowledge: not known means did not match
	}
	if ev.Type == api.Deleted {
		delete(w.known, key)
		return api.Deleted, match || was
	}
	w.known[key] = match
	switch {
	case match && seen && !was:
		return api.Added, true // started matching
	case match:
		return ev.Type, true
	case was:
		return api.Deleted, true // stopped matching
	default:
		return "", false
	}
}
