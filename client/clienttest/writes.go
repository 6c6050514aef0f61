package clienttest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The suite's create and update tests: server-owned fields, refusals,
// optimistic concurrency, the status subresource.

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
