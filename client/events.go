package client

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"time"

	"skiff.dev/skiff/api"
)

// A Recorder writes Events about objects, as Kubernetes' event recorder:
// "Scheduled", "FailedScheduling", "ScalingReplicaSet", "Pulled"...
//
// # Deduplication
//
// An event that repeats (same involved object kind/namespace/name/uid, type,
// reason, message and source) does not create a new Event: the existing one
// gets count+1 and a new lastTimestamp, so `skiff describe` shows
// "x5 over 2m". The recorder remembers recent events in a small LRU, as
// Kubernetes' eventLogger: for each event key, the name, resourceVersion,
// count and first timestamp of the Event it stored, not the Event (about
// 100 bytes against 1.5 KB, for 4,096 keys per recorder). A repeat is
// that Event again, rebuilt from the event and what the LRU keeps; the
// server keeps its uid and creationTimestamp. On a conflict it refetches
// the Event and bumps that; when the Event is gone (expired, deleted) it
// creates a new one.
//
// Before that, as client-go's EventCorrelator, a recorder combines similar
// events (the same but for the message) into one and drops spam
// (eventcorrelate.go), unless it was made WithoutCorrelation.
//
// # Never blocking the caller
//
// Event and Eventf only put the event in a bounded buffer and return; a full
// buffer drops the event with a log line (events are best-effort, as in
// Kubernetes). Run writes them with recorderWriters goroutines, so that
// many writes are in flight at once and the store's group commit takes
// them together: one writer waits for one durable commit per event, a few
// milliseconds, which would cap a busy scheduler at a few hundred events a
// second and drop the rest. Events with the same key (the deduplication
// key) are never written at the same time, so a repeat bumps the stored
// Event rather than racing it with a second create. Flush writes what is
// buffered in the caller's goroutine, for tests and for shutdown.
//
// Event names are "<object name>.<hex timestamp>", in the object's namespace;
// events about cluster-scoped objects (nodes, namespaces) go to "default".
type Recorder struct {
	c      Interface
	source api.EventSource
	log    *slog.Logger
	now    func() time.Time
	ch     chan *eventRequest

	// cacheMu guards cache.
	cacheMu sync.Mutex
	cache   *eventCache

	// corr combines similar events and drops spam (eventcorrelate.go);
	// nil: WithoutCorrelation.
	corr *correlator

	// keyMu and keyCond guard writing: the keys of the events being
	// written now (Run's writers and Flush), one write per key at a time.
	keyMu   sync.Mutex
	keyCond *sync.Cond
	writing map[eventKey]bool

	// stateMu and cond track events accepted but not yet written, for Flush.
	stateMu sync.Mutex
	cond    *sync.Cond
	pending int
}

// recorderBuffer is how many events may wait to be written: enough for a
// burst (a 100-replica scale-up), small enough to bound memory. The buffer
// holds pointers, so that it costs 8 KB until events wait in it: a control
// plane runs fourteen recorders, and 1,024 requests held by value (200
// bytes each) made 2.9 MB of its live heap, resident and scanned at every
// collection.
const recorderBuffer = 1024

// recorderWriters is how many events Run writes at once.
const recorderWriters = 16

// recorderCacheSize is how many distinct recent events are remembered for
// deduplication, as Kubernetes' default (4096).
const recorderCacheSize = 4096

type eventRequest struct {
	ref       api.ObjectReference
	namespace string
	eventType string
	reason    string
	message   string
	at        time.Time
	// combined: the combined event of similar ones (eventcorrelate.go),
	// deduplicated without its message, which is the latest one's.
	combined bool
}

// NewRecorder returns a recorder whose events name component (and host, the
// node, when it matters) as their source. log may be nil. Nothing is
// written until Run or Flush. It combines similar events and drops spam as
// Kubernetes' controllers and kubelet do (eventcorrelate.go).
func NewRecorder(c Interface, component, host string, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Recorder{
		c:       c,
		source:  api.EventSource{Component: component, Host: host},
		log:     log.With("recorder", component),
		now:     time.Now,
		ch:      make(chan *eventRequest, recorderBuffer),
		cache:   newEventCache(recorderCacheSize),
		corr:    newCorrelator(),
		writing: map[eventKey]bool{},
	}
	r.cond = sync.NewCond(&r.stateMu)
	r.keyCond = sync.NewCond(&r.keyMu)
	return r
}

