package clienttest

import (
	"slices"
	"testing"

	"skiff.dev/skiff/api"
)

// The suite's subresource and cluster-wide tests: binding, scale,
// traces, namespaces, Service addresses.

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
