package controllers

import (
	"context"
	"slices"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

func namespaceObj(name string, terminating bool) *api.Namespace {
	n := &api.Namespace{ObjectMeta: api.ObjectMeta{Name: name, UID: "uid-" + name}, Status: api.NamespaceStatus{Phase: api.NamespaceActive}}
	if terminating {
		ts := api.NewTime(t0)
		n.DeletionTimestamp, n.Status.Phase = &ts, api.NamespaceTerminating
	}
	return n
}

func TestServiceAccountController(t *testing.T) {
	cases := []struct {
		name   string
		objs   []api.Object
		key    string
		writes []string
	}{
		{"new namespace", []api.Object{namespaceObj("team", false)}, "team", []string{"create ServiceAccount team/default"}},
		{"already there", []api.Object{namespaceObj("team", false), &api.ServiceAccount{ObjectMeta: api.ObjectMeta{Name: "default", Namespace: "team"}}}, "team", nil},
		{"terminating", []api.Object{namespaceObj("team", true)}, "team", nil},
		{"gone", nil, "team", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.New(tc.objs...)
			sc := NewServiceAccountController(c, fakeLister{c, namespaceKind()}, fakeLister{c, serviceAccountKind()}, testLogger(t))
			if err := sc.Reconcile(context.Background(), tc.key); err != nil {
				t.Fatal(err)
			}
			if got := writes(c); !slices.Equal(got, tc.writes) {
				t.Errorf("writes %v, want %v", got, tc.writes)
			}
			// Safe to repeat: a second reconcile writes nothing.
			if err := sc.Reconcile(context.Background(), tc.key); err != nil {
				t.Fatal(err)
			}
			if got := writes(c); len(got) > 0 {
				t.Errorf("the second reconcile wrote %v", got)
			}
		})
	}
}

func TestRootCAPublisher(t *testing.T) {
	const ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	cm := func(data string) *api.ConfigMap {
		return &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: api.RootCAConfigMap, Namespace: "team"}, Data: map[string]string{api.RootCAKey: data}}
	}
	cases := []struct {
		name   string
		objs   []api.Object
		writes []string
	}{
		{"new namespace", []api.Object{namespaceObj("team", false)}, []string{"create ConfigMap team/kube-root-ca.crt"}},
		{"up to date", []api.Object{namespaceObj("team", false), cm(ca)}, nil},
		{"changed by hand", []api.Object{namespaceObj("team", false), cm("tampered")}, []string{"update ConfigMap team/kube-root-ca.crt"}},
		{"terminating", []api.Object{namespaceObj("team", true)}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.New(tc.objs...)
			p := NewRootCAPublisher(c, fakeLister{c, namespaceKind()}, fakeLister{c, configMapKind()}, []byte(ca), testLogger(t))
			if err := p.Reconcile(context.Background(), "team"); err != nil {
				t.Fatal(err)
			}
			if got := writes(c); !slices.Equal(got, tc.writes) {
				t.Fatalf("writes %v, want %v", got, tc.writes)
			}
			if len(tc.writes) > 0 {
				got := get[*api.ConfigMap](t, c, "team", api.RootCAConfigMap)
				if got.Data[api.RootCAKey] != ca || len(got.Data) != 1 {
					t.Errorf("data %v", got.Data)
				}
			}
			if err := p.Reconcile(context.Background(), "team"); err != nil {
				t.Fatal(err)
			}
			if got := writes(c); len(got) > 0 {
				t.Errorf("the second reconcile wrote %v", got)
			}
		})
	}
}

func TestKubernetesServiceController(t *testing.T) {
	servers := []string{"10.0.0.2:7443"}
	c := fake.New()
	epsKind := api.MustKindOf(&api.Endpoints{})
	kc := NewKubernetesServiceController(c, fakeLister{c, serviceKind()}, fakeLister{c, epsKind}, fakeLister{c, endpointSliceKind()},
		KubernetesServiceConfig{ClusterIP: "10.96.0.1", Servers: func() []string { return servers }}, testLogger(t))
	reconcile := func() []string {
		t.Helper()
		if err := kc.Reconcile(context.Background(), KubernetesServiceKey); err != nil {
			t.Fatal(err)
		}
		return writes(c)
	}
	if got, want := reconcile(), []string{"create Service default/kubernetes", "create Endpoints default/kubernetes", "create EndpointSlice default/kubernetes"}; !slices.Equal(got, want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
	svc := get[*api.Service](t, c, "default", "kubernetes")
	if svc.Spec.ClusterIP != "10.96.0.1" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "https" || svc.Spec.Ports[0].Port != 443 ||
		svc.Spec.Ports[0].TargetPort.IntVal != 7443 || len(svc.Spec.Selector) != 0 {
		t.Errorf("service spec %+v", svc.Spec)
	}
	ep := get[*api.Endpoints](t, c, "default", "kubernetes")
	if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 1 || ep.Subsets[0].Addresses[0].IP != "10.0.0.2" || ep.Subsets[0].Ports[0].Port != 7443 {
		t.Errorf("endpoints %+v", ep.Subsets)
	}
	if got := reconcile(); len(got) > 0 {
		t.Errorf("a repeat wrote %v", got)
	}
	// A second server joins; one address is not IP:port and is left out.
	servers = []string{"10.0.0.3:7443", "10.0.0.2:7443", "server-3:7443"}
	if got, want := reconcile(), []string{"update Endpoints default/kubernetes", "update EndpointSlice default/kubernetes"}; !slices.Equal(got, want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
	ep = get[*api.Endpoints](t, c, "default", "kubernetes")
	var ips []string
	for _, a := range ep.Subsets[0].Addresses {
		ips = append(ips, a.IP)
	}
	if !slices.Equal(ips, []string{"10.0.0.2", "10.0.0.3"}) {
		t.Errorf("addresses %v", ips)
	}
	sl := get[*api.EndpointSlice](t, c, "default", "kubernetes")
	if len(sl.Endpoints) != 2 || sl.Labels[api.LabelServiceName] != "kubernetes" {
		t.Errorf("slice %+v", sl)
	}
	// Someone edits the service's port: it is put back.
	svc = get[*api.Service](t, c, "default", "kubernetes")
	svc.Spec.Ports[0].Port = 8443
	if _, err := c.Update(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	writes(c)
	if got, want := reconcile(), []string{"update Service default/kubernetes"}; !slices.Equal(got, want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
}
