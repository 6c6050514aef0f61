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
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

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

func (s *suite) testCreate(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()

	old := api.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	in := newPod("web")
	in.Namespace = ""
	in.UID = "11111111-1111-4111-8111-111111111111"
	in.CreationTimestamp = old
	in.DeletionTimestamp = &old
	in.Generation = 7
	in.Status = api.PodStatus{Phase: api.PodRunning, PodIP: "10.0.0.9", Message: "set by the client"}
	out := mustCreate(t, c, in)

	m := out.ObjectMeta
	if m.Namespace != "default" {
		t.Errorf("namespace = %q, want default", m.Namespace)
	}
	if m.UID == "" || m.UID == in.UID {
		t.Errorf("uid = %q, want a new one", m.UID)
	}
	if m.CreationTimestamp.IsZero() || m.CreationTimestamp.Time.Equal(old.Time) {
		t.Errorf("creationTimestamp = %v, want the time of the create", m.CreationTimestamp)
	}
	if m.DeletionTimestamp != nil {
		t.Errorf("deletionTimestamp = %v, want none", m.DeletionTimestamp)
	}
	if m.Generation != 1 {
		t.Errorf("generation = %d, want 1", m.Generation)
	}
	rv(t, out)
	if out.Status.Phase != api.PodPending || out.Status.PodIP != "" || out.Status.Message != "" {
		t.Errorf("status = %+v, want only phase Pending (a client's status is ignored)", out.Status)
	}
	if in.Status.Phase != api.PodRunning || in.UID != "11111111-1111-4111-8111-111111111111" {
		t.Error("Create changed the object passed in")
	}
	if got := mustGet[*api.Pod](t, c, "default", "web"); got.UID != m.UID || got.ResourceVersion != m.ResourceVersion || got.Status.Phase != api.PodPending {
		t.Errorf("get after create = %+v %+v, want what Create returned", got.ObjectMeta, got.Status)
	}

	ns := mustCreate(t, c, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: "team"}, Status: api.NamespaceStatus{Phase: api.NamespaceTerminating}})
	if !slices.Equal(ns.Spec.Finalizers, []string{"kubernetes"}) || ns.Status.Phase != api.NamespaceActive {
		t.Errorf("namespace: finalizers %v phase %q, want [kubernetes] Active", ns.Spec.Finalizers, ns.Status.Phase)
	}

	// A node's status is kept: its agent reports it as it registers.
	node := mustCreate(t, c, &api.Node{
		ObjectMeta: api.ObjectMeta{Name: "n1"},
		Status:     api.NodeStatus{Capacity: api.ResourceList{"cpu": resource.MustParse("4")}},
	})
	if q, ok := node.Status.Capacity["cpu"]; !ok || q.String() != "4" {
		t.Errorf("node capacity = %v, want cpu 4 kept", node.Status.Capacity)
	}

	g := newConfigMap("", nil)
	g.GenerateName = "cfg-"
	gen := mustCreate(t, c, g)
	if !strings.HasPrefix(gen.Name, "cfg-") || len(gen.Name) != len("cfg-")+5 {
		t.Errorf("generated name = %q, want cfg- and 5 characters", gen.Name)
	}
	if _, err := c.Get(ctx, cmKind, "default", gen.Name); err != nil {
		t.Errorf("get generated %s: %v", gen.Name, err)
	}
}

func (s *suite) testCreateRefusals(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	mustCreate(t, c, newPod("taken"))

	withRV := newPod("with-rv")
	withRV.ResourceVersion = "5"
	noContainers := newPod("empty")
	noContainers.Spec.Containers = nil
	cases := []struct {
		name string
		obj  api.Object
		want api.StatusReason
	}{
		{"taken name", newPod("taken"), api.ReasonAlreadyExists},
		{"resourceVersion set", withRV, api.ReasonBadRequest},
		{"no name", newPod(""), api.ReasonInvalid},
		{"invalid spec", noContainers, api.ReasonInvalid},
		{"internal kind", &api.PodTrace{ObjectMeta: api.ObjectMeta{Name: "taken", Namespace: "default"}}, api.ReasonMethodNotAllowd},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Create(ctx, tc.obj)
			wantReason(t, "create", err, tc.want)
		})
	}
	for _, name := range []string{"with-rv", "empty"} {
		if _, err := c.Get(ctx, podKind, "default", name); !api.IsNotFound(err) {
			t.Errorf("get %s after a refused create: %v, want NotFound", name, err)
		}
	}
}

