package client

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/backoff"
)

// An Informer keeps an in-memory copy of the objects of one kind (in one
// namespace or all, filtered by selectors) and tells handlers what changed.
// It is client-go's informer idea, small:
//
//  1. List, remember the list's resourceVersion, fill the cache.
//  2. Watch from that resourceVersion; apply each event to the cache, then
//     call the handlers.
//  3. When the watch ends, watch again from the last resourceVersion seen,
//     so nothing is missed.
//  4. When the server cannot resume from that resourceVersion, list again
//     and diff the new list against the cache: what is new is an add, what
//     changed is an update, what vanished is a delete. That is a 410 Gone
//     or Expired (its history no longer reaches back that far) or, as
//     client-go's reflector also treats it, a 504 Timeout "Too large
//     resource version" (the server is behind the version asked for: it
//     restarted from an older store, or it is another server).
//  5. On other errors, wait (exponential backoff, client/backoff) and try
//     again.
//
// Readers (Get, List, ListBy, ByIndex) see the cache, which may lag the
// server a little; a controller acts on it and the watch catches it up.
// Objects returned by an Informer are shared with the cache: never modify
// them (api.Clone, then change the copy).
type Informer struct {
	c         Interface
	kind      *api.Kind
	namespace string
	opts      api.ListOptions
	log       *slog.Logger

	backoff backoff.Policy

	started  atomic.Bool
	synced   chan struct{}
	syncOnce sync.Once

	// dispatch is held while a change is applied to the cache and handed
	// to the handlers, and while a handler is added or removed: a handler
	// added late sees each object exactly once, either in its replay or
	// as a change.
	dispatch sync.Mutex
	handlers []*registration

	mu       sync.RWMutex
	items    map[string]api.Object
	lastRV   string
	indexers map[string]IndexFunc
	indices  map[string]map[string]map[string]struct{} // index name → value → keys
}

// Handler receives the changes an Informer sees. Every func may be nil.
// They are called from the Informer's Run goroutine, one at a time and in
// the order of the changes, after the cache has been updated. They must be
// quick and only enqueue work (a Loop's Enqueue): a handler that blocks
// stalls the informer. Objects are shared: never modify them.
type Handler struct {
	OnAdd    func(obj api.Object)
	OnUpdate func(oldObj, newObj api.Object)
	// OnDelete gets the last state the informer knew; after a relist that
	// may be older than the object's final state.
	OnDelete func(obj api.Object)
}

// IndexFunc returns the index values of an object (e.g. a pod's
// spec.nodeName); none means the object is not in that index.
type IndexFunc func(obj api.Object) []string

// NewInformer returns an informer for kind in namespace ("" = all
// namespaces); opts.LabelSelector and opts.FieldSelector filter what it sees
// (opts.ResourceVersion is ignored: it always starts with a list). log may
// be nil.
func NewInformer(c Interface, kind *api.Kind, namespace string, opts api.ListOptions, log *slog.Logger) *Informer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts.ResourceVersion = ""
	return &Informer{
		c:         c,
		kind:      kind,
		namespace: namespace,
		opts:      opts,
		log:       log.With("informer", kind.Resource),
		backoff: backoff.Policy{
			Initial: 200 * time.Millisecond, // a restarting server is back within a second or two
			Max:     30 * time.Second,       // an absent server is not hammered
		},
		synced:   make(chan struct{}),
		items:    map[string]api.Object{},
		indexers: map[string]IndexFunc{},
		indices:  map[string]map[string]map[string]struct{}{},
	}
}

// Kind is the kind the informer watches.
func (i *Informer) Kind() *api.Kind { return i.kind }

// Registration is a handler added to an Informer, for RemoveHandler.
type Registration struct {
	reg *registration
}

type registration struct{ h Handler }

// AddHandler registers handlers, before or after Run (client-go's
// AddEventHandler): a handler added while the informer runs first gets
// OnAdd for every object already in the cache (in key order), then every
// later change, so it never misses or repeats one. That is how several
// components share one informer (InformerFactory) whenever each starts.
func (i *Informer) AddHandler(h Handler) Registration {
	i.dispatch.Lock()
	defer i.dispatch.Unlock()
	if h.OnAdd != nil {
		for _, o := range i.List() {
			h.OnAdd(o)
		}
	}
	r := &registration{h: h}
	i.handlers = append(i.handlers, r)
	return Registration{reg: r}
}

