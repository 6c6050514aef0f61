package store

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"skiff.dev/skiff/api"
)

// Watch hub
//
// The committer publishes each committed batch to the hub, in revision
// order. The hub appends the events to a ring (the history) and offers each
// one to every matching watcher without ever blocking: a watcher whose
// buffer is full is closed and must resume from the last revision it saw.
// Revisions are contiguous (every write is one revision and every write is
// published), so the ring holds exactly the revisions (start, end].
//
// A live event carries the object as committed: a deep copy the writer
// made in its own goroutine when a watcher of its kind was open
// (Bolt.liveCopy; about a seventh of a decode's cost for a pod), shared
// by every watcher of that event (watchers never modify what they
// receive): N in-process informers of one kind then hold one copy of each
// object instead of N (docs/performance.md, "Memory at scale"). It equals
// the decode of the stored JSON for what a write starts from, a request
// or a read (TestLiveWatchersGetTheCommittedObject); a field set in memory
// keeps what JSON would drop (a time's sub-second part where JSON has
// seconds, an empty map where JSON has none), as Kubernetes' controllers'
// own objects do before a write. Every client of the API gets the same
// JSON either way. A delete's event, and any event without a copy, is
// decoded from its JSON once, by the first watcher that gets to it, in
// the watchers' goroutines, never the committer's. The history keeps only
// the JSON, compressed (about 0.16 of its size for a pod), so it never
// pins objects; a replay decompresses and decodes its own.

// hubEvent is one committed change, as kept in the history.
type hubEvent struct {
	typ       api.WatchEventType
	bucket    string // the kind's bucket name
	namespace string
	rev       int64
	raw       []byte // the object's JSON at rev; never modified; nil in the history when z is set
	z         []byte // raw, compressed as bbolt stores it (value.go), which the history keeps; nil: not compressed
	// obj, when set, is the object as committed at rev, a private copy
	// the writer made (op.live): live watchers share it instead of
	// decoding raw. nil in the history.
	obj api.Object
	// live is the decoded object shared by every watcher this event was
	// offered to live, when obj is nil; nil in the history (replays
	// decode their own).
	live *sharedObject
}

// liveEvent is a published event as the watchers' channels carry it: one
// allocation per event, shared by every watcher it is offered to, so a
// watcher's buffer of WatchBuffer slots holds pointers (8 bytes each), not
// copies of the event (88 bytes; 43 watchers × 1,000 slots held 3.8 MB).
type liveEvent struct {
	hubEvent
	shared sharedObject
}

// sharedObject decodes an event's JSON once, for all its live watchers.
type sharedObject struct {
	once sync.Once
	obj  api.Object
	err  error
}

// object returns e's object for kind: the writer's copy (obj) when the
// event has one, else its decode: once per live event, every time for a
// replayed one.
func (e *hubEvent) object(kind *api.Kind) (api.Object, error) {
	if e.live == nil {
		raw := e.raw
		if raw == nil && e.z != nil {
			var err error
			if raw, _, err = unpackValue(e.z); err != nil {
				return nil, api.NewInternal(fmt.Errorf("decompress watch history of %s at %d: %w", kind.GroupResource(), e.rev, err))
			}
		}
		return decode(kind, raw)
	}
	if e.obj != nil {
		return e.obj, nil
	}
	e.live.once.Do(func() { e.live.obj, e.live.err = decode(kind, e.raw) })
	return e.live.obj, e.live.err
}

// hub holds the watch history and the open watchers.
type hub struct {
	bufSize int

	mu sync.Mutex
	// ring holds the history: n events, the oldest at ring[head].
	ring    []hubEvent
	head, n int
	// start is the newest revision not in the history: the history holds
	// (start, end]. A watch from rev < start has missed events: Gone.
	start, end int64
	watchers   map[*watcher]struct{}
	// watched counts the open watchers of each bucket, replaced whole
	// under mu: writers read it without the lock to know whether anyone
	// will take what they write live (Bolt.liveCopy).
	watched atomic.Pointer[map[string]int]
	// advanced, when not nil, is closed by the next publish (and by close):
	// waitFor's condition variable. Made only when someone waits.
	advanced chan struct{}
	closed   bool
	slow     uint64
	wg       sync.WaitGroup
}