func (s *suite) testUpdate(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()

	t.Run("status, metadata and generation", func(t *testing.T) {
		p := mustCreate(t, c, newPod("web"))
		st := api.Clone(p)
		st.Status.Phase = api.PodRunning
		p, err := client.UpdateStatus(ctx, c, st)
		if err != nil {
			t.Fatal(err)
		}

		in := api.Clone(p)
		in.Status.Phase = api.PodFailed // ignored: status subresource
		in.UID = ""                     // empty: no precondition
		in.CreationTimestamp = api.Time{}
		in.Labels["tier"] = "front"
		out, err := client.Update(ctx, c, in)
		if err != nil {
			t.Fatal(err)
		}
		if out.Status.Phase != api.PodRunning {
			t.Errorf("phase = %q, want Running kept", out.Status.Phase)
		}
		if out.UID != p.UID || !out.CreationTimestamp.Time.Equal(p.CreationTimestamp.Time) {
			t.Errorf("uid/creationTimestamp = %q/%v, want %q/%v kept", out.UID, out.CreationTimestamp, p.UID, p.CreationTimestamp)
		}
		if out.Generation != 1 || rv(t, out) <= rv(t, p) {
			t.Errorf("label change: generation %d rv %s (was %s), want generation 1 and a newer rv", out.Generation, out.ResourceVersion, p.ResourceVersion)
		}

		same, err := client.Update(ctx, c, api.Clone(out))
		if err != nil {
			t.Fatal(err)
		}
		if same.ResourceVersion != out.ResourceVersion {
			t.Errorf("no-op update moved resourceVersion %s -> %s", out.ResourceVersion, same.ResourceVersion)
		}

		d := mustCreate(t, c, Deployment("app", 1))
		d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
		d2, err := client.Update(ctx, c, d)
		if err != nil {
			t.Fatal(err)
		}
		if d2.Generation != 2 {
			t.Errorf("spec change: generation %d, want 2", d2.Generation)
		}
	})

	t.Run("bound pod keeps its node", func(t *testing.T) {
		p := mustCreate(t, c, newPod("bound"))
		p = mustBind(t, c, p, "node-1")
		in := api.Clone(p)
		in.Spec.NodeName = "" // a client re-applying its manifest
		in.Labels["x"] = "y"
		out, err := client.Update(ctx, c, in)
		if err != nil {
			t.Fatal(err)
		}
		if out.Spec.NodeName != "node-1" {
			t.Errorf("spec.nodeName = %q, want node-1 kept", out.Spec.NodeName)
		}
	})

	t.Run("service keeps cluster IPs and node ports", func(t *testing.T) {
		svc := mustCreate(t, c, &api.Service{
			ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: api.ServiceSpec{
				Type: "NodePort", Selector: map[string]string{"app": "web"},
				ClusterIP: "10.96.0.42", ClusterIPs: []string{"10.96.0.42"},
				Ports: []api.ServicePort{{Name: "http", Port: 80, NodePort: 30080}},
			},
		})
		in := api.Clone(svc)
		in.Spec.ClusterIP, in.Spec.ClusterIPs = "", nil
		in.Spec.Ports[0].NodePort = 0
		in.Labels = map[string]string{"x": "y"}
		out, err := client.Update(ctx, c, in)
		if err != nil {
			t.Fatal(err)
		}
		if out.Spec.ClusterIP != "10.96.0.42" || !slices.Equal(out.Spec.ClusterIPs, []string{"10.96.0.42"}) {
			t.Errorf("clusterIP %q clusterIPs %v, want 10.96.0.42 kept", out.Spec.ClusterIP, out.Spec.ClusterIPs)
		}
		if out.Spec.Ports[0].NodePort != 30080 {
			t.Errorf("nodePort = %d, want 30080 kept", out.Spec.Ports[0].NodePort)
		}
	})

	t.Run("namespace keeps its finalizers", func(t *testing.T) {
		ns := mustCreate(t, c, newNamespace("keep"))
		in := api.Clone(ns)
		in.Spec.Finalizers = nil
		in.Labels = map[string]string{"team": "a"}
		out, err := client.Update(ctx, c, in)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(out.Spec.Finalizers, []string{"kubernetes"}) {
			t.Errorf("spec.finalizers = %v, want [kubernetes] kept", out.Spec.Finalizers)
		}
	})

	t.Run("refusals change nothing", func(t *testing.T) {
		p := mustCreate(t, c, newPod("refused"))
		bad := api.Clone(p)
		bad.Spec.Containers = nil
		_, err := client.Update(ctx, c, bad)
		wantReason(t, "invalid update", err, api.ReasonInvalid)
		_, err = client.Update(ctx, c, newPod("missing"))
		wantReason(t, "update of a missing object", err, api.ReasonNotFound)
		_, err = c.Update(ctx, newPod(""))
		wantReason(t, "update without a name", err, api.ReasonInvalid)
		if got := mustGet[*api.Pod](t, c, "default", "refused"); got.ResourceVersion != p.ResourceVersion {
			t.Errorf("refused update moved resourceVersion %s -> %s", p.ResourceVersion, got.ResourceVersion)
		}
	})
}

