package controllers

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

func newESController(t testing.TB, c *fake.Client) *EndpointSliceController {
	return NewEndpointSliceController(c, fakeLister{c, serviceKind()}, fakeLister{c, podKind()}, fakeLister{c, endpointSliceKind()}, testLogger(t))
}

// storedSlices lists the slices in ns, sorted by name.
func storedSlices(t testing.TB, c *fake.Client) []*api.EndpointSlice {
	t.Helper()
	objs, _, err := c.List(t.Context(), endpointSliceKind(), ns, api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := listAs[*api.EndpointSlice](objs)
	slices.SortFunc(out, func(a, b *api.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// sliceEP is the endpoint of pod p with conditions ready/serving/terminating.
func sliceEP(p *api.Pod, ready, serving, terminating bool) api.Endpoint {
	return api.Endpoint{
		Addresses:  []string{p.Status.PodIP},
		Conditions: api.EndpointConditions{Ready: ptr(ready), Serving: ptr(serving), Terminating: ptr(terminating)},
		NodeName:   ptr(p.Spec.NodeName),
		TargetRef:  &api.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
	}
}

func slicePort(name string, port int32) api.EndpointSlicePort {
	return api.EndpointSlicePort{Name: ptr(name), Protocol: ptr("TCP"), Port: ptr(port)}
}

// wantSlice is one expected slice: its endpoints and ports.
type wantSlice struct {
	endpoints []api.Endpoint
	ports     []api.EndpointSlicePort
}

func TestEndpointSliceReconcile(t *testing.T) {
	web := map[string]string{"app": "web"}
	a := epPod("a", "10.244.0.3", true, api.ContainerPort{Name: "http", ContainerPort: 8080})
	b := epPod("b", "10.244.0.2", true, api.ContainerPort{Name: "http", ContainerPort: 8080})
	notReady := epPod("c", "10.244.0.4", false, api.ContainerPort{Name: "http", ContainerPort: 8080})
	d := epPod("d", "10.244.0.5", true, api.ContainerPort{Name: "http", ContainerPort: 9090})
	deleting := epPod("deleting", "10.244.0.6", true)
	deleting.DeletionTimestamp = &api.Time{Time: t0}
	done := epPod("done", "10.244.0.7", false)
	done.Status.Phase = api.PodSucceeded
	noIP := epPod("noip", "", false)
	other := epPod("other", "10.244.0.8", true)
	other.Labels = map[string]string{"app": "db"}
	byNumber := api.ServicePort{Port: 80, TargetPort: intstr.FromInt32(8080)}

	var many []*api.Pod
	var manyEPs []api.Endpoint
	for i := range maxEndpointsPerSlice + 1 {
		p := epPod(fmt.Sprintf("m%03d", i), fmt.Sprintf("10.244.1.%d", i+1), true)
		many = append(many, p)
		manyEPs = append(manyEPs, sliceEP(p, true, true, false))
	}
	slices.SortFunc(manyEPs, func(x, y api.Endpoint) int { return strings.Compare(x.Addresses[0], y.Addresses[0]) })

	tests := []struct {
		name string
		svc  *api.Service
		pods []*api.Pod
		want []wantSlice
	}{
		{
			name: "ready, not ready and terminating pods; finished, unaddressed and unselected left out",
			svc:  epService("web", web, byNumber),
			pods: []*api.Pod{a, b, notReady, deleting, done, noIP, other},
			want: []wantSlice{{
				endpoints: []api.Endpoint{sliceEP(b, true, true, false), sliceEP(a, true, true, false), sliceEP(notReady, false, false, false), sliceEP(deleting, false, true, true)},
				ports:     []api.EndpointSlicePort{slicePort("", 8080)},
			}},
		},
		{
			name: "a named target port resolving to two numbers: a slice per port list",
			svc:  epService("web", web, api.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}),
			pods: []*api.Pod{a, d},
			want: []wantSlice{
				{endpoints: []api.Endpoint{sliceEP(a, true, true, false)}, ports: []api.EndpointSlicePort{slicePort("http", 8080)}},
				{endpoints: []api.Endpoint{sliceEP(d, true, true, false)}, ports: []api.EndpointSlicePort{slicePort("http", 9090)}},
			},
		},
		{
			name: "no pods: one empty slice",
			svc:  epService("web", web, byNumber),
			want: []wantSlice{{}},
		},
		{
			name: "more than 100 endpoints: cut in slices of 100",
			svc:  epService("web", web, api.ServicePort{Port: 80}),
			pods: many,
			want: []wantSlice{
				{endpoints: manyEPs[:maxEndpointsPerSlice], ports: []api.EndpointSlicePort{slicePort("", 80)}},
				{endpoints: manyEPs[maxEndpointsPerSlice:], ports: []api.EndpointSlicePort{slicePort("", 80)}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := []api.Object{tc.svc}
			for _, p := range tc.pods {
				objs = append(objs, p)
			}
			c := fake.New(objs...)
			e := newESController(t, c)
			if err := e.Reconcile(t.Context(), ns+"/web"); err != nil {
				t.Fatal(err)
			}
			got := storedSlices(t, c)
			if len(got) != len(tc.want) {
				t.Fatalf("%d slices, want %d: %+v", len(got), len(tc.want), got)
			}
			// The stored slices sort by their random names: match them by
			// content, each wanted slice exactly once.
			for _, w := range tc.want {
				i := slices.IndexFunc(got, func(s *api.EndpointSlice) bool {
					return reflect.DeepEqual(emptyNilSlice(s.Endpoints), emptyNilSlice(w.endpoints)) && reflect.DeepEqual(s.Ports, w.ports)
				})
				if i < 0 {
					t.Errorf("no slice with endpoints %+v ports %+v in %+v", w.endpoints, w.ports, got)
					continue
				}
				got = slices.Delete(got, i, i+1)
			}
			for _, s := range storedSlices(t, c) {
				if !strings.HasPrefix(s.Name, "web-") || len(s.Name) != len("web-")+5 {
					t.Errorf("slice name %q, want web- and 5 random characters", s.Name)
				}
				if s.AddressType != api.AddressTypeIPv4 {
					t.Errorf("addressType %q, want IPv4", s.AddressType)
				}
				if s.Labels[api.LabelServiceName] != "web" || s.Labels[api.LabelManagedBy] != api.EndpointSliceControllerName {
					t.Errorf("labels %v, want service-name web and managed-by %s", s.Labels, api.EndpointSliceControllerName)
				}
				if ref := api.ControllerOf(s); ref == nil || ref.Kind != "Service" || ref.UID != tc.svc.UID {
					t.Errorf("controller reference %+v, want the service", ref)
				}
			}
			// A second pass finds nothing to do.
			c.ClearActions()
			if err := e.Reconcile(t.Context(), ns+"/web"); err != nil {
				t.Fatal(err)
			}
			if w := writes(c); len(w) != 0 {
				t.Errorf("second reconcile wrote %v, want nothing", w)
			}
		})
	}
}

func emptyNilSlice[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// Changes after the first pass: a pod becoming ready updates the slice in
// place; a service losing its pods keeps one empty slice; a deleted service
// takes its slices along but not the slices another controller manages; a
// service without a selector is left alone.
func TestEndpointSliceUpdatesAndDeletes(t *testing.T) {
	web := map[string]string{"app": "web"}
	svc := epService("web", web, api.ServicePort{Port: 80})
	pod := epPod("a", "10.244.0.3", false)
	foreign := &api.EndpointSlice{AddressType: api.AddressTypeIPv4}
	foreign.Name, foreign.Namespace = "web-manual", ns
	foreign.Labels = map[string]string{api.LabelServiceName: "web", api.LabelManagedBy: "someone-else"}
	c := fake.New(svc, pod, foreign)
	e := newESController(t, c)
	reconcile := func() {
		t.Helper()
		if err := e.Reconcile(t.Context(), ns+"/web"); err != nil {
			t.Fatal(err)
		}
	}
	ours := func() []*api.EndpointSlice {
		return slices.DeleteFunc(storedSlices(t, c), func(s *api.EndpointSlice) bool { return s.Name == foreign.Name })
	}
	reconcile()
	first := ours()
	if len(first) != 1 || len(first[0].Endpoints) != 1 || *first[0].Endpoints[0].Conditions.Ready {
		t.Fatalf("after the first pass: %+v, want one slice with the not-ready pod", first)
	}

	ready := api.Clone(pod)
	ready.Status.Conditions = []api.PodCondition{{Type: api.PodReady, Status: api.ConditionTrue}}
	if _, err := c.UpdateStatus(t.Context(), ready); err != nil {
		t.Fatal(err)
	}
	c.ClearActions()
	reconcile()
	if w := writes(c); !reflect.DeepEqual(w, []string{"update EndpointSlice " + ns + "/" + first[0].Name}) {
		t.Errorf("pod became ready: writes %v, want the slice updated in place", w)
	}
	if s := ours(); len(s) != 1 || !*s[0].Endpoints[0].Conditions.Ready {
		t.Errorf("after the pod became ready: %+v", s)
	}

	if err := c.Delete(t.Context(), podKind(), ns, "a", api.DeleteOptions{GracePeriodSeconds: ptr[int64](0)}); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if s := ours(); len(s) != 1 || s[0].Name != first[0].Name || len(s[0].Endpoints) != 0 || len(s[0].Ports) != 0 {
		t.Errorf("no pods left: %+v, want the same slice, empty", s)
	}

	if err := c.Delete(t.Context(), serviceKind(), ns, "web", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if s := storedSlices(t, c); len(s) != 1 || s[0].Name != foreign.Name {
		t.Errorf("service deleted: slices %+v, want only %s (not ours)", s, foreign.Name)
	}

	manual := epService("manual", nil, api.ServicePort{Port: 80})
	if _, err := c.Create(t.Context(), manual); err != nil {
		t.Fatal(err)
	}
	c.ClearActions()
	if err := e.Reconcile(t.Context(), ns+"/manual"); err != nil {
		t.Fatal(err)
	}
	if w := writes(c); len(w) != 0 {
		t.Errorf("service without a selector: writes %v, want none", w)
	}
}

// A reconcile that runs before the cache shows the slice the previous one
// created waits instead of creating a second slice.
func TestEndpointSliceWaitsForItsOwnWrites(t *testing.T) {
	c := fake.New(epService("web", map[string]string{"app": "web"}, api.ServicePort{Port: 80}))
	lagging := newStaticLister() // a slice cache that has seen nothing yet
	e := NewEndpointSliceController(c, fakeLister{c, serviceKind()}, fakeLister{c, podKind()}, lagging, testLogger(t))
	if err := e.Reconcile(t.Context(), ns+"/web"); err != nil {
		t.Fatal(err)
	}
	c.ClearActions()
	err := e.Reconcile(t.Context(), ns+"/web")
	if w := writes(c); len(w) != 0 || err == nil {
		t.Fatalf("reconcile with a lagging cache: writes %v, err %v; want none and a requeue", w, err)
	}
	// The cache catches up: the next reconcile has nothing to do.
	for _, s := range storedSlices(t, c) {
		lagging[api.KeyOf(s)] = s
	}
	if err := e.Reconcile(t.Context(), ns+"/web"); err != nil {
		t.Fatal(err)
	}
	if w := writes(c); len(w) != 0 {
		t.Errorf("after the cache caught up: writes %v, want none", w)
	}
}