// watcher is one open watch.
type watcher struct {
	bucket, namespace string
	in                chan *hubEvent // live events; closed by the hub
	inClosed          bool           // guarded by hub.mu
}

func newHub(size, buf int, rev int64) *hub {
	return &hub{
		bufSize:  buf,
		ring:     make([]hubEvent, size),
		start:    rev,
		end:      rev,
		watchers: make(map[*watcher]struct{}),
	}
}

func (w *watcher) matches(e *hubEvent) bool { return e.in(w.bucket, w.namespace) }

// in reports whether e is a change of bucket in namespace ("" any).
func (e *hubEvent) in(bucket, namespace string) bool {
	return e.bucket == bucket && (namespace == "" || e.namespace == namespace)
}

// publish appends committed events (in revision order) to the history and
// offers them to watchers. It never blocks.
func (h *hub) publish(events []hubEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.advanced != nil {
		close(h.advanced)
		h.advanced = nil
	}
	for i := range events {
		e := &events[i]
		if h.n == len(h.ring) {
			h.start = h.ring[h.head].rev
			h.ring[h.head] = hubEvent{}
			h.head = (h.head + 1) % len(h.ring)
			h.n--
		}
		hist := *e
		if hist.z != nil {
			hist.raw = nil // the history keeps the compressed copy only
		}
		hist.obj = nil
		h.ring[(h.head+h.n)%len(h.ring)] = hist
		h.n++
		h.end = e.rev
		var live *hubEvent // made for the first watcher that wants it
		for w := range h.watchers {
			if w.inClosed || !w.matches(e) {
				continue
			}
			if live == nil {
				le := &liveEvent{hubEvent: *e}
				le.z = nil // live watchers decode raw
				le.live = &le.shared
				live = &le.hubEvent
			}
			select {
			case w.in <- live:
			default:
				// Too slow: close rather than block the committer. The
				// watcher delivers what it has buffered, then its channel
				// closes and the client resumes from its last revision.
				w.inClosed = true
				close(w.in)
				h.slow++
			}
		}
	}
}

// register adds a watcher for events after rev (rev 0: from the newest
// revision) and returns the history it must replay first.
func (h *hub) register(w *watcher, rev int64) (replay []hubEvent, from int64, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, 0, ErrClosed
	}
	if rev == 0 {
		rev = h.end
	}
	if rev < h.start {
		return nil, 0, ErrWatchTooOld(rev, h.start)
	}
	for i := max(rev-h.start, 0); i < int64(h.n); i++ {
		e := &h.ring[(h.head+int(i))%len(h.ring)]
		if w.matches(e) {
			replay = append(replay, *e)
		}
	}
	w.in = make(chan *hubEvent, h.bufSize)
	h.watchers[w] = struct{}{}
	h.countWatchers(w.bucket, 1)
	h.wg.Add(1)
	return replay, rev, nil
}

