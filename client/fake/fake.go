// Package fake is an in-memory client.Interface for unit tests of
// controllers, the scheduler, the agent and the CLI: no server, no network,
// no sleeps.
//
// It keeps the API server's rules by calling them: the registry's rules on
// a write are package api/strategy's (PrepareForCreate, PrepareForUpdate,
// CheckPrecondition, GracePeriod, ValidateBinding, Bind, ParseSelectors,
// ...), which the registry calls too, and client/clienttest runs one suite
// against this fake and against the API server's Local over a real store.
// So, as on the server:
//
//   - one revision counter: every write gets the next resourceVersion;
//   - optimistic concurrency: an Update, UpdateStatus, UpdateScale or Delete
//     precondition carrying a stale resourceVersion (or another uid) fails
//     with Conflict (an empty resourceVersion writes unconditionally);
//   - Create sets uid, creationTimestamp, generation 1, a name from
//     generateName (deterministic here, so tests can predict it) and the
//     "default" namespace; it resets the status (but a Node's), refuses a
//     set resourceVersion, and fails with AlreadyExists on a taken name;
//   - Update keeps server-owned metadata, the status (status subresource)
//     and what the server assigned: a bound pod's nodeName, a service's
//     cluster IPs and node ports, a namespace's finalizers; UpdateStatus
//     keeps everything but the status; generation bumps when anything
//     outside metadata and status changes; an update that changes nothing is
//     a no-op (no new resourceVersion, no event);
//   - api.SetDefaults and api.Validate (ValidateUpdate) run on every write
//     (objects given to New are defaulted, not validated, and keep their
//     status: they are fixtures);
//   - Delete: an object with finalizers gets a deletionTimestamp and goes
//     when an Update removes the last one; a pod bound to a node and not
//     terminated gets deletionTimestamp and deletionGracePeriodSeconds and
//     goes when deleted with gracePeriodSeconds 0 (as the agent does); a
//     namespace turns Terminating until FinalizeNamespace; "default" may not
//     be deleted. (By default the fake then also plays the pod's node and
//     removes it at once: StopPodsAtOnce.)
//   - List and Watch filter by namespace, label and field selectors; a watch
//     from resourceVersion "" or "0" starts with ADDED for every object, from
//     a later version it replays what happened since, and from a version
//     older than the kept history it ends at once with a 410 Gone Err
//     (ExpireWatches forces that); an object that stops matching a watch's
//     selector is sent as DELETED, one that starts matching as ADDED;
//   - Bind sets spec.nodeName and PodScheduled, and fails with Conflict if
//     the pod is already bound or being deleted;
//   - the scale subresource of deployments and replicasets, and pod traces
//     (starting with the API server's create span).
//
// What it does not do: cascading deletes (the garbage collector's job),
// namespace existence checks, service address allocation, and admission
// beyond defaulting and validation (no PriorityClass resolution).
//
// Actions records every write attempt (create, update, delete and the
// subresources) so a test can assert the writes a reconcile made; Intercept
// injects errors into any call.
package fake

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/strategy"
	"skiff.dev/skiff/client"
)

var (
	podKind   = api.MustKindOf(&api.Pod{})
	traceKind = api.MustKindOf(&api.PodTrace{})
)

// Action is one call to the fake.
type Action struct {
	// Verb: create, update, delete (writes); get, list, watch (reads, seen
	// only by Intercept).
	Verb string
	// Kind, e.g. "Pod".
	Kind string
	// Namespace and Name of the object ("" for cluster-scoped kinds or lists).
	Namespace, Name string
	// Subresource: "", status, binding, scale or trace.
	Subresource string
	// Object is a copy of what was sent (the object, Binding or Scale); nil
	// for deletes, reads and traces.
	Object api.Object
}

// String is "update Pod default/web/status", handy in test diffs.
func (a Action) String() string {
	s := a.Verb + " " + a.Kind + " " + api.Key(a.Namespace, a.Name)
	if a.Subresource != "" {
		s += "/" + a.Subresource
	}
	return s
}

// IsWrite reports whether the action changes state.
func (a Action) IsWrite() bool {
	return a.Verb == "create" || a.Verb == "update" || a.Verb == "delete"
}