// RemoveHandler unregisters a handler AddHandler returned; once it
// returns, the handler is not called again. Removing one twice is a no-op.
func (i *Informer) RemoveHandler(r Registration) {
	i.dispatch.Lock()
	defer i.dispatch.Unlock()
	i.handlers = slices.DeleteFunc(i.handlers, func(x *registration) bool { return x == r.reg })
}

// AddIndex registers an index, e.g. pods by spec.nodeName, before or
// after Run (the objects already cached are indexed at once). Adding an
// index of a name that exists replaces it.
func (i *Informer) AddIndex(name string, f IndexFunc) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.indexers[name] = f
	idx := map[string]map[string]struct{}{}
	i.indices[name] = idx
	for k, o := range i.items {
		for _, v := range f(o) {
			if idx[v] == nil {
				idx[v] = map[string]struct{}{}
			}
			idx[v][k] = struct{}{}
		}
	}
}

// HasSynced reports whether the first list has filled the cache.
func (i *Informer) HasSynced() bool {
	select {
	case <-i.synced:
		return true
	default:
		return false
	}
}

// WaitForSync blocks until the first list has filled the cache (true) or
// ctx ends (false). Controllers wait for their informers before starting
// their loop, so they never act on an empty cache.
func (i *Informer) WaitForSync(ctx context.Context) bool {
	select {
	case <-i.synced:
		return true
	case <-ctx.Done():
		return false
	}
}

// LastSyncResourceVersion is the resourceVersion of the latest list or
// watch event applied to the cache.
func (i *Informer) LastSyncResourceVersion() string {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.lastRV
}

// Get returns the cached object, shared: never modify it.
func (i *Informer) Get(namespace, name string) (api.Object, bool) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	o, ok := i.items[api.Key(namespace, name)]
	return o, ok
}

// List returns every cached object sorted by key, shared: never modify them.
func (i *Informer) List() []api.Object {
	return i.ListBy(nil, "")
}

// ListBy returns the cached objects in namespace ("" = all) whose labels
// match selector (nil = all), sorted by key, shared: never modify them.
// With IndexLabels, a selector that requires a label value (app=web, or
// app in (web)) in one namespace looks only at the objects carrying the
// rarest such value; otherwise every object is looked at.
func (i *Informer) ListBy(selector labels.Selector, namespace string) []api.Object {
	i.mu.RLock()
	defer i.mu.RUnlock()
	if selector != nil && selector.Empty() {
		selector = nil
	}
	var keys []string
	if set, ok := i.labelCandidatesLocked(selector, namespace); ok {
		keys = make([]string, 0, len(set))
		for k := range set {
			if selector.Matches(labels.Set(i.items[k].GetObjectMeta().Labels)) {
				keys = append(keys, k)
			}
		}
	} else {
		keys = make([]string, 0, len(i.items))
		for k, o := range i.items {
			m := o.GetObjectMeta()
			if namespace != "" && m.Namespace != namespace {
				continue
			}
			if selector != nil && !selector.Matches(labels.Set(m.Labels)) {
				continue
			}
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]api.Object, len(keys))
	for n, k := range keys {
		out[n] = i.items[k]
	}
	return out
}

// labelIndex is IndexLabels' index: an object's namespace, label key and
// value, NUL-separated (neither a namespace nor a label key holds a NUL).
const labelIndex = "skiff.dev/labels"

func labelIndexValue(namespace, key, value string) string {
	return namespace + "\x00" + key + "\x00" + value
}

func labelIndexValues(o api.Object) []string {
	m := o.GetObjectMeta()
	out := make([]string, 0, len(m.Labels))
	for k, v := range m.Labels {
		out = append(out, labelIndexValue(m.Namespace, k, v))
	}
	return out
}

// IndexLabels indexes the cached objects by namespace and label, for
// ListBy (a Service's endpoints controllers list its pods at every sync:
// without the index a scan of every pod in the namespace). The index
// costs an entry per label of each object. Adding it twice is a no-op.
func (i *Informer) IndexLabels() {
	if !i.HasIndex(labelIndex) {
		i.AddIndex(labelIndex, labelIndexValues)
	}
}

