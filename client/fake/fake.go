// Package fake is an in-memory client.Interface for unit tests of
// controllers, the scheduler and the agent: no server, no network, no sleeps.
//
// It keeps the API server's rules that controllers depend on:
//
//   - one revision counter: every write gets the next resourceVersion;
//   - optimistic concurrency: an Update, UpdateStatus, UpdateScale or Delete
//     precondition carrying a stale resourceVersion fails with Conflict
//     (an empty resourceVersion writes unconditionally);
//   - create sets uid, creationTimestamp, generation 1, a name from
//     generateName, and the "default" namespace for namespaced kinds; it
//     fails with AlreadyExists on a taken name;
//   - for kinds with a status subresource, Update keeps the stored status
//     and UpdateStatus keeps everything but the status; generation bumps when
//     anything outside metadata and status changes; an update that changes
//     nothing is a no-op (no new resourceVersion, no event);
//   - api.SetDefaults and api.Validate (ValidateUpdate) run on Create and
//     Update, as on the server (objects given to New are defaulted, not
//     validated);
//   - List and Watch filter by namespace, label and field selectors; a watch
//     from resourceVersion "" or "0" starts with ADDED for every object, from
//     a later version it replays what happened since, and from a version
//     older than the kept history it fails with 410 Gone (ExpireWatches
//     forces that); an object that stops matching a watch's selector is
//     sent as DELETED, one that starts matching as ADDED;
//   - Bind sets spec.nodeName and fails with Conflict if it is already set;
//   - the scale subresource of deployments and replicasets, and pod traces.
//
// What it does not do: deletes are immediate (no graceful pod termination,
// no cascading to owned objects or a namespace's contents; objects with
// metadata.finalizers get a deletionTimestamp and go when the last
// finalizer is removed by an Update), namespaces need not exist, and there
// is no admission beyond defaulting and validation.
//
// Actions records every write attempt (create, update, delete and the
// subresources) so a test can assert the writes a reconcile made; Intercept
// injects errors into any call.
package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
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

func conflict(k *api.Kind, name string) error {
	return api.NewConflict(k, name, "the object has been modified; please apply your changes to the latest version and try again")
}

// ownCopy is the write path's private copy of obj, with its kind's type
// metadata and namespace filled in.
func ownCopy(obj api.Object) (*api.Kind, api.Object, *api.ObjectMeta, error) {
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

// Create implements client.Interface.
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
	if m.Name == "" && m.GenerateName != "" {
		m.Name = f.generateName(m.GenerateName)
	}
	if m.Name == "" {
		return nil, api.NewInvalid(k, "", api.FieldErrors{api.Required("metadata.name", "name or generateName is required")})
	}
	key := api.Key(m.Namespace, m.Name)
	if _, ok := f.store(k)[key]; ok {
		return nil, api.NewAlreadyExists(k, m.Name)
	}
	api.SetDefaults(o)
	if errs := api.Validate(o); len(errs) > 0 {
		return nil, api.NewInvalid(k, m.Name, errs)
	}
	f.rev++
	m.UID = f.newUID()
	m.CreationTimestamp = api.NewTime(f.now().Truncate(time.Second))
	m.DeletionTimestamp = nil
	m.DeletionGracePeriodSeconds = nil
	m.Generation = 1
	m.ResourceVersion = strconv.FormatInt(f.rev, 10)
	m.ManagedFields = nil
	f.store(k)[key] = o
	f.emit(k, api.Added, o, nil)
	return api.Clone(o), nil
}