func (s *suite) testUpdateConcurrency(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	cm := mustCreate(t, c, newConfigMap("cfg", nil))

	fresh := api.Clone(cm)
	fresh.Data["k"] = "v2"
	cur, err := client.Update(ctx, c, fresh)
	if err != nil {
		t.Fatal(err)
	}

	staleRV := api.Clone(cm)
	staleRV.Data["k"] = "lost"
	wrongUID := api.Clone(cur)
	wrongUID.UID = "22222222-2222-4222-8222-222222222222"
	cases := []struct {
		name string
		obj  *api.ConfigMap
	}{
		{"stale resourceVersion", staleRV},
		{"wrong uid", wrongUID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Update(ctx, c, tc.obj)
			wantReason(t, "update", err, api.ReasonConflict)
		})
	}
	if got := mustGet[*api.ConfigMap](t, c, "default", "cfg"); got.Data["k"] != "v2" {
		t.Errorf("data = %v after conflicts, want k=v2", got.Data)
	}

	blind := newConfigMap("cfg", nil) // no resourceVersion: unconditional
	blind.Data["k"] = "v3"
	out, err := client.Update(ctx, c, blind)
	if err != nil {
		t.Fatalf("update without resourceVersion: %v", err)
	}
	if out.Data["k"] != "v3" || rv(t, out) <= rv(t, cur) {
		t.Errorf("unconditional update: data %v rv %s", out.Data, out.ResourceVersion)
	}
}

func (s *suite) testUpdateStatus(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	p := mustCreate(t, c, newPod("web"))

	in := api.Clone(p)
	in.Status.Phase = api.PodRunning
	in.Status.PodIP = "10.244.0.5"
	in.Spec.Containers[0].Image = "nginx:9" // ignored
	in.Labels["ignored"] = "yes"            // ignored
	out, err := client.UpdateStatus(ctx, c, in)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status.Phase != api.PodRunning || out.Status.PodIP != "10.244.0.5" {
		t.Errorf("status = %+v, want Running 10.244.0.5", out.Status)
	}
	if out.Spec.Containers[0].Image != "nginx:1.27" || out.Labels["ignored"] != "" || out.Generation != 1 {
		t.Errorf("UpdateStatus changed spec or metadata: image %q labels %v generation %d", out.Spec.Containers[0].Image, out.Labels, out.Generation)
	}

	_, err = client.UpdateStatus(ctx, c, p) // p has the old resourceVersion
	wantReason(t, "stale status update", err, api.ReasonConflict)
	_, err = client.UpdateStatus(ctx, c, newPod("missing"))
	wantReason(t, "status of a missing pod", err, api.ReasonNotFound)
	_, err = client.UpdateStatus(ctx, c, mustCreate(t, c, newConfigMap("cfg", nil)))
	wantReason(t, "status of a kind without one", err, api.ReasonNotFound)
}