// labelCandidatesLocked returns the keys of the objects in namespace that
// carry the rarest label value selector requires, when the labels are
// indexed and selector requires one; i.mu is held.
func (i *Informer) labelCandidatesLocked(selector labels.Selector, namespace string) (map[string]struct{}, bool) {
	idx, ok := i.indices[labelIndex]
	if !ok || selector == nil || namespace == "" {
		return nil, false
	}
	reqs, _ := selector.Requirements()
	var best map[string]struct{}
	found := false
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
		default:
			continue
		}
		vals := r.Values()
		if vals.Len() != 1 {
			continue
		}
		set := idx[labelIndexValue(namespace, r.Key(), vals.UnsortedList()[0])]
		if !found || len(set) < len(best) {
			best, found = set, true
		}
	}
	return best, found
}

// Keys returns the keys of every cached object, sorted; handy as a Loop's
// resync func.
func (i *Informer) Keys() []string {
	i.mu.RLock()
	defer i.mu.RUnlock()
	keys := make([]string, 0, len(i.items))
	for k := range i.items {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// HasIndex reports whether an index of that name was added (AddIndex).
func (i *Informer) HasIndex(name string) bool {
	i.mu.RLock()
	defer i.mu.RUnlock()
	_, ok := i.indexers[name]
	return ok
}

// ByIndex returns the cached objects whose index name has value, sorted by
// key, shared: never modify them. An unknown index returns nil.
func (i *Informer) ByIndex(name, value string) []api.Object {
	i.mu.RLock()
	defer i.mu.RUnlock()
	set := i.indices[name][value]
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]api.Object, len(keys))
	for n, k := range keys {
		out[n] = i.items[k]
	}
	return out
}

// Run fills and maintains the cache until ctx ends. Run once.
func (i *Informer) Run(ctx context.Context) {
	if i.started.Swap(true) {
		panic("client: Informer.Run called twice")
	}
	b := &backoff.Backoff{Policy: i.backoff}
	needList := true
	for ctx.Err() == nil {
		listed := needList
		if needList {
			if err := i.relist(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				d := b.Next()
				i.log.Warn("list failed", "err", err, "retryIn", d)
				if !b.Sleep(ctx, d) {
					return
				}
				continue
			}
			needList = false
		}
		gotEvents, err := i.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		if gotEvents {
			b.Reset() // a healthy stream: the server is fine
		}
		switch {
		case mustRelist(err):
			needList = true
			if listed && !gotEvents {
				// Even a fresh list did not give a version the server
				// can watch from: do not spin list against watch.
				d := b.Next()
				i.log.Warn("watch cannot resume from a fresh list", "err", err, "resourceVersion", i.LastSyncResourceVersion(), "retryIn", d)
				if !b.Sleep(ctx, d) {
					return
				}
				continue
			}
			i.log.Info("watch cannot resume, listing again", "reason", api.ReasonOf(err), "resourceVersion", i.LastSyncResourceVersion())
		case err != nil:
			d := b.Next()
			i.log.Warn("watch failed", "err", err, "retryIn", d)
			if !b.Sleep(ctx, d) {
				return
			}
		case gotEvents:
			// A healthy stream that ended (server timeout): resume at once.
		default:
			// Ended without a single event: do not spin against a server
			// that closes streams at once.
			if !b.Wait(ctx) {
				return
			}
		}
	}
}

// mustRelist reports a watch error that resuming from the same
// resourceVersion cannot get past, so only a new list can: 410 Gone or
// Expired (the history was compacted), or 504 Timeout with cause
// ResourceVersionTooLarge (the server has not reached that version), as
// client-go's reflector treats them.
func mustRelist(err error) bool {
	return api.IsGone(err) || api.IsTooLargeResourceVersion(err)
}