// historyLimit bounds the kept watch history, like the server's.
const historyLimit = 10000

// Client is the in-memory Interface. Safe for concurrent use.
type Client struct {
	mu         sync.Mutex
	rev        int64
	seq        int64 // for uids and generated names
	objects    map[*api.Kind]map[string]api.Object
	traces     map[string][]api.TraceSpan
	history    []change
	compactRev int64 // history holds every change after this revision
	watchers   map[*watcher]struct{}
	actions    []Action
	intercept  func(Action) error
	now        func() time.Time
	// stopPodsAtOnce: see StopPodsAtOnce.
	stopPodsAtOnce bool
}

var _ client.Interface = (*Client)(nil)

type change struct {
	rev  int64
	kind *api.Kind
	typ  api.WatchEventType
	obj  api.Object // state after the change (for deletes: the last state)
	old  api.Object // state before (nil for adds)
}

// New returns a fake holding copies of objs, defaulted (api.SetDefaults) as
// the server would have stored them. Their missing uid, creationTimestamp,
// generation and resourceVersion are filled in; they are not validated. It panics on an unregistered type or a duplicate.
func New(objs ...api.Object) *Client {
	f := &Client{
		objects:  map[*api.Kind]map[string]api.Object{},
		traces:   map[string][]api.TraceSpan{},
		watchers: map[*watcher]struct{}{},
		now:      time.Now,

		stopPodsAtOnce: true,
	}
	for _, o := range objs {
		k := api.MustKindOf(o)
		o = api.Clone(o)
		*o.GetTypeMeta() = api.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
		api.SetDefaults(o) // the server stores only defaulted objects
		m := o.GetObjectMeta()
		m.Namespace = namespaceFor(k, m.Namespace)
		if m.Name == "" && m.GenerateName != "" {
			m.Name = f.generateName(m.GenerateName)
		}
		key := api.Key(m.Namespace, m.Name)
		if _, ok := f.store(k)[key]; ok {
			panic(fmt.Sprintf("fake.New: duplicate %s %s", k.Kind, key))
		}
		f.rev++
		if m.UID == "" {
			m.UID = f.newUID()
		}
		if m.CreationTimestamp.IsZero() {
			m.CreationTimestamp = api.NewTime(f.now().Truncate(time.Second))
		}
		if m.Generation == 0 {
			m.Generation = 1
		}
		if m.ResourceVersion == "" {
			m.ResourceVersion = strconv.FormatInt(f.rev, 10)
		}
		f.store(k)[key] = o
	}
	f.compactRev = f.rev
	return f
}

// StopPodsAtOnce says whether the fake stands in for the nodes' agents when a
// pod bound to a node is deleted gracefully. On (the default, for tests that
// run no agent): the pod gets its deletionTimestamp (a MODIFIED event) and
// is removed at once (DELETED), as if its node stopped it immediately. Off:
// it stays, deleting, until deleted again with gracePeriodSeconds 0, as on
// a real cluster until the agent has stopped it.
func (f *Client) StopPodsAtOnce(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopPodsAtOnce = on
}

// SetClock replaces time.Now for creationTimestamp and deletionTimestamp.
func (f *Client) SetClock(now func() time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = now
}

// Intercept installs a hook called before every call, reads included; a
// non-nil error fails the call with it (write attempts are still recorded).
// Pass nil to remove it. The hook runs with the fake locked: it must not
// call the fake.
func (f *Client) Intercept(hook func(Action) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.intercept = hook
}

// Actions returns the write attempts so far, in order.
func (f *Client) Actions() []Action {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Action(nil), f.actions...)
}

// ClearActions forgets the recorded actions (e.g. after a test's setup).
func (f *Client) ClearActions() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = nil
}

// ResourceVersion is the current revision.
func (f *Client) ResourceVersion() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strconv.FormatInt(f.rev, 10)
}

// WatchCount is the number of open watches.
func (f *Client) WatchCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.watchers)
}

// CloseWatches ends every open watch normally, as a server timeout does;
// watchers resume from their last resourceVersion.
func (f *Client) CloseWatches() { f.endWatches(nil) }