func (s *suite) testDelete(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	cm := mustCreate(t, c, newConfigMap("cfg", nil))
	wrong := "33333333-3333-4333-8333-333333333333"
	stale := cm.ResourceVersion + "0" // another revision
	neg := int64(-1)

	cases := []struct {
		name string
		opts api.DeleteOptions
		want api.StatusReason
	}{
		{"uid precondition", api.DeleteOptions{Preconditions: &api.Preconditions{UID: &wrong}}, api.ReasonConflict},
		{"resourceVersion precondition", api.DeleteOptions{Preconditions: &api.Preconditions{ResourceVersion: &stale}}, api.ReasonConflict},
		{"orphan", api.DeleteOptions{PropagationPolicy: "Orphan"}, api.ReasonBadRequest},
		{"negative grace", api.DeleteOptions{GracePeriodSeconds: &neg}, api.ReasonBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Delete(ctx, cmKind, "default", "cfg", tc.opts)
			wantReason(t, "delete", err, tc.want)
		})
	}
	if _, err := c.Get(ctx, cmKind, "default", "cfg"); err != nil {
		t.Fatalf("get after refused deletes: %v", err)
	}

	if err := c.Delete(ctx, cmKind, "default", "cfg", api.DeleteOptions{PropagationPolicy: "Background", Preconditions: &api.Preconditions{UID: &cm.UID}}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.Get(ctx, cmKind, "default", "cfg"); !api.IsNotFound(err) {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
	wantReason(t, "second delete", c.Delete(ctx, cmKind, "default", "cfg", api.DeleteOptions{}), api.ReasonNotFound)
	wantReason(t, "delete namespace default", c.Delete(ctx, nsKind, "", "default", api.DeleteOptions{}), api.ReasonForbidden)

	// An unbound pod has nothing to wait for.
	mustCreate(t, c, newPod("pending"))
	if err := c.Delete(ctx, podKind, "default", "pending", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, podKind, "default", "pending"); !api.IsNotFound(err) {
		t.Errorf("unbound pod after delete: %v, want NotFound", err)
	}
}

func (s *suite) testDeleteFinalizers(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	in := newConfigMap("held", nil)
	in.Finalizers = []string{"example.com/hold"}
	mustCreate(t, c, in)

	for i := range 2 { // the second delete changes nothing
		if err := c.Delete(ctx, cmKind, "default", "held", api.DeleteOptions{}); err != nil {
			t.Fatalf("delete %d: %v", i+1, err)
		}
	}
	cm := mustGet[*api.ConfigMap](t, c, "default", "held")
	if cm.DeletionTimestamp == nil {
		t.Fatal("deletionTimestamp not set on an object with finalizers")
	}

	// An update keeps the deletionTimestamp; clearing the last finalizer removes the object.
	upd := api.Clone(cm)
	upd.DeletionTimestamp = nil
	upd.Labels = map[string]string{"still": "here"}
	cm, err := client.Update(ctx, c, upd)
	if err != nil {
		t.Fatal(err)
	}
	if cm.DeletionTimestamp == nil {
		t.Error("update cleared deletionTimestamp")
	}
	cm.Finalizers = nil
	if _, err := client.Update(ctx, c, cm); err != nil {
		t.Fatalf("clear finalizers: %v", err)
	}
	if _, err := c.Get(ctx, cmKind, "default", "held"); !api.IsNotFound(err) {
		t.Errorf("get after the last finalizer went: %v, want NotFound", err)
	}
}

func (s *suite) testDeleteGracefulPod(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	cases := []struct {
		name      string
		grace     *int64
		wantGrace int64
	}{
		{"default grace", nil, api.DefaultTerminationGracePeriod},
		{"grace from options", ptr(int64(5)), 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			p := mustBind(t, c, mustCreate(t, c, newPod(name)), "node-1")
			if err := c.Delete(ctx, podKind, "default", name, api.DeleteOptions{GracePeriodSeconds: tc.grace}); err != nil {
				t.Fatal(err)
			}
			got := mustGet[*api.Pod](t, c, "default", name)
			if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != tc.wantGrace {
				t.Fatalf("deletionTimestamp %v deletionGracePeriodSeconds %v, want set and %d", got.DeletionTimestamp, got.DeletionGracePeriodSeconds, tc.wantGrace)
			}
			if got.UID != p.UID {
				t.Errorf("uid changed")
			}
			// The node, once the pod stopped, deletes with grace 0.
			if err := c.Delete(ctx, podKind, "default", name, api.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Get(ctx, podKind, "default", name); !api.IsNotFound(err) {
				t.Errorf("get after delete with grace 0: %v, want NotFound", err)
			}
		})
	}
}

func (s *suite) testDeleteNamespace(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	fin, ok := c.(NamespaceFinalizer)
	if !ok {
		t.Fatalf("%T has no FinalizeNamespace", c)
	}
	mustCreate(t, c, newNamespace("team"))
	if err := c.Delete(ctx, nsKind, "", "team", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := mustGet[*api.Namespace](t, c, "", "team")
	if ns.DeletionTimestamp == nil || ns.Status.Phase != api.NamespaceTerminating {
		t.Fatalf("deleted namespace: deletionTimestamp %v phase %q, want set and Terminating", ns.DeletionTimestamp, ns.Status.Phase)
	}
	if err := fin.FinalizeNamespace(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, nsKind, "", "team"); !api.IsNotFound(err) {
		t.Errorf("get after FinalizeNamespace: %v, want NotFound", err)
	}
}

func (s *suite) testList(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	mustCreate(t, c, newNamespace("other"))
	for _, p := range []struct{ ns, name, app string }{
		{"default", "a", "web"}, {"default", "b", "db"}, {"other", "c", "web"},
	} {
		pod := newPod(p.name)
		pod.Namespace, pod.Labels = p.ns, map[string]string{"app": p.app}
		mustCreate(t, c, pod)
	}
	mustBind(t, c, mustGet[*api.Pod](t, c, "default", "b"), "node-1")
	last := mustCreate(t, c, newConfigMap("unrelated", nil))

	cases := []struct {
		name, ns string
		opts     api.ListOptions
		want     []string
	}{
		{"one namespace", "default", api.ListOptions{}, []string{"default/a", "default/b"}},
		{"all namespaces", "", api.ListOptions{}, []string{"default/a", "default/b", "other/c"}},
		{"label selector", "", api.ListOptions{LabelSelector: "app=web"}, []string{"default/a", "other/c"}},
		{"set selector", "", api.ListOptions{LabelSelector: "app in (db),app!=web"}, []string{"default/b"}},
		{"field selector name", "", api.ListOptions{FieldSelector: "metadata.name=c"}, []string{"other/c"}},
		{"field selector node", "", api.ListOptions{FieldSelector: "spec.nodeName=node-1"}, []string{"default/b"}},
		{"unscheduled", "default", api.ListOptions{FieldSelector: "spec.nodeName="}, []string{"default/a"}},
		{"both", "", api.ListOptions{LabelSelector: "app=web", FieldSelector: "metadata.namespace=default"}, []string{"default/a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			items, listRV, err := c.List(ctx, podKind, tc.ns, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range items {
				got = append(got, api.KeyOf(o))
				if o.GetTypeMeta().Kind != "Pod" {
					t.Errorf("%s: kind %q", api.KeyOf(o), o.GetTypeMeta().Kind)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("list = %v, want %v", got, tc.want)
			}
			if parseRV(t, listRV) < rv(t, last) {
				t.Errorf("list resourceVersion %s is older than the last write %s", listRV, last.ResourceVersion)
			}
		})
	}
	for _, opts := range []api.ListOptions{{LabelSelector: "app in (("}, {FieldSelector: "spec.unknown=x"}} {
		_, _, err := c.List(ctx, podKind, "", opts)
		wantReason(t, "bad selector "+opts.LabelSelector+opts.FieldSelector, err, api.ReasonBadRequest)
	}
}

// next returns the watch's next event, failing after waitFor.
func next(t testing.TB, w client.Watcher) client.Event {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatalf("watch ended early: %v", w.Err())
		}
		return ev
	case <-time.After(waitFor):
		t.Fatal("no watch event")
	}
	return client.Event{}
}

