package controllers

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

func newEPController(t testing.TB, c *fake.Client) *EndpointsController {
	return NewEndpointsController(c, fakeLister{c, serviceKind()}, fakeLister{c, podKind()}, fakeLister{c, endpointsKind()}, testLogger(t))
}

func epService(name string, sel map[string]string, ports ...api.ServicePort) *api.Service {
	s := &api.Service{Spec: api.ServiceSpec{Selector: sel, Ports: ports}}
	s.Name, s.Namespace, s.UID = name, ns, "svc-"+name
	return s
}

// epPod is a running pod with app=web on node-1; ready says whether its
// Ready condition is True. ports are named container ports "name=number".
func epPod(name, ip string, ready bool, ports ...api.ContainerPort) *api.Pod {
	p := &api.Pod{}
	p.Name, p.Namespace, p.UID = name, ns, "uid-"+name
	p.Labels = map[string]string{"app": "web"}
	p.Spec.NodeName = "node-1"
	p.Spec.Containers = []api.Container{{Name: "c", Image: "nginx", Ports: ports}}
	p.Status.Phase = api.PodRunning
	p.Status.PodIP = ip
	st := api.ConditionFalse
	if ready {
		st = api.ConditionTrue
	}
	p.Status.Conditions = []api.PodCondition{{Type: api.PodReady, Status: st}}
	return p
}

func addr(p *api.Pod) api.EndpointAddress {
	return api.EndpointAddress{
		IP:        p.Status.PodIP,
		NodeName:  ptr(p.Spec.NodeName),
		TargetRef: &api.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
	}
}

func TestEndpointsReconcile(t *testing.T) {
	web := map[string]string{"app": "web"}
	httpNamed := api.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}
	a := epPod("a", "10.244.0.3", true, api.ContainerPort{Name: "http", ContainerPort: 8080})
	b := epPod("b", "10.244.0.2", true, api.ContainerPort{Name: "http", ContainerPort: 8080})
	c := epPod("c", "10.244.0.4", false, api.ContainerPort{Name: "http", ContainerPort: 8080})
	d := epPod("d", "10.244.0.5", true, api.ContainerPort{Name: "http", ContainerPort: 9090}) // same name, another number
	deleting := epPod("deleting", "10.244.0.6", true)
	deleting.DeletionTimestamp = &api.Time{Time: t0}
	done := epPod("done", "10.244.0.7", false)
	done.Status.Phase = api.PodSucceeded
	noIP := epPod("noip", "", false)
	other := epPod("other", "10.244.0.8", true)
	other.Labels = map[string]string{"app": "db"}
	unnamed := epPod("unnamed", "10.244.0.9", true) // lacks the named port

	tests := []struct {
		name string
		svc  *api.Service
		pods []*api.Pod
		want []api.EndpointSubset
	}{
		{
			name: "target port by number, ready and not ready",
			svc:  epService("web", web, api.ServicePort{Port: 80, TargetPort: intstr.FromInt32(8080)}),
			pods: []*api.Pod{a, b, c, deleting, done, noIP, other},
			want: []api.EndpointSubset{{
				Addresses:         []api.EndpointAddress{addr(b), addr(a)},
				NotReadyAddresses: []api.EndpointAddress{addr(c)},
				Ports:             []api.EndpointPort{{Port: 8080, Protocol: "TCP"}},
			}},
		},
		{
			name: "target port defaults to port",
			svc:  epService("web", web, api.ServicePort{Name: "x", Port: 80, Protocol: "UDP"}),
			pods: []*api.Pod{a},
			want: []api.EndpointSubset{{
				Addresses: []api.EndpointAddress{addr(a)},
				Ports:     []api.EndpointPort{{Name: "x", Port: 80, Protocol: "UDP"}},
			}},
		},
		{
			name: "named target port resolved per pod, grouped by ports",
			svc:  epService("web", web, httpNamed),
			pods: []*api.Pod{a, b, d, unnamed},
			want: []api.EndpointSubset{
				{Addresses: []api.EndpointAddress{addr(b), addr(a)}, Ports: []api.EndpointPort{{Name: "http", Port: 8080, Protocol: "TCP"}}},
				{Addresses: []api.EndpointAddress{addr(d)}, Ports: []api.EndpointPort{{Name: "http", Port: 9090, Protocol: "TCP"}}},
			},
		},
		{
			name: "several ports",
			svc:  epService("web", web, httpNamed, api.ServicePort{Name: "metrics", Port: 9100, TargetPort: intstr.FromInt32(9100)}),
			pods: []*api.Pod{a},
			want: []api.EndpointSubset{{
				Addresses: []api.EndpointAddress{addr(a)},
				Ports:     []api.EndpointPort{{Name: "http", Port: 8080, Protocol: "TCP"}, {Name: "metrics", Port: 9100, Protocol: "TCP"}},
			}},
		},
		{
			name: "no pods: endpoints with no subsets",
			svc:  epService("web", web, httpNamed),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []api.Object{tt.svc}
			for _, p := range tt.pods {
				objs = append(objs, p)
			}
			fc := fake.New(objs...)
			r := newEPController(t, fc)
			if err := r.Reconcile(t.Context(), api.KeyOf(tt.svc)); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			if got := writesOf[*api.Endpoints](fc, "create", "Endpoints", ""); len(got) != 1 {
				t.Fatalf("created %d endpoints, want 1; writes %v", len(got), writes(fc))
			}
			ep := get[*api.Endpoints](t, fc, ns, tt.svc.Name)
			if !reflect.DeepEqual(ep.Subsets, tt.want) {
				t.Errorf("subsets\n got %+v\nwant %+v", ep.Subsets, tt.want)
			}
			// Repeating writes nothing.
			fc.ClearActions()
			if err := r.Reconcile(t.Context(), api.KeyOf(tt.svc)); err != nil {
				t.Fatalf("second reconcile: %v", err)
			}
			if w := writes(fc); len(w) != 0 {
				t.Errorf("second reconcile wrote %v", w)
			}
		})
	}
}