// WithoutCorrelation makes r record every event, deduplicated only, as
// the events.k8s.io library kube-scheduler records through: nothing
// combined, nothing dropped as spam. Call it before the first event.
func (r *Recorder) WithoutCorrelation() *Recorder {
	r.corr = nil
	return r
}

// Event records that something happened to obj. eventType is api.EventNormal
// or api.EventWarning; reason is short CamelCase ("FailedScheduling");
// message is one human sentence. It never blocks: the write happens later
// in Run (or Flush), under that call's context; ctx only stops a caller
// whose own context has already ended from recording.
func (r *Recorder) Event(ctx context.Context, obj api.Object, eventType, reason, message string) {
	if ctx.Err() != nil {
		return
	}
	if eventType != api.EventNormal && eventType != api.EventWarning {
		r.log.Error("event dropped: type must be Normal or Warning", "type", eventType, "reason", reason)
		return
	}
	ref, ns := referenceTo(obj)
	req := eventRequest{ref: ref, namespace: ns, eventType: eventType, reason: reason, message: message, at: r.now()}
	if r.corr != nil && !r.corr.correlate(r.source.Component, r.source.Host, &req) {
		r.log.Debug("event dropped as spam", "object", ref.Kind+"/"+api.Key(ref.Namespace, ref.Name), "reason", reason, "message", message)
		return
	}
	r.log.Debug("event", "object", ref.Kind+"/"+api.Key(ref.Namespace, ref.Name), "type", eventType, "reason", reason, "message", req.message)

	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	select {
	case r.ch <- &req:
		r.pending++
		r.cond.Broadcast()
	default:
		r.log.Warn("event dropped: buffer full", "object", ref.Kind+"/"+api.Key(ref.Namespace, ref.Name), "reason", reason)
	}
}

// Eventf is Event with a format.
func (r *Recorder) Eventf(ctx context.Context, obj api.Object, eventType, reason, format string, args ...any) {
	r.Event(ctx, obj, eventType, reason, fmt.Sprintf(format, args...))
}

// Run writes events until ctx ends, then makes a last short attempt (at
// most two seconds) to write what is still buffered. It blocks; run it in
// the component's errgroup. Run at most once at a time.
func (r *Recorder) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range recorderWriters {
		wg.Go(func() {
			for {
				select {
				case req := <-r.ch:
					r.write(ctx, *req)
				case <-ctx.Done():
					return
				}
			}
		})
	}
	wg.Wait()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = r.Flush(fctx)
	return nil
}

// Flush writes every buffered event in the caller's goroutine and waits for
// the writes in flight in Run to finish. Unit tests call it instead of Run to
// make recording synchronous.
func (r *Recorder) Flush(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		r.stateMu.Lock()
		defer r.stateMu.Unlock()
		r.cond.Broadcast()
	})
	defer stop()
	for {
		r.drain(ctx)
		r.stateMu.Lock()
		if r.pending == 0 || ctx.Err() != nil {
			r.stateMu.Unlock()
			return ctx.Err()
		}
		if len(r.ch) == 0 {
			r.cond.Wait() // a write in flight in Run, or a new event
		}
		r.stateMu.Unlock()
	}
}

// drain writes what is buffered now.
func (r *Recorder) drain(ctx context.Context) {
	for {
		select {
		case req := <-r.ch:
			r.write(ctx, *req)
		default:
			return
		}
	}
}

// write stores one event: a bump of a known one, or a new one.
func (r *Recorder) write(ctx context.Context, req eventRequest) {
	defer func() {
		r.stateMu.Lock()
		r.pending--
		r.cond.Broadcast()
		r.stateMu.Unlock()
	}()
	key := r.dedupKey(req)
	defer r.lockKey(key)()

	if prev, ok := r.cached(key); ok {
		ev, err := r.bump(ctx, prev, req)
		if err == nil {
			r.remember(key, ev)
			return
		}
		if !api.IsNotFound(err) {
			r.log.Warn("event not recorded", "reason", req.reason, "object", req.ref.Name, "err", err)
			return
		}
		r.forget(key)
	}
	ev, err := r.create(ctx, req)
	if err != nil {
		r.log.Warn("event not recorded", "reason", req.reason, "object", req.ref.Name, "err", err)
		return
	}
	r.remember(key, ev)
}