func wantEvent(t testing.TB, w client.Watcher, typ api.WatchEventType, key string) client.Event {
	t.Helper()
	ev := next(t, w)
	if ev.Type != typ || ev.Object == nil || api.KeyOf(ev.Object) != key {
		got := ""
		if ev.Object != nil {
			got = api.KeyOf(ev.Object)
		}
		t.Fatalf("event %s %s, want %s %s", ev.Type, got, typ, key)
	}
	return ev
}

// wantEnd waits for the watch to end and returns its Err.
func wantEnd(t testing.TB, w client.Watcher) error {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				return w.Err()
			}
			t.Errorf("unexpected event %s before the end", ev.Type)
		case <-deadline:
			t.Fatal("watch did not end")
		}
	}
}

func (s *suite) testWatch(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	a := mustCreate(t, c, newConfigMap("a", nil))
	mustCreate(t, c, newConfigMap("b", nil))

	w, err := c.Watch(ctx, cmKind, "default", api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	wantEvent(t, w, api.Added, "default/a")
	wantEvent(t, w, api.Added, "default/b")

	a.Data["k"] = "v2"
	a2, err := client.Update(ctx, c, a)
	if err != nil {
		t.Fatal(err)
	}
	ev := wantEvent(t, w, api.Modified, "default/a")
	if ev.Object.GetObjectMeta().ResourceVersion != a2.ResourceVersion || ev.Object.GetTypeMeta().Kind != "ConfigMap" {
		t.Errorf("modified event: rv %s kind %q, want %s ConfigMap", ev.Object.GetObjectMeta().ResourceVersion, ev.Object.GetTypeMeta().Kind, a2.ResourceVersion)
	}
	if err := c.Delete(ctx, cmKind, "default", "b", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	del := wantEvent(t, w, api.Deleted, "default/b")
	mustCreate(t, c, newConfigMap("c", nil))
	wantEvent(t, w, api.Added, "default/c")
	w.Stop()
	w.Stop() // safe twice
	if err := wantEnd(t, w); err != nil {
		t.Errorf("Err after Stop = %v, want nil", err)
	}

	// Resume after the delete: only what came later.
	r, err := c.Watch(ctx, cmKind, "", api.ListOptions{ResourceVersion: del.Object.GetObjectMeta().ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	wantEvent(t, r, api.Added, "default/c")

	// Other namespaces and kinds are not seen.
	mustCreate(t, c, newNamespace("other"))
	o := newConfigMap("elsewhere", nil)
	o.Namespace = "other"
	ns, err := c.Watch(ctx, cmKind, "default", api.ListOptions{ResourceVersion: del.Object.GetObjectMeta().ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Stop()
	mustCreate(t, c, o)
	mustCreate(t, c, newPod("p"))
	mustCreate(t, c, newConfigMap("d", nil))
	wantEvent(t, ns, api.Added, "default/c")
	wantEvent(t, ns, api.Added, "default/d")
	wantEvent(t, r, api.Added, "other/elsewhere")

	_, err = c.Watch(ctx, cmKind, "", api.ListOptions{ResourceVersion: "abc"})
	wantReason(t, "watch from a bad resourceVersion", err, api.ReasonBadRequest)
}

func (s *suite) testWatchSelector(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	a := mustCreate(t, c, newConfigMap("a", map[string]string{"app": "web"}))
	mustCreate(t, c, newConfigMap("b", map[string]string{"app": "db"}))

	w, err := c.Watch(ctx, cmKind, "", api.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	wantEvent(t, w, api.Added, "default/a")

	a.Labels["app"] = "db"
	if _, err := client.Update(ctx, c, a); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, w, api.Deleted, "default/a") // stopped matching

	b := mustGet[*api.ConfigMap](t, c, "default", "b")
	b.Labels["app"] = "web"
	if _, err := client.Update(ctx, c, b); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, w, api.Added, "default/b") // started matching
	mustCreate(t, c, newConfigMap("c", map[string]string{"app": "web"}))
	wantEvent(t, w, api.Added, "default/c")
}

func (s *suite) testWatchGone(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	first := mustCreate(t, c, newConfigMap("a", nil))
	mustCreate(t, c, newConfigMap("b", nil)) // first is now an earlier revision
	s.tg.ExpireHistory(t, c)

	w, err := c.Watch(ctx, cmKind, "", api.ListOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		t.Fatalf("watch from a compacted revision: %v, want a watcher that ends with Gone", err)
	}
	defer w.Stop()
	if err := wantEnd(t, w); !api.IsGone(err) {
		t.Errorf("Err = %v, want Gone", err)
	}

	// Listing again gives a revision to watch from.
	_, listRV, err := c.List(ctx, cmKind, "", api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Watch(ctx, cmKind, "", api.ListOptions{ResourceVersion: listRV})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	mustCreate(t, c, newConfigMap("c", nil))
	wantEvent(t, r, api.Added, "default/c")
}

func (s *suite) testWatchTimeout(t *testing.T) {
	c := s.tg.New(t)
	w, err := c.Watch(t.Context(), cmKind, "", api.ListOptions{TimeoutSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := wantEnd(t, w); err != nil {
		t.Errorf("Err after the timeout = %v, want nil (a normal end)", err)
	}
}

func (s *suite) testBind(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	p := mustCreate(t, c, newPod("web"))
	got := mustBind(t, c, p, "node-1")
	if got.Spec.NodeName != "node-1" {
		t.Errorf("spec.nodeName = %q, want node-1", got.Spec.NodeName)
	}
	scheduled := false
	for _, cond := range got.Status.Conditions {
		scheduled = scheduled || (cond.Type == api.PodScheduled && cond.Status == api.ConditionTrue)
	}
	if !scheduled {
		t.Errorf("conditions = %+v, want PodScheduled True", got.Status.Conditions)
	}

	held := newPod("held")
	held.Finalizers = []string{"example.com/hold"}
	mustCreate(t, c, held)
	if err := c.Delete(ctx, podKind, "default", "held", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, c, newPod("other"))

	bind := func(name, node, kind, uid string) *api.Binding {
		return &api.Binding{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default", UID: uid}, Target: api.ObjectReference{Kind: kind, Name: node}}
	}
	cases := []struct {
		name string
		b    *api.Binding
		want api.StatusReason
	}{
		{"already bound", bind("web", "node-2", "Node", ""), api.ReasonConflict},
		{"being deleted", bind("held", "node-2", "Node", ""), api.ReasonConflict},
		{"wrong uid", bind("other", "node-2", "Node", "44444444-4444-4444-8444-444444444444"), api.ReasonConflict},
		{"missing pod", bind("missing", "node-2", "Node", ""), api.ReasonNotFound},
		{"no node", bind("other", "", "Node", ""), api.ReasonInvalid},
		{"not a node", bind("other", "node-2", "Pod", ""), api.ReasonInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantReason(t, "bind", c.Bind(ctx, tc.b), tc.want)
		})
	}
	if got := mustGet[*api.Pod](t, c, "default", "other"); got.Spec.NodeName != "" {
		t.Errorf("refused binds bound the pod to %q", got.Spec.NodeName)
	}
}

func (s *suite) testScale(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	d := mustCreate(t, c, Deployment("app", 2))

	sc, err := c.GetScale(ctx, deploymentKind, "default", "app")
	if err != nil {
		t.Fatal(err)
	}
	if sc.Spec.Replicas != 2 || sc.Status.Selector != "app=app" || sc.ResourceVersion != d.ResourceVersion || sc.Kind != "Scale" {
		t.Errorf("scale = %+v, want 2 replicas, selector app=app, rv %s", sc, d.ResourceVersion)
	}

	sc.Spec.Replicas = 5
	up, err := c.UpdateScale(ctx, deploymentKind, "default", "app", sc)
	if err != nil {
		t.Fatal(err)
	}
	got := mustGet[*api.Deployment](t, c, "default", "app")
	if up.Spec.Replicas != 5 || *got.Spec.Replicas != 5 || got.Generation != 2 || up.ResourceVersion != got.ResourceVersion {
		t.Errorf("after scale: scale %d, deployment %d generation %d", up.Spec.Replicas, *got.Spec.Replicas, got.Generation)
	}
	same, err := c.UpdateScale(ctx, deploymentKind, "default", "app", &api.Scale{Spec: api.ScaleSpec{Replicas: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if same.ResourceVersion != up.ResourceVersion {
		t.Errorf("scale to the same count moved resourceVersion %s -> %s", up.ResourceVersion, same.ResourceVersion)
	}

	cases := []struct {
		name string
		kind *api.Kind
		obj  string
		s    *api.Scale
		want api.StatusReason
	}{
		{"stale", deploymentKind, "app", sc, api.ReasonConflict},
		{"negative", deploymentKind, "app", &api.Scale{Spec: api.ScaleSpec{Replicas: -1}}, api.ReasonInvalid},
		{"other name", deploymentKind, "app", &api.Scale{ObjectMeta: api.ObjectMeta{Name: "x"}, Spec: api.ScaleSpec{Replicas: 1}}, api.ReasonBadRequest},
		{"missing", deploymentKind, "missing", &api.Scale{Spec: api.ScaleSpec{Replicas: 1}}, api.ReasonNotFound},
		{"not scalable", cmKind, "cfg", &api.Scale{Spec: api.ScaleSpec{Replicas: 1}}, api.ReasonNotFound},
	}
	mustCreate(t, c, newConfigMap("cfg", nil))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.UpdateScale(ctx, tc.kind, "default", tc.obj, tc.s)
			wantReason(t, "update scale", err, tc.want)
		})
	}
	_, err = c.GetScale(ctx, cmKind, "default", "cfg")
	wantReason(t, "scale of a config map", err, api.ReasonNotFound)
	if got := mustGet[*api.Deployment](t, c, "default", "app"); *got.Spec.Replicas != 5 {
		t.Errorf("refused scales changed replicas to %d", *got.Spec.Replicas)
	}
}

func (s *suite) testTrace(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	p := mustCreate(t, c, newPod("web"))

	tr, err := c.GetTrace(ctx, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Spans) != 1 || tr.Spans[0].Component != "apiserver" || tr.Spans[0].Step != "create" {
		t.Fatalf("new pod's trace = %+v, want the apiserver's create span", tr.Spans)
	}
	if tr.Name != "web" || tr.Namespace != "default" || tr.Kind != "PodTrace" || len(tr.OwnerReferences) != 1 || tr.OwnerReferences[0].UID != p.UID {
		t.Errorf("trace object = %+v, want web in default owned by the pod", tr.ObjectMeta)
	}

	span := api.TraceSpan{Component: "scheduler", Step: "bind", Message: "bound"}
	if err := c.AddTrace(ctx, "default", "web", span); err != nil {
		t.Fatal(err)
	}
	tr, err = c.GetTrace(ctx, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Spans) != 2 || tr.Spans[1].Component != "scheduler" || tr.Spans[1].Message != "bound" {
		t.Errorf("spans = %+v, want the create span then scheduler/bind", tr.Spans)
	}
	if o, err := c.Get(ctx, traceKind, "default", "web"); err != nil || len(o.(*api.PodTrace).Spans) != 2 {
		t.Errorf("get podtrace: %v, %v", o, err)
	}

	wantReason(t, "span without component", c.AddTrace(ctx, "default", "web", api.TraceSpan{Step: "x"}), api.ReasonInvalid)
	wantReason(t, "trace of a missing pod", c.AddTrace(ctx, "default", "missing", span), api.ReasonNotFound)
	if err := c.Delete(ctx, podKind, "default", "web", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetTrace(ctx, "default", "web")
	wantReason(t, "trace of a deleted pod", err, api.ReasonNotFound)

	// A new pod of the same name starts a fresh trace.
	mustCreate(t, c, newPod("web"))
	if tr, err := c.GetTrace(ctx, "default", "web"); err != nil || len(tr.Spans) != 1 {
		t.Errorf("trace of the new pod: %v, %v; want only its create span", tr, err)
	}
}

func (s *suite) testNamespaces(t *testing.T) {
	if !s.tg.Namespaces {
		t.Skip("this implementation does not check namespaces")
	}
	c := s.tg.New(t)
	ctx := t.Context()
	p := newPod("web")
	p.Namespace = "nowhere"
	_, err := c.Create(ctx, p)
	wantReason(t, "create in a missing namespace", err, api.ReasonNotFound)

	mustCreate(t, c, newNamespace("going"))
	if err := c.Delete(ctx, nsKind, "", "going", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p.Namespace = "going"
	_, err = c.Create(ctx, p)
	wantReason(t, "create in a terminating namespace", err, api.ReasonForbidden)
}

func (s *suite) testServiceAllocation(t *testing.T) {
	if !s.tg.ServiceAllocation {
		t.Skip("this implementation allocates no service addresses")
	}
	c := s.tg.New(t)
	svc := mustCreate(t, c, &api.Service{
		ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       api.ServiceSpec{Type: "NodePort", Selector: map[string]string{"app": "web"}, Ports: []api.ServicePort{{Port: 80}}},
	})
	if svc.Spec.ClusterIP == "" || !slices.Equal(svc.Spec.ClusterIPs, []string{svc.Spec.ClusterIP}) {
		t.Errorf("clusterIP %q clusterIPs %v, want one allocated", svc.Spec.ClusterIP, svc.Spec.ClusterIPs)
	}
	if np := svc.Spec.Ports[0].NodePort; np < 30000 || np > 32767 {
		t.Errorf("nodePort = %d, want one in 30000-32767", np)
	}
	dup := &api.Service{
		ObjectMeta: api.ObjectMeta{Name: "dup", Namespace: "default"},
		Spec:       api.ServiceSpec{ClusterIP: svc.Spec.ClusterIP, Ports: []api.ServicePort{{Port: 80}}},
	}
	_, err := c.Create(t.Context(), dup)
	wantReason(t, "a taken cluster IP", err, api.ReasonInvalid)
}

func ptr[T any](v T) *T { return &v }