// ExpireWatches drops the watch history and ends every open watch with a
// 410 Gone error: watching again from any earlier resourceVersion fails
// with Gone, and informers must relist.
func (f *Client) ExpireWatches() {
	f.mu.Lock()
	f.history = nil
	f.compactRev = f.rev
	f.mu.Unlock()
	f.endWatches(api.NewGone("too old resource version: the watch history was compacted"))
}

func (f *Client) endWatches(err error) {
	f.mu.Lock()
	ws := make([]*watcher, 0, len(f.watchers))
	for w := range f.watchers {
		ws = append(ws, w)
		delete(f.watchers, w)
	}
	f.mu.Unlock()
	for _, w := range ws {
		w.end(err)
	}
}

// begin records a write and runs the intercept hook; f.mu is held.
func (f *Client) begin(a Action) error {
	if a.IsWrite() {
		f.actions = append(f.actions, a)
	}
	if f.intercept != nil {
		return f.intercept(a)
	}
	return nil
}

func (f *Client) store(k *api.Kind) map[string]api.Object {
	m, ok := f.objects[k]
	if !ok {
		m = map[string]api.Object{}
		f.objects[k] = m
	}
	return m
}

func (f *Client) newUID() string {
	f.seq++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", f.seq)
}

// generateName completes a prefix with five characters, as the API server
// (deterministic here, so tests can predict names).
func (f *Client) generateName(prefix string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	f.seq++
	n := f.seq
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[n%int64(len(alphabet))]
		n /= int64(len(alphabet))
	}
	return prefix + string(b)
}

func namespaceFor(k *api.Kind, ns string) string {
	if !k.Namespaced {
		return ""
	}
	if ns == "" {
		return "default"
	}
	return ns
}

// emit assigns nothing: obj already carries the new revision. f.mu is held.
func (f *Client) emit(k *api.Kind, typ api.WatchEventType, obj, old api.Object) {
	c := change{rev: f.rev, kind: k, typ: typ, obj: obj, old: old}
	f.history = append(f.history, c)
	if len(f.history) > historyLimit {
		f.compactRev = f.history[0].rev
		f.history = f.history[1:]
	}
	for w := range f.watchers {
		if ev, ok := w.filter(c); ok {
			w.push(ev)
		}
	}
}

// ownCopy is the write path's private copy of obj, with its kind's type
// metadata and namespace filled in.
func ownCopy(obj api.Object) (*api.Kind, api.Object, *api.ObjectMeta, error) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return nil, nil, nil, api.NewBadRequest("no object given")
	}
	k, err := api.KindOf(obj)
	if err != nil {
		return nil, nil, nil, api.NewBadRequest(err.Error())
	}
	o := api.Clone(obj)
	*o.GetTypeMeta() = api.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
	m := o.GetObjectMeta()
	m.Namespace = namespaceFor(k, m.Namespace)
	return k, o, m, nil
}

// Create implements client.Interface, with the registry's create rules:
// server-owned metadata set, status reset (strategy.PrepareForCreate),
// defaults applied, validated.
func (f *Client) Create(ctx context.Context, obj api.Object) (api.Object, error) {
	k, o, m, err := ownCopy(obj)
	if err != nil {
		return nil, err
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "create", Kind: k.Kind, Namespace: m.Namespace, Name: m.Name, Object: api.Clone(o)}); err != nil {
		return nil, err
	}
	if k.Internal {
		return nil, strategy.MethodNotAllowed("create", k)
	}
	if err := strategy.PrepareForCreate(k, o); err != nil {
		return nil, err
	}
	m.ManagedFields = nil
	if m.Name == "" && m.GenerateName != "" {
		m.Name = f.generateName(m.GenerateName)
	}
	if err := strategy.RequireName(k, m); err != nil {
		return nil, err
	}
	job, isJob := o.(*api.Job)
	if isJob {
		m.UID = f.newUID() // the generated selector carries the job's uid
		api.GenerateJobSelector(job)
	}
	api.SetDefaults(o)
	strategy.PrepareStrategy(o, nil)
	if errs := api.Validate(o); len(errs) > 0 {
		return nil, api.NewInvalid(k, m.Name, errs)
	}
	key := api.Key(m.Namespace, m.Name)
	if _, ok := f.store(k)[key]; ok {
		return nil, api.NewAlreadyExists(k, m.Name)
	}
	f.rev++
	if !isJob {
		m.UID = f.newUID()
	}
	m.CreationTimestamp = api.NewTime(f.now().Truncate(time.Second))
	m.ResourceVersion = strconv.FormatInt(f.rev, 10)
	f.store(k)[key] = o
	f.emit(k, api.Added, o, nil)
	if pod, ok := o.(*api.Pod); ok {
		// The registry's own span for a new pod; it starts a fresh trace.
		now := f.now()
		f.traces[key] = []api.TraceSpan{strategy.CreateSpan(pod, now, now)}
	}
	return api.Clone(o), nil
}

