package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testenv"
	"skiff.dev/skiff/internal/testwait"
)

// The Kubernetes docs' HorizontalPodAutoscaler walkthrough (issue 23), on
// TestDashboardBrowser's cluster (three nodes in a network namespace, real
// containerd, the pod network, the service proxy and the cluster DNS),
// typed with the real kubectl: the docs' php-apache.yaml unchanged
// (examples/autoscaling/php-apache.yaml), `kubectl autoscale deployment
// php-apache --cpu-percent=50 --min=1 --max=10`, the docs' busybox load
// generator, the scale-up on cpu measured from the pods' cgroups
// (metrics.k8s.io, the agents' Summary API), then the scale-down once the
// load stops, after the stabilization window (6 s by flag). The docs'
// image has no tag, so its pull policy is Always: the nodes pull it,
// through their registry hosts directory (--registry-hosts-dir, containerd's
// hosts.toml), from a local mirror of registry.k8s.io serving
// testenv.HPAExampleStandIn (busybox httpd whose CGI burns cpu per
// request, as the real image's index.php does). Real users pull the real
// image.

// phpApacheMirror serves the stand-in as registry.k8s.io/hpa-example to
// the cluster's network namespace (it reaches the host at labsHostIP) and
// writes the hosts directory that sends
// registry.k8s.io's pulls there.
func phpApacheMirror(t *testing.T) (*testenv.Registry, string) {
	t.Helper()
	reg, err := testenv.NewRegistry(testenv.HPAExampleStandIn())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	// The listener is on every address (the cluster's bridge, and so
	// labsHostIP, comes only with the cluster, after this); it answers
	// only requests that came to labsHostIP or loopback.
	onlyOurs := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		local, _ := req.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if a, ok := local.(*net.TCPAddr); !ok || (!a.IP.IsLoopback() && a.IP.String() != labsHostIP) {
			http.Error(w, "this test mirror answers the test's cluster only", http.StatusForbidden)
			return
		}
		reg.ServeHTTP(w, req)
	})
	srv := &http.Server{Handler: onlyOurs, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	dir := t.TempDir()
	hosts := fmt.Sprintf("server = \"https://registry.k8s.io\"\n\n[host.\"http://%s:%d\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
		labsHostIP, ln.Addr().(*net.TCPAddr).Port)
	if err := os.MkdirAll(filepath.Join(dir, "registry.k8s.io"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "registry.k8s.io", "hosts.toml"), []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	return reg, dir
}

// cgroupCPU is a container's cumulative cpu time in nanoseconds, read from
// its cgroup where containerd's default spec puts it (/NAMESPACE/ID), v2
// or v1: what the agent's stats read, read here by the test itself.
func cgroupCPU(t *testing.T, ns, id string) int64 {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", ns, id, "cpu.stat")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n * 1000
			}
		}
	}
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuacct", ns, id, "cpuacct.usage"))
	if err != nil {
		t.Fatalf("the cgroup of container %s: %v", id, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// podCPU is a pod's cpu usage in cores as metrics.k8s.io serves it
// (kubectl get --raw), 0 while it has none.
func podCPU(k *student, name string) float64 {
	r := k.run("", "get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/"+name)
	var pm struct {
		Containers []struct {
			Usage map[string]string `json:"usage"`
		} `json:"containers"`
	}
	if r.Err != nil || json.Unmarshal([]byte(r.Stdout), &pm) != nil {
		return 0
	}
	var sum float64
	for _, c := range pm.Containers {
		if q, err := resource.ParseQuantity(c.Usage["cpu"]); err == nil {
			sum += q.AsApproximateFloat64()
		}
	}
	return sum
}

func phpApacheWalkthrough(t *testing.T, l *labsCluster, mirror *testenv.Registry) {
	if !l.cni {
		t.Skip("the load generator reaches php-apache through its Service, which needs the cni pod network (root, containerd, CNI plugins in /usr/lib/cni); this cluster runs with --network none")
	}
	ctx := context.Background()
	start := time.Now()
	k := newStudent(t, l.home)
	defer func() {
		k.run("", "delete", "pod", "load-generator", "--now", "--ignore-not-found")
		k.run("", "delete", "hpa", "php-apache", "--ignore-not-found")
		k.run("", "delete", "-f", "../examples/autoscaling/php-apache.yaml", "--ignore-not-found", "--wait=false")
	}()
	k.must(t, "apply", "-f", "../examples/autoscaling/php-apache.yaml")
	if out := k.must(t, "autoscale", "deployment", "php-apache", "--cpu-percent=50", "--min=1", "--max=10"); !strings.Contains(out, "horizontalpodautoscaler.autoscaling/php-apache autoscaled") {
		t.Errorf("kubectl autoscale: %q", out)
	}
	replicas := func() int32 {
		d, err := client.Get[*api.Deployment](ctx, l.c, "default", "php-apache")
		if err != nil {
			t.Fatal(err)
		}
		return *d.Spec.Replicas
	}
	hpa := func() *api.HorizontalPodAutoscaler {
		h, err := client.Get[*api.HorizontalPodAutoscaler](ctx, l.c, "default", "php-apache")
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	// The first pod runs, its image pulled from the mirror (no tag: Always),
	// and the autoscaler reads its idle cpu.
	var first *api.Pod
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		ps := listPods(t, l.c, "default", "run=php-apache")
		for _, p := range ps {
			if p.Status.Phase == api.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].ContainerID != "" {
				first = p
			}
		}
		return first != nil, podSummary(ps)
	})
	if n := mirror.Pulls("hpa-example"); n == 0 {
		t.Errorf("registry.k8s.io/hpa-example was never resolved at the mirror: the node ran an image it did not pull (pull policy Always)")
	}
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		h := hpa()
		ok := len(h.Status.CurrentMetrics) == 1 && h.Status.CurrentMetrics[0].Resource != nil && h.Status.CurrentMetrics[0].Resource.Current.AverageUtilization != nil
		return ok && *h.Status.CurrentMetrics[0].Resource.Current.AverageUtilization < 50, fmt.Sprintf("the idle pod's cpu not read yet: %+v", h.Status)
	})
	id := strings.TrimPrefix(first.Status.ContainerStatuses[0].ContainerID, "containerd://")
	cpu0, t0 := cgroupCPU(t, l.ctrdNS, id), time.Now()

	// The docs' load generator (without -i --tty --rm: no terminal here).
	k.must(t, "run", "load-generator", "--image=busybox:1.28", "--restart=Never", "--", "/bin/sh", "-c", "while sleep 0.01; do wget -q -O- http://php-apache; done")
	var peak float64 // the first pod's cpu in metrics.k8s.io, the highest seen
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		peak = max(peak, podCPU(k, first.Name))
		return replicas() > 1, fmt.Sprintf("replicas %d, the first pod at %.3f cores; autoscaler %+v", replicas(), peak, hpa().Status)
	})
	scaledUp := time.Since(start)
	cpu1, t1 := cgroupCPU(t, l.ctrdNS, id), time.Now()
	rate := float64(cpu1-cpu0) / float64(t1.Sub(t0).Nanoseconds())
	peak = max(peak, podCPU(k, first.Name))
	// The load reached the pod's cgroup (an idle httpd uses next to
	// nothing; the window includes the load generator's start), at most
	// its 500m limit, and metrics.k8s.io's figure for it is of that size:
	// from the cgroup, not made up.
	if rate < 0.05 || rate > 0.6 {
		t.Errorf("the first pod's cgroup used %.3f cores from the load's start to the scale-up, want 0.05 to 0.6 (limit 500m)", rate)
	}
	if peak < 0.1 || peak > 0.6 || peak < rate/3 || peak > rate*3 {
		t.Errorf("metrics.k8s.io showed the first pod at most at %.3f cores, its cgroup %.3f: want both 0.1 to 0.6 and within 3x of each other", peak, rate)
	}
	waitEventSaying(t, l.c, "default", "php-apache", "SuccessfulRescale", "reason: cpu resource utilization (percentage of request) above target")
	get := k.must(t, "get", "hpa", "php-apache")
	m := regexp.MustCompile(`php-apache\s+Deployment/php-apache\s+cpu: (\d+)%/50%\s+1\s+10\s+(\d+)\s`).FindStringSubmatch(get)
	if m == nil {
		t.Errorf("kubectl get hpa php-apache:\n%s", get)
	}

	// The load stops (the docs' Ctrl-C); after the window, back to 1.
	k.must(t, "delete", "pod", "load-generator", "--now")
	stopped := time.Now()
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		return replicas() == 1 && hasEvent(t, l.c, "default", "php-apache", "SuccessfulRescale", "New size: 1; reason: All metrics below target"),
			fmt.Sprintf("replicas %d; autoscaler %+v", replicas(), hpa().Status)
	})
	if idle := podCPU(k, first.Name); idle > 0.05 {
		t.Errorf("after the load stopped the first pod is at %.3f cores in metrics.k8s.io", idle)
	}
	desc := k.must(t, "describe", "hpa", "php-apache")
	if !strings.Contains(desc, "resource cpu on pods  (as a percentage of request):") {
		t.Errorf("kubectl describe hpa php-apache:\n%s", desc)
	}
	var ev bytes.Buffer
	for _, e := range eventsFor(t, l.c, "default", "php-apache") {
		if e.Reason == "SuccessfulRescale" {
			fmt.Fprintf(&ev, " %q", e.Message)
		}
	}
	t.Logf("MEASURE php-apache walkthrough: apply → scaled up in %v (the first pod's cgroup at %.3f cores, metrics.k8s.io up to %.3f); load stopped → 1 replica in %v (window %v, sync %v); rescales:%s; %v in all",
		scaledUp.Round(time.Millisecond), rate, peak, time.Since(stopped).Round(time.Millisecond), gpuHPAWindow, gpuHPASync, ev.String(), time.Since(start).Round(time.Millisecond))
}
