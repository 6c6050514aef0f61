package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

// Fixtures for reconciler tests (STYLE 15): a fake client preloaded with
// objects, listers that read it directly (so every reconcile sees the
// latest state, with no informer goroutine), a fixed clock and a recorder
// that keeps events in memory. Tests call Reconcile and assert the writes.

// t0 is the fixed "now" of every test.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func now() time.Time { return t0 }

// fakeLister is a Lister over the fake client's current state.
type fakeLister struct {
	c    *fake.Client
	kind *api.Kind
}

func (l fakeLister) Get(namespace, name string) (api.Object, bool) {
	o, err := l.c.Get(context.Background(), l.kind, namespace, name)
	return o, err == nil
}

func (l fakeLister) ListBy(sel labels.Selector, namespace string) []api.Object {
	objs, _, err := l.c.List(context.Background(), l.kind, namespace, api.ListOptions{})
	if err != nil {
		panic(err)
	}
	var out []api.Object
	for _, o := range objs {
		if sel == nil || sel.Empty() || sel.Matches(labels.Set(o.GetObjectMeta().Labels)) {
			out = append(out, o)
		}
	}
	return out
}

// staticLister is a Lister frozen at construction: a cache that lags.
type staticLister map[string]api.Object

func newStaticLister(objs ...api.Object) staticLister {
	l := staticLister{}
	for _, o := range objs {
		l[api.KeyOf(o)] = o
	}
	return l
}

func (l staticLister) Get(namespace, name string) (api.Object, bool) {
	o, ok := l[api.Key(namespace, name)]
	return o, ok
}

func (l staticLister) ListBy(sel labels.Selector, namespace string) []api.Object {
	var out []api.Object
	for _, o := range l {
		if namespace != "" && o.GetObjectMeta().Namespace != namespace {
			continue
		}
		if sel == nil || sel.Empty() || sel.Matches(labels.Set(o.GetObjectMeta().Labels)) {
			out = append(out, o)
		}
	}
	return out
}

// events records events as "Type Reason Message".
type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) Eventf(_ context.Context, _ api.Object, eventType, reason, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, eventType+" "+reason+" "+fmt.Sprintf(format, args...))
}

func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.list
	e.list = nil
	return out
}

// writes returns the write actions so far ("create Pod ns/name") and clears them.
func writes(c *fake.Client) []string {
	var out []string
	for _, a := range c.Actions() {
		out = append(out, a.String())
	}
	c.ClearActions()
	return out
}

// writesOf returns the objects of the write actions with verb and kind.
func writesOf[T api.Object](c *fake.Client, verb, kind, sub string) []T {
	var out []T
	for _, a := range c.Actions() {
		if a.Verb == verb && a.Kind == kind && a.Subresource == sub {
			out = append(out, a.Object.(T))
		}
	}
	return out
}

func get[T api.Object](t testing.TB, c *fake.Client, namespace, name string) T {
	t.Helper()
	var zero T
	o, err := c.Get(context.Background(), api.MustKindOf(zero), namespace, name)
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return o.(T)
}