// Update implements client.Interface, with the registry's update rules:
// server-owned metadata, the status (for kinds with a status subresource)
// and what the server assigned (strategy.PrepareForUpdate: a bound pod's
// node, a service's cluster IPs and node ports, a namespace's finalizers)
// are kept.
func (f *Client) Update(ctx context.Context, obj api.Object) (api.Object, error) {
	k, o, m, err := ownCopy(obj)
	if err != nil {
		return nil, err
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "update", Kind: k.Kind, Namespace: m.Namespace, Name: m.Name, Object: api.Clone(o)}); err != nil {
		return nil, err
	}
	if k.Internal {
		return nil, strategy.MethodNotAllowed("update", k)
	}
	if m.Name == "" {
		return nil, api.NewInvalid(k, "", api.FieldErrors{api.Required("metadata.name", "")})
	}
	key := api.Key(m.Namespace, m.Name)
	stored, ok := f.store(k)[key]
	if !ok {
		return nil, api.NewNotFound(k, m.Name)
	}
	if err := strategy.CheckPrecondition(k, stored, m.UID, m.ResourceVersion); err != nil {
		return nil, err
	}
	strategy.PrepareForUpdate(k, o, stored)
	m.ManagedFields = nil
	m.ResourceVersion = stored.GetObjectMeta().ResourceVersion
	api.SetDefaults(o)
	strategy.PrepareStrategy(o, stored)
	strategy.BumpGeneration(o, stored)
	if errs := api.ValidateUpdate(o, stored); len(errs) > 0 {
		return nil, api.NewInvalid(k, m.Name, errs)
	}
	if strategy.SameObject(o, stored) {
		return api.Clone(stored), nil
	}
	return f.write(k, key, o, stored), nil
}

// write stores o as the new state of key (or removes it when a deleting
// object has nothing left to wait for) and emits the event; f.mu is held.
func (f *Client) write(k *api.Kind, key string, o, stored api.Object) api.Object {
	f.rev++
	m := o.GetObjectMeta()
	m.ResourceVersion = strconv.FormatInt(f.rev, 10)
	if strategy.Finalized(o) {
		f.store(k)[key] = o
		f.emit(k, api.Modified, o, stored)
		return f.remove(k, key, o)
	}
	f.store(k)[key] = o
	f.emit(k, api.Modified, o, stored)
	return api.Clone(o)
}

// remove deletes key, whose last state is o, at a new revision and emits
// the event; it returns that last state. f.mu is held.
func (f *Client) remove(k *api.Kind, key string, o api.Object) api.Object {
	o = api.Clone(o) // the history may hold o
	f.rev++
	o.GetObjectMeta().ResourceVersion = strconv.FormatInt(f.rev, 10)
	delete(f.store(k), key)
	f.dropTrace(k, key)
	f.emit(k, api.Deleted, o, o)
	return api.Clone(o)
}

// UpdateStatus implements client.Interface: only the status of obj is
// written; it is defaulted and validated as on the server.
func (f *Client) UpdateStatus(ctx context.Context, obj api.Object) (api.Object, error) {
	k, in, m, err := ownCopy(obj)
	if err != nil {
		return nil, err
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "update", Kind: k.Kind, Namespace: m.Namespace, Name: m.Name, Subresource: "status", Object: api.Clone(in)}); err != nil {
		return nil, err
	}
	if !k.HasStatus {
		return nil, strategy.NotFoundPath()
	}
	if k.Internal {
		return nil, strategy.MethodNotAllowed("update", k)
	}
	if m.Name == "" {
		return nil, api.NewInvalid(k, "", api.FieldErrors{api.Required("metadata.name", "")})
	}
	key := api.Key(m.Namespace, m.Name)
	stored, ok := f.store(k)[key]
	if !ok {
		return nil, api.NewNotFound(k, m.Name)
	}
	if err := strategy.CheckPrecondition(k, stored, m.UID, m.ResourceVersion); err != nil {
		return nil, err
	}
	o := api.Clone(stored)
	strategy.SetStatus(o, in)
	api.SetDefaults(o)
	if errs := api.ValidateStatusUpdate(o, stored); len(errs) > 0 {
		return nil, api.NewInvalid(k, m.Name, errs)
	}
	if strategy.SameObject(o, stored) {
		return api.Clone(stored), nil
	}
	return f.write(k, key, o, stored), nil
}