// lockKey waits until no other write of key is in flight, marks it in
// flight and returns the function that ends that.
func (r *Recorder) lockKey(key eventKey) (unlock func()) {
	r.keyMu.Lock()
	for r.writing[key] {
		r.keyCond.Wait()
	}
	r.writing[key] = true
	r.keyMu.Unlock()
	return func() {
		r.keyMu.Lock()
		delete(r.writing, key)
		r.keyCond.Broadcast()
		r.keyMu.Unlock()
	}
}

func (r *Recorder) cached(key eventKey) (eventLog, bool) {
	r.cacheMu.Lock()
	defer r.cacheMu.Unlock()
	return r.cache.get(key)
}

// remember notes ev, the Event as stored, under key.
func (r *Recorder) remember(key eventKey, ev *api.Event) {
	r.cacheMu.Lock()
	defer r.cacheMu.Unlock()
	r.cache.add(key, eventLog{
		name: ev.Name, resourceVersion: ev.ResourceVersion, involvedRV: ev.InvolvedObject.ResourceVersion,
		count: ev.Count, first: ev.FirstTimestamp,
	})
}

func (r *Recorder) forget(key eventKey) {
	r.cacheMu.Lock()
	defer r.cacheMu.Unlock()
	r.cache.remove(key)
}

// bump updates the stored event prev notes with count+1; on a conflict it
// refetches the event and tries once more.
func (r *Recorder) bump(ctx context.Context, prev eventLog, req eventRequest) (*api.Event, error) {
	ev := r.newEvent(req)
	ev.Name, ev.ResourceVersion = prev.name, prev.resourceVersion
	ev.InvolvedObject.ResourceVersion = prev.involvedRV // the object as its first event saw it
	ev.Count, ev.FirstTimestamp = prev.count, prev.first
	for attempt := 0; ; attempt++ {
		ev.Count++
		ev.LastTimestamp = api.NewTime(req.at.Truncate(time.Second))
		ev.EventTime = api.MicroTime{Time: req.at.UTC()}
		out, err := Update(ctx, r.c, ev)
		if err == nil {
			return out, nil
		}
		if !api.IsConflict(err) || attempt > 0 {
			return nil, fmt.Errorf("update event %s/%s: %w", ev.Namespace, ev.Name, err)
		}
		ev, err = Get[*api.Event](ctx, r.c, req.namespace, prev.name)
		if err != nil {
			return nil, fmt.Errorf("refetch event %s/%s: %w", req.namespace, prev.name, err)
		}
	}
}

// newEvent is the first occurrence of req as an Event, without its name.
func (r *Recorder) newEvent(req eventRequest) *api.Event {
	t := api.NewTime(req.at.Truncate(time.Second))
	return &api.Event{
		ObjectMeta:          api.ObjectMeta{Namespace: req.namespace},
		InvolvedObject:      req.ref,
		Reason:              req.reason,
		Message:             req.message,
		Source:              r.source,
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		Type:                req.eventType,
		EventTime:           api.MicroTime{Time: req.at.UTC()},
		ReportingController: r.source.Component,
		ReportingInstance:   r.source.Host,
	}
}

// create stores a new event; a name collision gets a new name once.
func (r *Recorder) create(ctx context.Context, req eventRequest) (*api.Event, error) {
	ev := r.newEvent(req)
	for attempt := int64(0); ; attempt++ {
		ev.Name = eventName(req.ref.Name, req.at.UnixNano()+attempt)
		out, err := Create(ctx, r.c, ev)
		if err == nil {
			return out, nil
		}
		if !api.IsAlreadyExists(err) || attempt > 0 {
			return nil, fmt.Errorf("create event %s/%s: %w", ev.Namespace, ev.Name, err)
		}
	}
}

// eventName is "<object name>.<hex>", kept within the 253 characters of a
// DNS subdomain.
func eventName(objName string, unique int64) string {
	suffix := fmt.Sprintf(".%x", unique)
	if max := 253 - len(suffix); len(objName) > max {
		objName = objName[:max]
	}
	return objName + suffix
}

// eventKey identifies "the same event" as Kubernetes' getEventKey does,
// by a 128-bit hash of its fields rather than their concatenation (some
// 200 bytes with the message, kept for each of 4,096 events).
type eventKey [2]uint64