func list[T api.Object](t testing.TB, c *fake.Client, namespace string) []T {
	t.Helper()
	var zero T
	objs, _, err := c.List(context.Background(), api.MustKindOf(zero), namespace, api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return listAs[T](objs)
}

func ptr[T any](v T) *T { return &v }

const ns = "lab"

// template is a pod template with app=web and the given image.
func template(image string) api.PodTemplateSpec {
	return api.PodTemplateSpec{
		ObjectMeta: api.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       api.PodSpec{Containers: []api.Container{{Name: "web", Image: image}}},
	}
}

// deployment is a defaulted Deployment web (as the API server stores it).
func deployment(replicas int32, image string) *api.Deployment {
	d := &api.Deployment{
		ObjectMeta: api.ObjectMeta{Name: "web", Namespace: ns, UID: "uid-web", Generation: 1},
		Spec: api.DeploymentSpec{
			Replicas: ptr(replicas),
			Selector: &api.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: template(image),
		},
	}
	api.SetTypeMeta(d)
	api.SetDefaults(d)
	return d
}

// rsFor is the ReplicaSet the deployment controller makes for d's
// template at revision, with replicas pods, all of them available.
func rsFor(d *api.Deployment, revision int64, replicas int32) *api.ReplicaSet {
	hash := ComputeHash(&d.Spec.Template)
	tmpl := api.Clone(d).Spec.Template
	tmpl.Labels[api.LabelPodTemplateHash] = hash
	rs := &api.ReplicaSet{
		ObjectMeta: api.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			UID:             "uid-rs-" + strconv.FormatInt(revision, 10),
			Generation:      1,
			Labels:          maps.Clone(tmpl.Labels),
			Annotations:     map[string]string{api.AnnotationRevision: strconv.FormatInt(revision, 10)},
			OwnerReferences: []api.OwnerReference{controllerRef(d)},
		},
		Spec: api.ReplicaSetSpec{
			Replicas: ptr(replicas),
			Selector: &api.LabelSelector{MatchLabels: map[string]string{"app": "web", api.LabelPodTemplateHash: hash}},
			Template: tmpl,
		},
		Status: api.ReplicaSetStatus{Replicas: replicas, FullyLabeledReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas, ObservedGeneration: 1},
	}
	api.SetTypeMeta(rs)
	api.SetDefaults(rs)
	return rs
}

// withImage returns a copy of d with a new image (a new template).
func withImage(d *api.Deployment, image string) *api.Deployment {
	d = api.Clone(d)
	d.Spec.Template.Spec.Containers[0].Image = image
	return d
}

// podOpt changes a pod fixture.
type podOpt func(*api.Pod)

// pod is a pod of rs (controlled by it, with its template labels), running
// and ready since t0-1h on node-1, unless opts say otherwise.
func pod(rs *api.ReplicaSet, name string, opts ...podOpt) *api.Pod {
	p := &api.Pod{
		ObjectMeta: api.ObjectMeta{
			Name:              name,
			Namespace:         rs.Namespace,
			UID:               "uid-" + name,
			Labels:            maps.Clone(rs.Spec.Template.Labels),
			OwnerReferences:   []api.OwnerReference{controllerRef(rs)},
			CreationTimestamp: api.NewTime(t0.Add(-2 * time.Hour)),
		},
		Spec: api.PodSpec{NodeName: "node-1", Containers: []api.Container{{Name: "web", Image: "nginx:1"}}},
		Status: api.PodStatus{
			Phase:      api.PodRunning,
			Conditions: []api.PodCondition{{Type: api.PodReady, Status: api.ConditionTrue, LastTransitionTime: api.NewTime(t0.Add(-time.Hour))}},
		},
	}
	api.SetTypeMeta(p)
	api.SetDefaults(p)
	for _, o := range opts {
		o(p)
	}
	return p
}

func unscheduled(p *api.Pod) { p.Spec.NodeName = ""; pending(p) }
func pending(p *api.Pod)     { p.Status.Phase = api.PodPending; notReady(p) }
func notReady(p *api.Pod)    { p.Status.Conditions[0].Status = api.ConditionFalse }
func orphan(p *api.Pod)      { p.OwnerReferences = nil }
func readyAt(at time.Time) podOpt {
	return func(p *api.Pod) { p.Status.Conditions[0].LastTransitionTime = api.NewTime(at) }
}
func createdAt(at time.Time) podOpt {
	return func(p *api.Pod) { p.CreationTimestamp = api.NewTime(at) }
}
func withRestarts(n int32) podOpt {
	return func(p *api.Pod) { p.Status.ContainerStatuses = []api.ContainerStatus{{Name: "web", RestartCount: n}} }
}
func withLabels(kv ...string) podOpt {
	return func(p *api.Pod) {
		p.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}
func terminating(p *api.Pod) { t := api.NewTime(t0); p.DeletionTimestamp = &t }
func phase(ph string) podOpt { return func(p *api.Pod) { p.Status.Phase = ph } }

func intOrPercent(s string) *api.IntOrString {
	v := intstr.Parse(s)
	return &v
}

// namesWithPrefix reports whether every name starts with prefix.
func namesWithPrefix(names []string, prefix string) bool {
	for _, n := range names {
		if !strings.HasPrefix(n, prefix) {
			return false
		}
	}
	return true
}

// testLogger writes controller lines to the test log (go test -v shows them).
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