// Delete implements client.Interface with the registry's rules: an object
// with finalizers, and a pod bound to a node and not terminated, get a
// deletionTimestamp (and the pod a deletionGracePeriodSeconds) and stay; a
// namespace turns Terminating until FinalizeNamespace; anything else goes at
// once.
func (f *Client) Delete(ctx context.Context, k *api.Kind, namespace, name string, opts api.DeleteOptions) error {
	ns := namespaceFor(k, namespace)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "delete", Kind: k.Kind, Namespace: ns, Name: name}); err != nil {
		return err
	}
	if k.Internal {
		return strategy.MethodNotAllowed("delete", k)
	}
	if err := strategy.CheckDelete(k, name, opts); err != nil {
		return err
	}
	key := api.Key(ns, name)
	stored, ok := f.store(k)[key]
	if !ok {
		return api.NewNotFound(k, name)
	}
	uid, rv := strategy.DeletePreconditions(opts)
	if err := strategy.CheckDeletePrecondition(k, stored, uid, rv); err != nil {
		return err
	}
	grace := strategy.GracePeriod(stored, opts)
	o := api.Clone(stored)
	if grace == 0 && !strategy.HasFinalizers(stored) {
		f.remove(k, key, o)
		return nil
	}
	strategy.MarkDeleting(o, grace, f.now())
	if strategy.SameObject(o, stored) {
		return nil // already deleting, waiting
	}
	o = f.write(k, key, o, stored)
	if _, isPod := o.(*api.Pod); isPod && f.stopPodsAtOnce && !strategy.HasFinalizers(o) {
		// Stand in for the pod's node: stopped at once, deleted with grace 0.
		f.remove(k, key, o)
	}
	return nil
}

// FinalizeNamespace removes a namespace's spec finalizers, as the API
// server's Local: a Terminating namespace is then removed. It satisfies
// the namespace controller's NamespaceFinalizer.
func (f *Client) FinalizeNamespace(ctx context.Context, name string) error {
	k := api.MustKindOf(&api.Namespace{})
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "update", Kind: k.Kind, Name: name, Subresource: "finalize"}); err != nil {
		return err
	}
	stored, ok := f.store(k)[name]
	if !ok {
		return api.NewNotFound(k, name)
	}
	o := api.Clone(stored).(*api.Namespace)
	if len(o.Spec.Finalizers) == 0 {
		return nil
	}
	o.Spec.Finalizers = nil
	f.write(k, name, o, stored)
	return nil
}

func (f *Client) dropTrace(k *api.Kind, key string) {
	delete(f.traces, traceKey(k, key))
}

// Get implements client.Interface.
func (f *Client) Get(ctx context.Context, k *api.Kind, namespace, name string) (api.Object, error) {
	if k == traceKind {
		return f.GetTrace(ctx, namespace, name)
	}
	ns := namespaceFor(k, namespace)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "get", Kind: k.Kind, Namespace: ns, Name: name}); err != nil {
		return nil, err
	}
	o, ok := f.store(k)[api.Key(ns, name)]
	if !ok {
		return nil, api.NewNotFound(k, name)
	}
	return api.Clone(o), nil
}