func TestEndpointsFollowReadiness(t *testing.T) {
	svc := epService("web", map[string]string{"app": "web"}, api.ServicePort{Port: 80})
	a := epPod("a", "10.244.0.2", true)
	fc := fake.New(svc, a)
	r := newEPController(t, fc)
	key := api.KeyOf(svc)
	if err := r.Reconcile(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	// The pod stops being ready: it moves to notReadyAddresses.
	p := get[*api.Pod](t, fc, ns, "a")
	p.Status.Conditions[0].Status = api.ConditionFalse
	if _, err := fc.UpdateStatus(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if err := r.Reconcile(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	ep := get[*api.Endpoints](t, fc, ns, "web")
	if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 0 || len(ep.Subsets[0].NotReadyAddresses) != 1 {
		t.Fatalf("subsets %+v, want the pod not ready", ep.Subsets)
	}
	// The pod is deleted: the subsets empty out.
	if err := fc.Delete(t.Context(), podKind(), ns, "a", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Reconcile(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if ep := get[*api.Endpoints](t, fc, ns, "web"); len(ep.Subsets) != 0 {
		t.Fatalf("subsets %+v, want none", ep.Subsets)
	}
	// The service is deleted: so are its endpoints.
	if err := fc.Delete(t.Context(), serviceKind(), ns, "web", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Reconcile(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.Get(t.Context(), endpointsKind(), ns, "web"); !api.IsNotFound(err) {
		t.Fatalf("endpoints after service delete: %v, want NotFound", err)
	}
}

func TestEndpointsSelectorlessServiceLeftAlone(t *testing.T) {
	svc := epService("ext", nil, api.ServicePort{Port: 80})
	mine := &api.Endpoints{Subsets: []api.EndpointSubset{{Addresses: []api.EndpointAddress{{IP: "192.0.2.1"}}, Ports: []api.EndpointPort{{Port: 80}}}}}
	mine.Name, mine.Namespace = "ext", ns
	fc := fake.New(svc, mine, epPod("a", "10.244.0.2", true))
	r := newEPController(t, fc)
	if err := r.Reconcile(t.Context(), api.KeyOf(svc)); err != nil {
		t.Fatal(err)
	}
	if w := writes(fc); len(w) != 0 {
		t.Errorf("wrote %v for a service without selector", w)
	}
}

func TestEndpointsPodHandler(t *testing.T) {
	web := epService("web", map[string]string{"app": "web"}, api.ServicePort{Port: 80})
	db := epService("db", map[string]string{"app": "db"}, api.ServicePort{Port: 5432})
	ext := epService("ext", nil, api.ServicePort{Port: 80})
	fc := fake.New(web, db, ext)
	r := newEPController(t, fc)
	var got []string
	h := r.PodHandler(func(k string) { got = append(got, k) })
	old := epPod("a", "10.244.0.2", true)
	moved := epPod("a", "10.244.0.2", true)
	moved.Labels = map[string]string{"app": "db"}
	h.OnUpdate(old, moved)
	if want := []string{ns + "/web", ns + "/db"}; !sameSet(got, want) {
		t.Errorf("enqueued %v, want %v", got, want)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}