// Update implements client.Interface.
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
	key := api.Key(m.Namespace, m.Name)
	stored, ok := f.store(k)[key]
	if !ok {
		return nil, api.NewNotFound(k, m.Name)
	}
	sm := stored.GetObjectMeta()
	if m.ResourceVersion != "" && m.ResourceVersion != sm.ResourceVersion {
		return nil, conflict(k, m.Name)
	}
	if m.UID != "" && m.UID != sm.UID {
		return nil, api.NewConflict(k, m.Name, fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", m.UID, sm.UID))
	}
	// Metadata the server owns.
	m.UID, m.CreationTimestamp, m.GenerateName = sm.UID, sm.CreationTimestamp, sm.GenerateName
	m.DeletionTimestamp, m.DeletionGracePeriodSeconds = sm.DeletionTimestamp, sm.DeletionGracePeriodSeconds
	m.Generation, m.ResourceVersion, m.ManagedFields = sm.Generation, sm.ResourceVersion, nil
	if k.HasStatus {
		copyField(o, stored, "Status")
	}
	api.SetDefaults(o)
	if errs := api.ValidateUpdate(o, stored); len(errs) > 0 {
		return nil, api.NewInvalid(k, m.Name, errs)
	}
	if equalJSON(o, stored) {
		return api.Clone(stored), nil
	}
	if specChanged(o, stored) {
		m.Generation++
	}
	return f.write(k, key, o, stored), nil
}

// write stores o as the new state of key (or removes it when a deleting
// object has lost its last finalizer) and emits the event; f.mu is held.
func (f *Client) write(k *api.Kind, key string, o, stored api.Object) api.Object {
	f.rev++
	m := o.GetObjectMeta()
	m.ResourceVersion = strconv.FormatInt(f.rev, 10)
	if m.DeletionTimestamp != nil && len(m.Finalizers) == 0 {
		delete(f.store(k), key)
		f.dropTrace(k, key)
		f.emit(k, api.Deleted, o, stored)
		return api.Clone(o)
	}
	f.store(k)[key] = o
	f.emit(k, api.Modified, o, stored)
	return api.Clone(o)
}

// UpdateStatus implements client.Interface.
func (f *Client) UpdateStatus(ctx context.Context, obj api.Object) (api.Object, error) {
	k, err := api.KindOf(obj)
	if err != nil {
		return nil, api.NewBadRequest(err.Error())
	}
	m := obj.GetObjectMeta()
	ns := namespaceFor(k, m.Namespace)

	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "update", Kind: k.Kind, Namespace: ns, Name: m.Name, Subresource: "status", Object: api.Clone(obj)}); err != nil {
		return nil, err
	}
	if !k.HasStatus {
		return nil, api.NewNotFound(k, m.Name+"/status")
	}
	key := api.Key(ns, m.Name)
	stored, ok := f.store(k)[key]
	if !ok {
		return nil, api.NewNotFound(k, m.Name)
	}
	if m.ResourceVersion != "" && m.ResourceVersion != stored.GetObjectMeta().ResourceVersion {
		return nil, conflict(k, m.Name)
	}
	o := api.Clone(stored)
	copyField(o, obj, "Status")
	if equalJSON(o, stored) {
		return api.Clone(stored), nil
	}
	return f.write(k, key, o, stored), nil
}