// List implements client.Interface; objects are sorted by key.
func (f *Client) List(ctx context.Context, k *api.Kind, namespace string, opts api.ListOptions) ([]api.Object, string, error) {
	ls, fs, err := strategy.ParseSelectors(k, opts)
	if err != nil {
		return nil, "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "list", Kind: k.Kind, Namespace: namespace}); err != nil {
		return nil, "", err
	}
	var out []api.Object
	for _, key := range sortedKeys(f.store(k)) {
		o := f.store(k)[key]
		if namespace != "" && k.Namespaced && o.GetObjectMeta().Namespace != namespace {
			continue
		}
		if api.Matches(o, ls, fs) {
			out = append(out, api.Clone(o))
		}
	}
	return out, strconv.FormatInt(f.rev, 10), nil
}

func sortedKeys(m map[string]api.Object) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Watch implements client.Interface. As the API server's Local: a resourceVersion
// older than the kept history gives a watcher that ends at once with a Gone
// Err, and opts.TimeoutSeconds ends the watch normally.
func (f *Client) Watch(ctx context.Context, k *api.Kind, namespace string, opts api.ListOptions) (client.Watcher, error) {
	ls, fs, err := strategy.ParseSelectors(k, opts)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "watch", Kind: k.Kind, Namespace: namespace}); err != nil {
		return nil, err
	}
	if !k.Namespaced {
		namespace = ""
	}
	w := newWatcher(f, k, namespace, ls, fs)
	switch opts.ResourceVersion {
	case "", "0":
		for _, key := range sortedKeys(f.store(k)) {
			o := f.store(k)[key]
			if w.matches(o) {
				w.push(client.Event{Type: api.Added, Object: api.Clone(o)})
			}
		}
	default:
		rv, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
		if err != nil || rv < 0 {
			return nil, api.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q: want a number", opts.ResourceVersion))
		}
		if rv < f.compactRev {
			w.end(api.NewGone(fmt.Sprintf("too old resource version: %d (%d)", rv, f.compactRev)))
			go w.pump(ctx)
			return w, nil
		}
		for _, c := range f.history {
			if c.rev <= rv || c.kind != k {
				continue
			}
			if ev, ok := w.filter(c); ok {
				w.push(ev)
			}
		}
	}
	f.watchers[w] = struct{}{}
	var cancel context.CancelFunc = func() {}
	if opts.TimeoutSeconds > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(opts.TimeoutSeconds)*time.Second)
	}
	go func() {
		defer cancel()
		w.pump(ctx)
	}()
	return w, nil
}

// Bind implements client.Interface: spec.nodeName is set and the
// PodScheduled condition turns True, as in the registry.
func (f *Client) Bind(ctx context.Context, b *api.Binding) error {
	k := podKind
	ns := namespaceFor(k, b.Namespace)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "create", Kind: k.Kind, Namespace: ns, Name: b.Name, Subresource: "binding", Object: api.Clone(b)}); err != nil {
		return err
	}
	if err := strategy.ValidateBinding(b); err != nil {
		return err
	}
	key := api.Key(ns, b.Name)
	stored, ok := f.store(k)[key]
	if !ok {
		return api.NewNotFound(k, b.Name)
	}
	pod, err := strategy.Bind(api.Clone(stored.(*api.Pod)), b, f.now())
	if err != nil {
		return err
	}
	f.write(k, key, pod, stored)
	return nil
}

// GetScale implements client.Interface.
func (f *Client) GetScale(ctx context.Context, k *api.Kind, namespace, name string) (*api.Scale, error) {
	ns := namespaceFor(k, namespace)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "get", Kind: k.Kind, Namespace: ns, Name: name, Subresource: "scale"}); err != nil {
		return nil, err
	}
	if !strategy.Scalable(k) {
		return nil, strategy.NotFoundPath()
	}
	stored, ok := f.store(k)[api.Key(ns, name)]
	if !ok {
		return nil, api.NewNotFound(k, name)
	}
	return strategy.ScaleOf(stored), nil
}