// waitFor blocks until revision rev is published (the history and every
// watcher have it), ctx ends or the hub closes.
func (h *hub) waitFor(ctx context.Context, rev int64) error {
	for {
		h.mu.Lock()
		if h.end >= rev {
			h.mu.Unlock()
			return nil
		}
		if h.closed {
			h.mu.Unlock()
			return ErrClosed
		}
		if h.advanced == nil {
			h.advanced = make(chan struct{})
		}
		advanced := h.advanced
		h.mu.Unlock()
		select {
		case <-advanced:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// changed reports whether the history holds a change of bucket (in
// namespace, "" any) in the revisions (after, upTo]; known is false when
// the history does not cover them all.
func (h *hub) changed(bucket, namespace string, after, upTo int64) (changed, known bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if after < h.start || upTo > h.end {
		return false, false
	}
	// The ring holds revisions start+1..end in order: after+1 is at after-start.
	for i := after - h.start; i < int64(h.n); i++ {
		e := &h.ring[(h.head+int(i))%len(h.ring)]
		if e.rev > upTo {
			break
		}
		if e.in(bucket, namespace) {
			return true, true
		}
	}
	return false, true
}

// remove drops a watcher (its goroutine is ending).
func (h *hub) remove(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.watchers[w]; ok {
		h.countWatchers(w.bucket, -1)
	}
	delete(h.watchers, w)
	if !w.inClosed {
		w.inClosed = true
		close(w.in)
	}
}

// close ends every watcher and waits for their goroutines (which see the
// store's done channel and stop).
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	if h.advanced != nil {
		close(h.advanced)
		h.advanced = nil
	}
	for w := range h.watchers {
		if !w.inClosed {
			w.inClosed = true
			close(w.in)
		}
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// countWatchers adds d to bucket's count of open watchers (h.mu held).
func (h *hub) countWatchers(bucket string, d int) {
	next := map[string]int{}
	if cur := h.watched.Load(); cur != nil {
		maps.Copy(next, *cur)
	}
	if next[bucket] += d; next[bucket] <= 0 {
		delete(next, bucket)
	}
	h.watched.Store(&next)
}

// watching reports whether a watcher of bucket is open.
func (h *hub) watching(bucket string) bool {
	m := h.watched.Load()
	return m != nil && (*m)[bucket] > 0
}

func (h *hub) stats() (watchers int, slow uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watchers), h.slow
}

// Watch streams changes to kind (in namespace, or all when "") after rev; 0
// means from now. Event objects are shared between the watchers of a
// change (never modify them; api.Clone, then change the copy). The channel
// closes when ctx ends, when the store closes, or when the watcher falls
// more than WatchBuffer events behind; resume from the last revision seen.
// A rev newer than the current revision is accepted: events after it follow.
func (b *Bolt) Watch(ctx context.Context, kind *api.Kind, namespace string, rev int64) (<-chan Event, error) {
	if err := b.checkRead(ctx); err != nil {
		return nil, err
	}
	if rev < 0 {
		return nil, ErrBadWatchRevision(rev)
	}
	if !kind.Namespaced {
		namespace = ""
	}
	w := &watcher{bucket: kind.GroupResource(), namespace: namespace}
	replay, from, err := b.hub.register(w, rev)
	if err != nil {
		return nil, err
	}
	out := make(chan Event)
	go func() {
		defer b.hub.wg.Done()
		defer close(out)
		defer b.hub.remove(w)
		b.serveWatch(ctx, kind, w, replay, from, out)
	}()
	return out, nil
}

// serveWatch decodes and delivers a watcher's events: the replayed history,
// then live ones. It skips anything at or before the last revision sent, since
// a commit may be both in the replay and in flight to the hub.
func (b *Bolt) serveWatch(ctx context.Context, kind *api.Kind, w *watcher, replay []hubEvent, last int64, out chan<- Event) {
	send := func(e *hubEvent) bool {
		if e.rev <= last {
			return true
		}
		obj, err := e.object(kind)
		if err != nil {
			b.log.Error("watch: drop undecodable event", "kind", kind.GroupResource(), "revision", e.rev, "err", err)
			return false
		}
		select {
		case out <- Event{Type: e.typ, Object: obj, Revision: e.rev}:
			last = e.rev
			return true
		case <-ctx.Done():
			return false
		case <-b.done:
			return false
		}
	}
	for i := range replay {
		if !send(&replay[i]) {
			return
		}
	}
	for {
		select {
		case e, ok := <-w.in:
			if !ok {
				return
			}
			if !send(e) {
				return
			}
		case <-ctx.Done():
			return
		case <-b.done:
			return
		}
	}
}