// Delete implements client.Interface. Immediate unless the object has
// finalizers (then it gets a deletionTimestamp).
func (f *Client) Delete(ctx context.Context, k *api.Kind, namespace, name string, opts api.DeleteOptions) error {
	ns := namespaceFor(k, namespace)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "delete", Kind: k.Kind, Namespace: ns, Name: name}); err != nil {
		return err
	}
	key := api.Key(ns, name)
	stored, ok := f.store(k)[key]
	if !ok {
		return api.NewNotFound(k, name)
	}
	sm := stored.GetObjectMeta()
	if p := opts.Preconditions; p != nil {
		if p.UID != nil && *p.UID != sm.UID {
			return api.NewConflict(k, name, fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", *p.UID, sm.UID))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != sm.ResourceVersion {
			return api.NewConflict(k, name, fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", *p.ResourceVersion, sm.ResourceVersion))
		}
	}
	o := api.Clone(stored)
	m := o.GetObjectMeta()
	if len(m.Finalizers) > 0 && m.DeletionTimestamp != nil {
		return nil // already deleting, waiting for its finalizers
	}
	if m.DeletionTimestamp == nil {
		t := api.NewTime(f.now().Truncate(time.Second))
		m.DeletionTimestamp = &t
	}
	// write removes the object when it has no finalizers left.
	f.write(k, key, o, stored)
	return nil
}

func (f *Client) dropTrace(k *api.Kind, key string) {
	if k.Kind == "Pod" {
		delete(f.traces, key)
	}
}

// Get implements client.Interface.
func (f *Client) Get(ctx context.Context, k *api.Kind, namespace, name string) (api.Object, error) {
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

func selectors(k *api.Kind, opts api.ListOptions) (labels.Selector, fields.Selector, error) {
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

// List implements client.Interface; objects are sorted by key.
func (f *Client) List(ctx context.Context, k *api.Kind, namespace string, opts api.ListOptions) ([]api.Object, string, error) {
	ls, fs, err := selectors(k, opts)
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

// Watch implements client.Interface.
func (f *Client) Watch(ctx context.Context, k *api.Kind, namespace string, opts api.ListOptions) (client.Watcher, error) {
	ls, fs, err := selectors(k, opts)
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
		if err != nil {
			return nil, api.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", opts.ResourceVersion))
		}
		if rv < f.compactRev {
			return nil, api.NewGone(fmt.Sprintf("too old resource version: %d (%d)", rv, f.compactRev))
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
	go w.pump(ctx)
	return w, nil
}

// Bind implements client.Interface.
func (f *Client) Bind(ctx context.Context, b *api.Binding) error {
	k := api.MustKindOf(&api.Pod{})
	ns := namespaceFor(k, b.Namespace)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "create", Kind: k.Kind, Namespace: ns, Name: b.Name, Subresource: "binding", Object: api.Clone(b)}); err != nil {
		return err
	}
	if b.Target.Name == "" {
		return api.NewInvalid(k, b.Name, api.FieldErrors{api.Required("target.name", "")})
	}
	key := api.Key(ns, b.Name)
	stored, ok := f.store(k)[key]
	if !ok {
		return api.NewNotFound(k, b.Name)
	}
	pod := api.Clone(stored.(*api.Pod))
	if b.UID != "" && b.UID != pod.UID {
		return api.NewConflict(k, b.Name, fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", b.UID, pod.UID))
	}
	if pod.Spec.NodeName != "" {
		return api.NewConflict(k, b.Name, fmt.Sprintf("pod %s is already assigned to node %q", b.Name, pod.Spec.NodeName))
	}
	if pod.DeletionTimestamp != nil {
		return api.NewConflict(k, b.Name, "pod is being deleted")
	}
	pod.Spec.NodeName = b.Target.Name
	f.write(k, key, pod, stored)
	return nil
}

// replicasOf returns a pointer to spec.replicas of a scalable object.
func replicasOf(o api.Object) (spec **int32, status int32, sel *api.LabelSelector, ok bool) {
	switch v := o.(type) {
	case *api.Deployment:
		return &v.Spec.Replicas, v.Status.Replicas, v.Spec.Selector, true
	case *api.ReplicaSet:
		return &v.Spec.Replicas, v.Status.Replicas, v.Spec.Selector, true
	}
	return nil, 0, nil, false
}

func scaleOf(o api.Object) *api.Scale {
	spec, status, sel, _ := replicasOf(o)
	m := o.GetObjectMeta()
	s := &api.Scale{
		TypeMeta:   api.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: api.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, CreationTimestamp: m.CreationTimestamp},
		Status:     api.ScaleStatus{Replicas: status, Selector: sel.String()},
	}
	s.Spec.Replicas = 1
	if *spec != nil {
		s.Spec.Replicas = **spec
	}
	return s
}

// GetScale implements client.Interface.
func (f *Client) GetScale(ctx context.Context, k *api.Kind, namespace, name string) (*api.Scale, error) {
	ns := namespaceFor(k, namespace)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "get", Kind: k.Kind, Namespace: ns, Name: name, Subresource: "scale"}); err != nil {
		return nil, err
	}
	stored, ok := f.store(k)[api.Key(ns, name)]
	if !ok {
		return nil, api.NewNotFound(k, name)
	}
	if _, _, _, ok := replicasOf(stored); !ok {
		return nil, api.NewNotFound(k, name+"/scale")
	}
	return scaleOf(stored), nil
}

// UpdateScale implements client.Interface.
func (f *Client) UpdateScale(ctx context.Context, k *api.Kind, namespace, name string, s *api.Scale) (*api.Scale, error) {
	ns := namespaceFor(k, namespace)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "update", Kind: k.Kind, Namespace: ns, Name: name, Subresource: "scale", Object: api.Clone(s)}); err != nil {
		return nil, err
	}
	key := api.Key(ns, name)
	stored, ok := f.store(k)[key]
	if !ok {
		return nil, api.NewNotFound(k, name)
	}
	if _, _, _, ok := replicasOf(stored); !ok {
		return nil, api.NewNotFound(k, name+"/scale")
	}
	if s.Spec.Replicas < 0 {
		return nil, api.NewInvalid(k, name, api.FieldErrors{api.Invalid("spec.replicas", s.Spec.Replicas, "must be greater than or equal to 0")})
	}
	if s.ResourceVersion != "" && s.ResourceVersion != stored.GetObjectMeta().ResourceVersion {
		return nil, conflict(k, name)
	}
	o := api.Clone(stored)
	spec, _, _, _ := replicasOf(o)
	if *spec != nil && **spec == s.Spec.Replicas {
		return scaleOf(stored), nil
	}
	r := s.Spec.Replicas
	*spec = &r
	o.GetObjectMeta().Generation++
	return scaleOf(f.write(k, key, o, stored)), nil
}