// UpdateScale implements client.Interface.
func (f *Client) UpdateScale(ctx context.Context, k *api.Kind, namespace, name string, s *api.Scale) (*api.Scale, error) {
	ns := namespaceFor(k, namespace)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "update", Kind: k.Kind, Namespace: ns, Name: name, Subresource: "scale", Object: api.Clone(s)}); err != nil {
		return nil, err
	}
	if !strategy.Scalable(k) {
		return nil, strategy.NotFoundPath()
	}
	if s.Name != "" && s.Name != name {
		return nil, api.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", s.Name, name))
	}
	if s.Spec.Replicas < 0 {
		return nil, api.NewInvalid(&api.Kind{Kind: "Scale", Group: "autoscaling", Version: "v1", Resource: "scale"}, name,
			api.FieldErrors{api.Invalid("spec.replicas", s.Spec.Replicas, "must be greater than or equal to 0")})
	}
	key := api.Key(ns, name)
	stored, ok := f.store(k)[key]
	if !ok {
		return nil, api.NewNotFound(k, name)
	}
	if err := strategy.CheckPrecondition(k, stored, s.UID, s.ResourceVersion); err != nil {
		return nil, err
	}
	o := api.Clone(stored)
	replicas := s.Spec.Replicas
	switch v := o.(type) {
	case *api.Deployment:
		v.Spec.Replicas = &replicas
	case *api.ReplicaSet:
		v.Spec.Replicas = &replicas
	case *api.StatefulSet:
		v.Spec.Replicas = &replicas
	}
	if !strategy.SpecChanged(o, stored) {
		return strategy.ScaleOf(stored), nil
	}
	o.GetObjectMeta().Generation++
	if errs := api.ValidateUpdate(o, stored); len(errs) > 0 {
		return nil, api.NewInvalid(k, name, errs)
	}
	return strategy.ScaleOf(f.write(k, key, o, stored)), nil
}

// AddTrace implements client.Interface; at most api.MaxTraceSpans are kept.
func (f *Client) AddTrace(ctx context.Context, namespace, pod string, spans ...api.TraceSpan) error {
	return f.AddObjectTrace(ctx, podKind, namespace, pod, spans...)
}

// GetTrace implements client.Interface.
func (f *Client) GetTrace(ctx context.Context, namespace, pod string) (*api.PodTrace, error) {
	return f.GetObjectTrace(ctx, podKind, namespace, pod)
}

// traceKey keys a pod's trace "ns/name", another kind's "resource/ns/name".
func traceKey(k *api.Kind, key string) string {
	if k.Kind == "Pod" {
		return key
	}
	return k.Resource + "/" + key
}

// AddObjectTrace implements client.ObjectTracer (a pod's or an
// autoscaler's trace); at most api.MaxTraceSpans are kept.
func (f *Client) AddObjectTrace(ctx context.Context, k *api.Kind, namespace, name string, spans ...api.TraceSpan) error {
	ns := namespaceFor(k, namespace)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "create", Kind: k.Kind, Namespace: ns, Name: name, Subresource: "trace"}); err != nil {
		return err
	}
	if err := strategy.ValidateTraceSpans(name, spans); err != nil {
		return err
	}
	key := api.Key(ns, name)
	if _, ok := f.store(k)[key]; !ok {
		return api.NewNotFound(k, name)
	}
	tk := traceKey(k, key)
	t := append(f.traces[tk], spans...)
	if len(t) > api.MaxTraceSpans {
		t = append([]api.TraceSpan(nil), t[len(t)-api.MaxTraceSpans:]...)
	}
	f.traces[tk] = t
	return nil
}

// GetObjectTrace implements client.ObjectTracer.
func (f *Client) GetObjectTrace(ctx context.Context, k *api.Kind, namespace, name string) (*api.PodTrace, error) {
	ns := namespaceFor(k, namespace)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "get", Kind: k.Kind, Namespace: ns, Name: name, Subresource: "trace"}); err != nil {
		return nil, err
	}
	key := api.Key(ns, name)
	o, ok := f.store(k)[key]
	if !ok {
		return nil, api.NewNotFound(k, name)
	}
	return strategy.NewObjectTrace(k, o, slices.Clone(f.traces[traceKey(k, key)])), nil
}

// Shows reports whether objs (an informer's List: in key order) are the
// fake's objects of kind k now, each at its current resourceVersion: the
// condition a test waits for until an informer over the fake caught up.
func (f *Client) Shows(k *api.Kind, objs []api.Object) bool {
	want, _, err := f.List(context.Background(), k, "", api.ListOptions{})
	return err == nil && slices.EqualFunc(objs, want, func(a, b api.Object) bool {
		return api.KeyOf(a) == api.KeyOf(b) && a.GetObjectMeta().ResourceVersion == b.GetObjectMeta().ResourceVersion
	})
}