// eventKeySeeds are this process's seeds of eventKey's two halves.
var eventKeySeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// dedupKey is req's eventKey: its source, involved object (kind,
// namespace, name, uid, apiVersion), type, reason and message; a combined
// event's without the message, as client-go keys it by its group of
// similar events.
func (r *Recorder) dedupKey(req eventRequest) eventKey {
	message := req.message
	if req.combined {
		message = combinedPrefix
	}
	var k eventKey
	for i, seed := range eventKeySeeds {
		var h maphash.Hash
		h.SetSeed(seed)
		for _, f := range [...]string{r.source.Component, r.source.Host, req.ref.Kind, req.ref.Namespace, req.ref.Name,
			req.ref.UID, req.ref.APIVersion, req.eventType, req.reason, message} {
			h.WriteString(f)
			h.WriteByte(0)
		}
		if req.combined {
			h.WriteByte(1) // not the key of an event whose message is the prefix
		}
		k[i] = h.Sum64()
	}
	return k
}

// referenceTo builds the involvedObject of an event and the namespace the
// event lives in.
func referenceTo(obj api.Object) (api.ObjectReference, string) {
	tm, m := obj.GetTypeMeta(), obj.GetObjectMeta()
	ref := api.ObjectReference{
		Kind: tm.Kind, APIVersion: tm.APIVersion,
		Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
	}
	namespaced := m.Namespace != ""
	if k, err := api.KindOf(obj); err == nil {
		ref.Kind, ref.APIVersion = k.Kind, k.APIVersion()
		namespaced = k.Namespaced
	}
	ns := m.Namespace
	if !namespaced || ns == "" {
		ns = "default"
	}
	return ref, ns
}

// eventLog is what the recorder remembers of an Event it stored, as
// Kubernetes' eventLog: enough to write the next occurrence over it.
type eventLog struct {
	name, resourceVersion string
	involvedRV            string // the involvedObject's resourceVersion in the stored Event
	count                 int32
	first                 api.Time
}

// eventCache is a least-recently-used map from event key to what the
// recorder remembers of the stored Event. Its entries live in one slice,
// linked by index, most recent first: a recorder remembers 4,096 events,
// and with an element and an entry allocated for each as a burst of pods
// went by, the entries of three recorders lay scattered among the burst's
// garbage and kept its spans in use after it (docs/performance.md,
// nineteenth sitting).
type eventCache struct {
	size    int
	entries []cacheEntry       // at most size; an evicted entry's slot is the next one's
	items   map[eventKey]int32 // key → its entry's index
	// head and tail are the most and least recent entries' indices, free
	// the first slot an entry left (linked by next); -1: none.
	head, tail, free int32
}

type cacheEntry struct {
	key        eventKey
	log        eventLog
	prev, next int32 // the more and less recent entries' indices; -1: none
}

func newEventCache(size int) *eventCache {
	return &eventCache{size: size, items: map[eventKey]int32{}, head: -1, tail: -1, free: -1}
}

func (c *eventCache) get(key eventKey) (eventLog, bool) {
	i, ok := c.items[key]
	if !ok {
		return eventLog{}, false
	}
	c.unlink(i)
	c.pushFront(i)
	return c.entries[i].log, true
}

func (c *eventCache) add(key eventKey, l eventLog) {
	if i, ok := c.items[key]; ok {
		c.entries[i].log = l
		c.unlink(i)
		c.pushFront(i)
		return
	}
	var i int32
	switch {
	case c.free >= 0:
		i, c.free = c.free, c.entries[c.free].next
	case len(c.entries) < c.size:
		c.entries = append(c.entries, cacheEntry{})
		i = int32(len(c.entries) - 1)
	default: // full: the least recent entry's slot
		i = c.tail
		c.unlink(i)
		delete(c.items, c.entries[i].key)
	}
	c.entries[i] = cacheEntry{key: key, log: l}
	c.items[key] = i
	c.pushFront(i)
}

func (c *eventCache) remove(key eventKey) {
	i, ok := c.items[key]
	if !ok {
		return
	}
	c.unlink(i)
	delete(c.items, key)
	c.entries[i] = cacheEntry{prev: -1, next: c.free}
	c.free = i
}

// unlink takes entry i out of the recency list.
func (c *eventCache) unlink(i int32) {
	e := &c.entries[i]
	if e.prev >= 0 {
		c.entries[e.prev].next = e.next
	} else {
		c.head = e.next
	}
	if e.next >= 0 {
		c.entries[e.next].prev = e.prev
	} else {
		c.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

// pushFront makes entry i the most recent.
func (c *eventCache) pushFront(i int32) {
	e := &c.entries[i]
	e.prev, e.next = -1, c.head
	if c.head >= 0 {
		c.entries[c.head].prev = i
	} else {
		c.tail = i
	}
	c.head = i
}
