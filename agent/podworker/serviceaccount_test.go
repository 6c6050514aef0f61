package podworker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/runtime"
)

// tokenClient is the fake API client with the token subresource: each
// request gets token tok-N, valid for the lifetime asked.
type tokenClient struct {
	*fake.Client
	now func() time.Time

	mu   sync.Mutex
	reqs []string // "ns/sa expirationSeconds pod/uid"
}

func (c *tokenClient) CreateToken(_ context.Context, ns, sa string, tr *api.TokenRequest) (*api.TokenRequest, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ref := tr.Spec.BoundObjectRef
	c.reqs = append(c.reqs, fmt.Sprintf("%s/%s %d %s/%s", ns, sa, *tr.Spec.ExpirationSeconds, ref.Name, ref.UID))
	out := api.Clone(tr)
	out.Status = api.TokenRequestStatus{Token: fmt.Sprintf("tok-%d", len(c.reqs)),
		ExpirationTimestamp: api.NewTime(c.now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))}
	return out, nil
}

func (c *tokenClient) requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reqs)
}

var _ TokenRequester = (*tokenClient)(nil)

func kubernetesService() *api.Service {
	return &api.Service{ObjectMeta: api.ObjectMeta{Name: "kubernetes", Namespace: "default"},
		Spec: api.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []api.ServicePort{{Name: "https", Protocol: "TCP", Port: 443, TargetPort: intstr.FromInt32(7443)}}}}
}

func TestAPIAccessVolume(t *testing.T) {
	const ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	f := newFixture(t, kubernetesService(), &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: api.RootCAConfigMap, Namespace: "team"}, Data: map[string]string{api.RootCAKey: ca}})
	tc := &tokenClient{Client: f.c, now: func() time.Time { return f.now }}
	f.w.cfg.Client = tc
	links := false
	p := newPod("kubectl", func(p *api.Pod) {
		p.Namespace = "team"
		p.Spec.ServiceAccountName = "default"
		p.Spec.EnableServiceLinks = &links
		p.Spec.Volumes = []api.Volume{api.APIAccessVolume("kube-api-access-x7k2p")}
		p.Spec.Containers[0].VolumeMounts = []api.VolumeMount{{Name: "kube-api-access-x7k2p", MountPath: api.ServiceAccountMountPath, ReadOnly: true}}
	})
	if _, err := f.c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	get := func() *api.Pod {
		o, err := f.c.Get(context.Background(), api.MustKindOf(&api.Pod{}), "team", "kubectl")
		if err != nil {
			t.Fatal(err)
		}
		return o.(*api.Pod)
	}
	sync := func() time.Duration {
		t.Helper()
		d, err := f.w.Sync(context.Background(), get())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	sync()
	pod := get()
	if got, want := tc.requests(), []string{"team/default 3607 kubectl/" + pod.UID}; !slices.Equal(got, want) {
		t.Fatalf("token requests %v, want %v", got, want)
	}
	dir := filepath.Join(f.w.podDir(pod.UID), "volumes", "kube-api-access-x7k2p")
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for name, want := range map[string]string{"token": "tok-1", "ca.crt": ca, "namespace": "team"} {
		if got := read(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	st := f.w.stateOf(pod.UID)
	spec, err := f.w.containerSpec(context.Background(), pod, &pod.Spec.Containers[0], runtime.ImageInfo{Name: "busybox"}, 1, st)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(spec.Mounts, runtime.Mount{Type: runtime.MountBind, Source: dir, Destination: api.ServiceAccountMountPath, ReadOnly: true}) {
		t.Errorf("mounts %+v", spec.Mounts)
	}
	if got := tc.requests(); len(got) != 1 {
		t.Errorf("a second container spec asked for a token again: %v", got)
	}
	// Service links are off and the pod is not in default: the kubernetes
	// Service's variables are there all the same, as the kubelet's.
	for _, kv := range []string{"KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443", "KUBERNETES_SERVICE_PORT_HTTPS=443",
		"KUBERNETES_PORT=tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP_PROTO=tcp",
		"KUBERNETES_PORT_443_TCP_PORT=443", "KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1"} {
		if !slices.Contains(spec.Env, kv) {
			t.Errorf("env %v lacks %s", spec.Env, kv)
		}
	}

	// At 80% of its life the token is replaced, in place.
	f.now = f.now.Add(2880 * time.Second)
	if d := sync(); d <= 0 || d > 10*time.Second {
		t.Errorf("before the refresh Sync asks to look again after %v, want within seconds", d)
	}
	if got := read("token"); got != "tok-1" {
		t.Errorf("token replaced early: %q", got)
	}
	f.now = f.now.Add(10 * time.Second)
	d := sync()
	if got := read("token"); got != "tok-2" {
		t.Errorf("token %q, want the new tok-2", got)
	}
	if want := 3607 * time.Second * 8 / 10; d < want-time.Second || d > want {
		t.Errorf("next look after %v, want about %v (80%% of the new token's life)", d, want)
	}
}

func TestTokenRefresh(t *testing.T) {
	issued := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		life, want time.Duration
	}{
		{3607 * time.Second, 2885600 * time.Millisecond},
		{10 * time.Minute, 8 * time.Minute},
	} {
		if got := tokenRefresh(issued, issued.Add(tc.life)).Sub(issued); got != tc.want {
			t.Errorf("life %v: refresh after %v, want %v", tc.life, got, tc.want)
		}
	}
}

func TestServiceLinksKubernetes(t *testing.T) {
	own := &api.Service{ObjectMeta: api.ObjectMeta{Name: "kubernetes", Namespace: "team"},
		Spec: api.ServiceSpec{ClusterIP: "10.96.5.5", Ports: []api.ServicePort{{Port: 80, Protocol: "TCP"}}}}
	on, off := true, false
	cases := []struct {
		name  string
		ns    string
		links *bool
		objs  []api.Object
		host  string // KUBERNETES_SERVICE_HOST, "" for none
	}{
		{"default namespace", "default", &on, []api.Object{kubernetesService()}, "10.96.0.1"},
		{"links off in default", "default", &off, []api.Object{kubernetesService()}, "10.96.0.1"},
		{"another namespace, links off", "team", &off, []api.Object{kubernetesService()}, "10.96.0.1"},
		{"a kubernetes service of its own wins", "team", &on, []api.Object{kubernetesService(), own}, "10.96.5.5"},
		{"no kubernetes service yet", "team", &on, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objs...)
			p := newPod("p", func(p *api.Pod) { p.Namespace, p.Spec.EnableServiceLinks = tc.ns, tc.links })
			got := ""
			for _, kv := range f.w.serviceLinks(context.Background(), p) {
				if kv[0] == "KUBERNETES_SERVICE_HOST" {
					got = kv[1]
				}
			}
			if got != tc.host {
				t.Errorf("KUBERNETES_SERVICE_HOST %q, want %q", got, tc.host)
			}
		})
	}
}