// AddTrace implements client.Interface; at most api.MaxTraceSpans are kept.
func (f *Client) AddTrace(ctx context.Context, namespace, pod string, spans ...api.TraceSpan) error {
	k := api.MustKindOf(&api.Pod{})
	ns := namespaceFor(k, namespace)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "create", Kind: k.Kind, Namespace: ns, Name: pod, Subresource: "trace"}); err != nil {
		return err
	}
	key := api.Key(ns, pod)
	if _, ok := f.store(k)[key]; !ok {
		return api.NewNotFound(k, pod)
	}
	t := append(f.traces[key], spans...)
	if len(t) > api.MaxTraceSpans {
		t = append([]api.TraceSpan(nil), t[len(t)-api.MaxTraceSpans:]...)
	}
	f.traces[key] = t
	return nil
}

// GetTrace implements client.Interface.
func (f *Client) GetTrace(ctx context.Context, namespace, pod string) (*api.PodTrace, error) {
	k := api.MustKindOf(&api.Pod{})
	ns := namespaceFor(k, namespace)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(Action{Verb: "get", Kind: k.Kind, Namespace: ns, Name: pod, Subresource: "trace"}); err != nil {
		return nil, err
	}
	key := api.Key(ns, pod)
	if _, ok := f.store(k)[key]; !ok {
		return nil, api.NewNotFound(k, pod)
	}
	tk := api.MustKindOf(&api.PodTrace{})
	t := &api.PodTrace{
		TypeMeta:   api.TypeMeta{APIVersion: tk.APIVersion(), Kind: tk.Kind},
		ObjectMeta: api.ObjectMeta{Name: pod, Namespace: ns},
		Spans:      append([]api.TraceSpan(nil), f.traces[key]...),
	}
	return api.Clone(t), nil
}

// copyField sets dst.<name> to a deep copy of src.<name> (both pointers to
// the same struct type).
func copyField(dst, src api.Object, name string) {
	d := reflect.ValueOf(dst).Elem().FieldByName(name)
	s := reflect.ValueOf(src).Elem().FieldByName(name)
	if !d.IsValid() || !s.IsValid() || !d.CanSet() {
		return
	}
	data, err := json.Marshal(s.Interface())
	if err != nil {
		panic(fmt.Sprintf("fake: copy %s of %T: %v", name, src, err))
	}
	v := reflect.New(d.Type())
	if err := json.Unmarshal(data, v.Interface()); err != nil {
		panic(fmt.Sprintf("fake: copy %s of %T: %v", name, src, err))
	}
	d.Set(v.Elem())
}

func equalJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// specChanged reports a change outside metadata and status (spec, data, ...).
func specChanged(a, b api.Object) bool {
	return !equalJSON(specPart(a), specPart(b))
}

func specPart(o api.Object) map[string]json.RawMessage {
	data, _ := json.Marshal(o)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(data, &m)
	for _, k := range []string{"apiVersion", "kind", "metadata", "status"} {
		delete(m, k)
	}
	return m
}
