package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/internal/kubectltest"
)

// metricsEnv is an API server whose proxy trusts one fake agent (an
// httptest TLS server answering /stats/summary with sum), node "node-1"
// served by it with 4 CPUs and 4Gi, "node-2" whose agent does not answer,
// and pods web (figures) and idle (no CPU rate yet) on node-1.
func metricsEnv(t *testing.T, sum statsapi.Summary) *env {
	t.Helper()
	agent := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stats/summary" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(sum)
	}))
	t.Cleanup(agent.Close)
	pool := x509.NewCertPool()
	pool.AddCert(agent.Certificate())

	st := defaultsStore(t, store.Options{NoSync: true})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := NewRegistry(st, logger)
	if err := reg.EnsureDefaults(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Token = testToken
	cfg.AgentTLS = &tls.Config{RootCAs: pool}
	srv, err := New(cfg, reg, logger)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	e := &env{t: t, reg: reg, srv: srv, ts: ts, local: srv.Local(), st: st}

	_, portStr, _ := net.SplitHostPort(agent.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := dead.Addr().(*net.TCPAddr).Port
	dead.Close() // nothing answers there
	ctx := context.Background()
	for name, p := range map[string]int{"node-1": port, "node-2": deadPort} {
		n := &api.Node{ObjectMeta: api.ObjectMeta{Name: name, Labels: map[string]string{"lab": "yes"}}}
		o, err := e.local.Create(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		n = o.(*api.Node)
		n.Status.Addresses = []api.NodeAddress{{Type: "InternalIP", Address: "127.0.0.1"}}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(p)
		n.Status.Capacity = api.ResourceList{api.ResourceCPU: resource.MustParse("4"), api.ResourceMemory: resource.MustParse("4Gi")}
		n.Status.Allocatable = n.Status.Capacity
		if _, err := e.local.UpdateStatus(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"web", "idle", "unmeasured"} {
		p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}}}
		p.Spec.NodeName = "node-1"
		p.Spec.Containers = []api.Container{{Name: "c", Image: "nginx"}}
		o, err := e.local.Create(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for i := range sum.Pods {
			if sum.Pods[i].PodRef.Name == name {
				sum.Pods[i].PodRef.UID = o.GetObjectMeta().UID
			}
		}
	}
	return e
}

func u64(v uint64) *uint64 { return &v }

// testSummary: node-1 uses a quarter of its 4 CPUs' worth of one core
// (250m) and 512Mi; pod web's container 1m and 10Mi; pod idle's
// container has no rate yet (seen once).
func testSummary() statsapi.Summary {
	now := metav1.NewTime(time.Now())
	return statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "node-1",
			CPU:    &statsapi.CPUStats{Time: now, UsageNanoCores: u64(250e6), UsageCoreNanoSeconds: u64(9e12)},
			Memory: &statsapi.MemoryStats{Time: now, WorkingSetBytes: u64(512 << 20)}},
		Pods: []statsapi.PodStats{
			{PodRef: statsapi.PodReference{Name: "web", Namespace: "default"}, Containers: []statsapi.ContainerStats{{Name: "c",
				CPU:    &statsapi.CPUStats{Time: now, UsageNanoCores: u64(1e6), UsageCoreNanoSeconds: u64(5e9)},
				Memory: &statsapi.MemoryStats{Time: now, WorkingSetBytes: u64(10 << 20)}}}},
			{PodRef: statsapi.PodReference{Name: "idle", Namespace: "default"}, Containers: []statsapi.ContainerStats{{Name: "c",
				CPU:    &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: u64(1)},
				Memory: &statsapi.MemoryStats{Time: now, WorkingSetBytes: u64(1 << 20)}}}},
		},
	}
}