// relist lists and replaces the cache, emitting the differences.
func (i *Informer) relist(ctx context.Context) error {
	objs, rv, err := i.c.List(ctx, i.kind, i.namespace, i.opts)
	if err != nil {
		return err
	}
	i.dispatch.Lock()
	defer i.dispatch.Unlock()
	type change struct {
		old, cur api.Object
	}
	var changes []change
	i.mu.Lock()
	seen := make(map[string]struct{}, len(objs))
	for _, o := range objs {
		k := api.KeyOf(o)
		seen[k] = struct{}{}
		old, ok := i.items[k]
		if ok && old.GetObjectMeta().ResourceVersion == o.GetObjectMeta().ResourceVersion {
			continue
		}
		i.setLocked(k, o, old)
		changes = append(changes, change{old: old, cur: o})
	}
	for k, old := range i.items {
		if _, ok := seen[k]; !ok {
			i.deleteLocked(k, old)
			changes = append(changes, change{old: old})
		}
	}
	i.lastRV = rv
	i.mu.Unlock()

	for _, c := range changes {
		switch {
		case c.old == nil:
			i.notifyAdd(c.cur)
		case c.cur == nil:
			i.notifyDelete(c.old)
		default:
			i.notifyUpdate(c.old, c.cur)
		}
	}
	i.syncOnce.Do(func() { close(i.synced) })
	return nil
}

// watch follows one watch stream from the last resourceVersion. It returns
// whether any event arrived and why the stream ended.
func (i *Informer) watch(ctx context.Context) (bool, error) {
	opts := i.opts
	opts.ResourceVersion = i.LastSyncResourceVersion()
	w, err := i.c.Watch(ctx, i.kind, i.namespace, opts)
	if err != nil {
		return false, err
	}
	defer w.Stop()
	got := false
	for ev := range w.Events() {
		got = true
		i.apply(ev)
	}
	return got, w.Err()
}

// apply puts one watch event into the cache and tells the handlers.
func (i *Informer) apply(ev Event) {
	if ev.Object == nil {
		return
	}
	k := api.KeyOf(ev.Object)
	rv := ev.Object.GetObjectMeta().ResourceVersion
	i.dispatch.Lock()
	defer i.dispatch.Unlock()
	i.mu.Lock()
	if rv != "" {
		i.lastRV = rv
	}
	if ev.Type == api.Bookmark {
		i.mu.Unlock()
		return
	}
	old, existed := i.items[k]
	if ev.Type == api.Deleted {
		if existed {
			i.deleteLocked(k, old)
		}
		i.mu.Unlock()
		if existed {
			i.notifyDelete(ev.Object)
		}
		return
	}
	i.setLocked(k, ev.Object, old)
	i.mu.Unlock()
	if existed {
		i.notifyUpdate(old, ev.Object)
	} else {
		i.notifyAdd(ev.Object)
	}
}

// setLocked stores o under k and updates the indices; i.mu is held.
func (i *Informer) setLocked(k string, o, old api.Object) {
	if old != nil {
		i.unindexLocked(k, old)
	}
	i.items[k] = o
	for name, f := range i.indexers {
		idx := i.indices[name]
		for _, v := range f(o) {
			set := idx[v]
			if set == nil {
				set = map[string]struct{}{}
				idx[v] = set
			}
			set[k] = struct{}{}
		}
	}
}

func (i *Informer) deleteLocked(k string, old api.Object) {
	i.unindexLocked(k, old)
	delete(i.items, k)
}

func (i *Informer) unindexLocked(k string, old api.Object) {
	for name, f := range i.indexers {
		idx := i.indices[name]
		for _, v := range f(old) {
			delete(idx[v], k)
			if len(idx[v]) == 0 {
				delete(idx, v)
			}
		}
	}
}

// notify* run with i.dispatch held.

func (i *Informer) notifyAdd(o api.Object) {
	for _, r := range i.handlers {
		if r.h.OnAdd != nil {
			r.h.OnAdd(o)
		}
	}
}

func (i *Informer) notifyUpdate(old, cur api.Object) {
	for _, r := range i.handlers {
		if r.h.OnUpdate != nil {
			r.h.OnUpdate(old, cur)
		}
	}
}

func (i *Informer) notifyDelete(o api.Object) {
	for _, r := range i.handlers {
		if r.h.OnDelete != nil {
			r.h.OnDelete(o)
		}
	}
}
