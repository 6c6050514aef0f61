package fake

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// watcher is one open watch. The fake appends events to an unbounded queue
// (a write never blocks on a slow reader); pump moves them to the channel.
type watcher struct {
	f    *Client
	kind *api.Kind
	ns   string
	ls   labels.Selector
	fs   fields.Selector

	ch       chan client.Event
	notify   chan struct{} // capacity 1: "queue changed"
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	mu    sync.Mutex
	queue []client.Event
	ended bool  // the "server" ended the stream; deliver the queue, then close
	err   error // why it ended
}

var _ client.Watcher = (*watcher)(nil)

func newWatcher(f *Client, k *api.Kind, ns string, ls labels.Selector, fs fields.Selector) *watcher {
	return &watcher{
		f: f, kind: k, ns: ns, ls: ls, fs: fs,
		ch:     make(chan client.Event),
		notify: make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
}

func (w *watcher) Events() <-chan client.Event { return w.ch }

func (w *watcher) Stop() {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
}

func (w *watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *watcher) matches(o api.Object) bool {
	if o == nil {
		return false
	}
	if w.ns != "" && o.GetObjectMeta().Namespace != w.ns {
		return false
	}
	return api.Matches(o, w.ls, w.fs)
}

// filter turns a change into the event this watcher sees, as the API
// server does for selectors: leaving the selection is a DELETED, entering
// it an ADDED.
func (w *watcher) filter(c change) (client.Event, bool) {
	if c.kind != w.kind {
		return client.Event{}, false
	}
	now, before := w.matches(c.obj), w.matches(c.old)
	var typ api.WatchEventType
	switch {
	case c.typ == api.Deleted:
		if !before && !now {
			return client.Event{}, false
		}
		typ = api.Deleted
	case now && before:
		typ = api.Modified
	case now:
		typ = api.Added
	case before:
		typ = api.Deleted
	default:
		return client.Event{}, false
	}
	return client.Event{Type: typ, Object: api.Clone(c.obj)}, true
}

func (w *watcher) push(ev client.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return
	}
	w.queue = append(w.queue, ev)
	w.wake()
}

// end finishes the stream after the queued events, with err (nil: normal end).
func (w *watcher) end(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return
	}
	w.ended = true
	w.err = err
	w.wake()
}

// wake signals pump; w.mu is held.
func (w *watcher) wake() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *watcher) pump(ctx context.Context) {
	defer close(w.done)
	defer close(w.ch)
	defer w.detach()
	for {
		w.mu.Lock()
		if len(w.queue) > 0 {
			ev := w.queue[0]
			w.queue[0] = client.Event{}
			w.queue = w.queue[1:]
			w.mu.Unlock()
			select {
			case w.ch <- ev:
				continue
			case <-w.stop:
				w.clearErr()
				return
			case <-ctx.Done():
				w.clearErr()
				return
			}
		}
		if w.ended {
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		select {
		case <-w.notify:
		case <-w.stop:
			w.clearErr()
			return
		case <-ctx.Done():
			w.clearErr()
			return
		}
	}
}

// clearErr: a watch stopped by its user or its ctx ends without error.
func (w *watcher) clearErr() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	w.err = nil
}

func (w *watcher) detach() {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	delete(w.f.watchers, w)
}