func TestMetricsAPI(t *testing.T) {
	e := metricsEnv(t, testSummary())
	for _, tc := range []struct {
		name, path string
		code       int
		want       []string // substrings of the body
		notWant    []string
	}{
		{"group", "/apis/metrics.k8s.io", 200, []string{`"preferredVersion":{"groupVersion":"metrics.k8s.io/v1beta1"`}, nil},
		{"resources", "/apis/metrics.k8s.io/v1beta1", 200, []string{`"kind":"NodeMetrics"`, `"kind":"PodMetrics"`}, nil},
		{"nodes: the one that answers", "/apis/metrics.k8s.io/v1beta1/nodes", 200,
			[]string{`"kind":"NodeMetricsList"`, `"name":"node-1"`, `"cpu":"250m"`, `"memory":"512Mi"`, `"window":"10s"`}, []string{"node-2"}},
		{"nodes by label", "/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=lab%3Dno", 200, []string{`"items":[]`}, nil},
		{"one node", "/apis/metrics.k8s.io/v1beta1/nodes/node-1", 200, []string{`"kind":"NodeMetrics"`, `"cpu":"250m"`}, nil},
		{"a node that does not answer", "/apis/metrics.k8s.io/v1beta1/nodes/node-2", 404, []string{`nodemetrics.metrics.k8s.io \"node-2\" not found`}, nil},
		{"an unknown node", "/apis/metrics.k8s.io/v1beta1/nodes/nope", 404, []string{`nodemetrics.metrics.k8s.io \"nope\" not found`}, nil},
		{"pods of a namespace: those with a rate", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", 200,
			[]string{`"kind":"PodMetricsList"`, `"name":"web"`, `"containers":[{"name":"c","usage":{"cpu":"1m","memory":"10Mi"}}]`}, []string{"idle", "unmeasured"}},
		{"pods of every namespace", "/apis/metrics.k8s.io/v1beta1/pods", 200, []string{`"name":"web"`}, nil},
		{"pods by label", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Didle", 200, []string{`"items":[]`}, nil},
		{"one pod", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web", 200, []string{`"kind":"PodMetrics"`, `"namespace":"default"`}, nil},
		{"a pod without a rate yet", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/idle", 404, []string{`podmetrics.metrics.k8s.io \"default/idle\" not found`}, nil},
		{"another version", "/apis/metrics.k8s.io/v1/nodes", 404, nil, nil},
		{"watch", "/apis/metrics.k8s.io/v1beta1/nodes?watch=true", 405, []string{"watch is not supported"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := e.do(http.MethodGet, tc.path, nil)
			if code != tc.code {
				t.Fatalf("GET %s: %d, want %d: %s", tc.path, code, tc.code, b)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("GET %s: no %s in %s", tc.path, w, b)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(string(b), w) {
					t.Errorf("GET %s: %s in %s", tc.path, w, b)
				}
			}
		})
	}
	if code, _ := e.do(http.MethodPost, "/apis/metrics.k8s.io/v1beta1/nodes", "{}"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST nodes metrics: %d, want 405", code)
	}
	// /apis lists the group, so kubectl top finds it.
	if b := e.must(200, http.MethodGet, "/apis", nil); !strings.Contains(string(b), `"name":"metrics.k8s.io"`) {
		t.Errorf("/apis lacks metrics.k8s.io: %s", b)
	}
}

// The real kubectl: top nodes and top pods read the metrics API (the node
// that does not answer shows <unknown>, as on a cluster with
// metrics-server); get leases and get endpointslices print Kubernetes'
// columns.
func TestKubectlTopLeasesEndpointSlices(t *testing.T) {
	t.Parallel()
	e := metricsEnv(t, testSummary())
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	ctx := context.Background()

	out := c.Must(t, "", "top", "nodes")
	for _, re := range []string{
		`(?m)^NAME\s+CPU\(cores\)\s+CPU\(%\)\s+MEMORY\(bytes\)\s+MEMORY\(%\)\s*$`,
		`(?m)^node-1\s+250m\s+6%\s+512Mi\s+12%\s*$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("kubectl top nodes: no line matching %s in\n%s", re, out)
		}
	}
	out = c.Must(t, "", "top", "pods")
	for _, re := range []string{`(?m)^NAME\s+CPU\(cores\)\s+MEMORY\(bytes\)\s*$`, `(?m)^web\s+1m\s+10Mi\s*$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("kubectl top pods: no line matching %s in\n%s", re, out)
		}
	}
	out = c.Must(t, "", "top", "pod", "web", "--containers")
	if !regexp.MustCompile(`(?m)^web\s+c\s+1m\s+10Mi\s*$`).MatchString(out) {
		t.Errorf("kubectl top pod web --containers:\n%s", out)
	}

	holder := "node-1"
	l := &api.Lease{ObjectMeta: api.ObjectMeta{Name: "node-1", Namespace: api.NamespaceNodeLease},
		Spec: api.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: new(int32(40)), RenewTime: &api.MicroTime{Time: time.Now()}}}
	if _, err := e.local.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	out = c.Must(t, "", "get", "leases", "-A")
	for _, re := range []string{`(?m)^NAMESPACE\s+NAME\s+HOLDER\s+AGE\s*$`, `(?m)^kube-node-lease\s+node-1\s+node-1\s+\S+\s*$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("kubectl get leases -A: no line matching %s in\n%s", re, out)
		}
	}

	port := int32(8080)
	s := &api.EndpointSlice{AddressType: api.AddressTypeIPv4,
		Endpoints: []api.Endpoint{{Addresses: []string{"10.244.0.5"}}, {Addresses: []string{"10.244.0.6"}}},
		Ports:     []api.EndpointSlicePort{{Port: &port}}}
	s.GenerateName, s.Namespace = "web-", "default"
	s.Labels = map[string]string{api.LabelServiceName: "web"}
	if _, err := e.local.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	out = c.Must(t, "", "get", "endpointslices")
	for _, re := range []string{`(?m)^NAME\s+ADDRESSTYPE\s+PORTS\s+ENDPOINTS\s+AGE\s*$`, `(?m)^web-[a-z0-9]{5}\s+IPv4\s+8080\s+10\.244\.0\.5,10\.244\.0\.6\s+\S+\s*$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("kubectl get endpointslices: no line matching %s in\n%s", re, out)
		}
	}
}
