// Package clienttest is the one test suite every client.Interface passes:
// client/fake (the in-memory client of unit tests) and apiserver.Local (the
// registry over a real bbolt store), so that the rules controllers rely on
// are tested once and the fake cannot drift from the server.
//
// The suite covers the verbs (Create, Get, Update, UpdateStatus, Delete,
// List, Watch, Bind, the scale subresource, traces) and the fields the
// server owns: what Create resets, what Update keeps, when generation and
// resourceVersion move, which error each refusal is. Parts only the real
// server does (namespace existence, service address allocation) run when
// the Target says it has them.
package clienttest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Target is the implementation under test.
type Target struct {
	// New returns an empty API in which namespace "default" exists; it
	// registers its own cleanup.
	New func(t testing.TB) client.Interface
	// ExpireHistory makes c's watch history begin after its current
	// revision: a watch from any earlier resourceVersion is Gone.
	ExpireHistory func(t testing.TB, c client.Interface)
	// Namespaces: objects may be created only in a namespace that exists
	// and is not terminating.
	Namespaces bool
	// ServiceAllocation: services get a cluster IP, and NodePort services
	// node ports, when they ask for none.
	ServiceAllocation bool
}

// NamespaceFinalizer is what the namespace controller calls on an empty
// Terminating namespace; both implementations have it.
type NamespaceFinalizer interface {
	FinalizeNamespace(ctx context.Context, name string) error
}

// Kinds the suite uses.
var (
	podKind        = api.MustKindOf(&api.Pod{})
	cmKind         = api.MustKindOf(&api.ConfigMap{})
	nsKind         = api.MustKindOf(&api.Namespace{})
	deploymentKind = api.MustKindOf(&api.Deployment{})
	traceKind      = api.MustKindOf(&api.PodTrace{})
)

// waitFor bounds every wait for a watch event.
const waitFor = 10 * time.Second

// Run runs the suite against tg.
func Run(t *testing.T, tg Target) {
	s := &suite{tg: tg}
	t.Run("CreateSetsServerFields", s.testCreate)
	t.Run("CreateRefusals", s.testCreateRefusals)
	t.Run("UpdateKeepsServerFields", s.testUpdate)
	t.Run("UpdateConcurrency", s.testUpdateConcurrency)
	t.Run("UpdateStatus", s.testUpdateStatus)
	t.Run("DeleteAtOnce", s.testDelete)
	t.Run("DeleteFinalizers", s.testDeleteFinalizers)
	t.Run("DeleteGracefulPod", s.testDeleteGracefulPod)
	t.Run("DeleteNamespace", s.testDeleteNamespace)
	t.Run("List", s.testList)
	t.Run("Watch", s.testWatch)
	t.Run("WatchSelectorTransitions", s.testWatchSelector)
	t.Run("WatchGone", s.testWatchGone)
	t.Run("WatchTimeout", s.testWatchTimeout)
	t.Run("Bind", s.testBind)
	t.Run("Scale", s.testScale)
	t.Run("Trace", s.testTrace)
	t.Run("Namespaces", s.testNamespaces)
	t.Run("ServiceAllocation", s.testServiceAllocation)
}

type suite struct{ tg Target }

func newPod(name string) *api.Pod {
	return &api.Pod{
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec:       api.PodSpec{Containers: []api.Container{{Name: "c", Image: "nginx:1.27"}}},
	}
}

func newConfigMap(name string, labels map[string]string) *api.ConfigMap {
	return &api.ConfigMap{
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Data:       map[string]string{"k": "v"},
	}
}

// Deployment is a valid Deployment fixture in namespace default: replicas
// pods of one nginx container, selected by app=NAME. Tests of every client
// use it, so they agree on what a minimal Deployment is.
func Deployment(name string, replicas int32) *api.Deployment {
	labels := map[string]string{"app": name}
	return &api.Deployment{
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"},
		Spec: api.DeploymentSpec{
			Replicas: &replicas,
			Selector: &api.LabelSelector{MatchLabels: labels},
			Template: api.PodTemplateSpec{
				ObjectMeta: api.ObjectMeta{Labels: labels},
				Spec:       api.PodSpec{Containers: []api.Container{{Name: "c", Image: "nginx:1.27"}}},
			},
		},
	}
}

func newNamespace(name string) *api.Namespace {
	return &api.Namespace{ObjectMeta: api.ObjectMeta{Name: name}}
}

func mustCreate[T api.Object](t testing.TB, c client.Interface, obj T) T {
	t.Helper()
	out, err := client.Create(t.Context(), c, obj)
	if err != nil {
		t.Fatalf("create %s %s: %v", api.MustKindOf(obj).Kind, api.KeyOf(obj), err)
	}
	return out
}

func mustGet[T api.Object](t testing.TB, c client.Interface, namespace, name string) T {
	t.Helper()
	out, err := client.Get[T](t.Context(), c, namespace, name)
	if err != nil {
		t.Fatalf("get %s: %v", api.Key(namespace, name), err)
	}
	return out
}

func mustBind(t testing.TB, c client.Interface, pod *api.Pod, node string) *api.Pod {
	t.Helper()
	b := &api.Binding{ObjectMeta: api.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}, Target: api.ObjectReference{Kind: "Node", Name: node}}
	if err := c.Bind(t.Context(), b); err != nil {
		t.Fatalf("bind %s to %s: %v", pod.Name, node, err)
	}
	return mustGet[*api.Pod](t, c, pod.Namespace, pod.Name)
}

// wantReason fails unless err has the given reason.
func wantReason(t testing.TB, what string, err error, want api.StatusReason) {
	t.Helper()
	if got := api.ReasonOf(err); got != want {
		t.Errorf("%s: error %v (reason %q), want reason %q", what, err, got, want)
	}
}

func rv(t testing.TB, o api.Object) int64 {
	t.Helper()
	return parseRV(t, o.GetObjectMeta().ResourceVersion)
}

func parseRV(t testing.TB, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q is not a number", s)
	}
	return n
}

func ptr[T any](v T) *T { return &v }
