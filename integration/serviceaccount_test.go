package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/agent/network/netnstest"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testenv"
	"skiff.dev/skiff/internal/testwait"
)

// In-cluster config end to end on real containerd: a pod whose image is
// busybox plus the real kubectl runs `kubectl get pods` with nothing but
// what skiff gives every pod (the API access volume: token, ca.crt,
// namespace; KUBERNETES_SERVICE_HOST/PORT), through the kubernetes
// Service's cluster IP and the node's service proxy to the API server,
// as the RoleBinding of examples/rbac/serviceaccount-pod-reader.yaml lets
// it (a pod's token gets nothing by default), and is refused in another
// namespace, and for its own status, a binding or a Workload's status.
//
// Topology, as the net lab's (net_lab_test.go) with one host: the API
// server listens on this namespace's address on the test LAN
// (10.213.82.254), which the kubernetes Endpoints list; the node, its
// CNI pod network and its service proxy live in the host namespace
// (10.213.82.1), so the pod's packets to 10.96.0.1:443 are DNATed there
// and routed over the LAN to the API server.
func TestInClusterKubectl(t *testing.T) {
	netnstest.Require(t)
	testenv.RequireBusybox(t)
	for _, p := range []string{"/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/portmap", "/usr/lib/cni/loopback"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s missing: apt-get install containernetworking-plugins", p)
		}
	}
	kubectl := podKubectl(t)
	e := newCtrdEnv(t)
	ctx := context.Background()
	netnsPrefix := "sksa" + randHex(3) + "-"
	t.Cleanup(func() {
		ms, _ := filepath.Glob("/run/netns/" + netnsPrefix + "*")
		for _, m := range ms {
			t.Errorf("pod network namespace %s left behind; deleting it", m)
			_ = exec.Command("ip", "netns", "delete", filepath.Base(m)).Run()
		}
	})

	// The LAN: this namespace at .254, the host at .1.
	const rootIP, hostIP = "10.213.82.254", "10.213.82.1"
	lan := netnstest.New(t, "sksa-lan")
	lan.MustRun(t, "ip", "link", "add", "br0", "type", "bridge")
	lan.MustRun(t, "ip", "link", "set", "br0", "up")
	rootIf := "sksa" + randHex(4)
	netnstest.MustRun(t, "ip", "link", "add", rootIf, "type", "veth", "peer", "name", "root", "netns", lan.Name)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "delete", rootIf).Run() })
	lan.MustRun(t, "ip", "link", "set", "root", "master", "br0")
	lan.MustRun(t, "ip", "link", "set", "root", "up")
	netnstest.MustRun(t, "ip", "addr", "add", rootIP+"/24", "dev", rootIf)
	netnstest.MustRun(t, "ip", "link", "set", rootIf, "up")
	host := netLabJoin(t, lan, "sa1", hostIP)

	cp, c := startControlPlane(t, func(cfg *controlplane.Config) { cfg.API.Listen = net.JoinHostPort(rootIP, "0") })
	rt := e.runtime(t)
	img := testenv.Busybox("docker.io/library/kubectl-in-busybox:test")
	img.Env = append(img.Env, "HOME=/tmp")
	img.Executables = map[string]string{"/usr/bin/kubectl": kubectl}
	arch, err := img.Archive()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.ImportImage(ctx, bytes.NewReader(arch)); err != nil {
		t.Fatalf("import the kubectl image: %v", err)
	}
	startNetLabAgent(t, cp, &netLabHost{name: "sa1", ns: host, ip: hostIP, rt: rt}, netnsPrefix) // the net lab's node, in the host namespace

	// The kubernetes Service and its endpoint: this API server.
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		ep, err := client.Get[*api.Endpoints](ctx, c, "default", "kubernetes")
		if err != nil {
			return false, err.Error()
		}
		return len(ep.Subsets) == 1 && len(ep.Subsets[0].Addresses) == 1 && ep.Subsets[0].Addresses[0].IP == rootIP, "endpoints not yet the API server's"
	})
	if _, err := c.Create(ctx, namespace("other")); err != nil {
		t.Fatal(err)
	}
	// A pod's token gets nothing by default: the example grants the
	// namespace's default service account the reading of its pods.
	applyFile(t, c, "../examples/rbac/serviceaccount-pod-reader.yaml")
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		_, err := client.Get[*api.ConfigMap](ctx, c, "team", api.RootCAConfigMap)
		return err == nil, "no kube-root-ca.crt in team yet"
	})
	script := `echo "== env"; env | grep KUBERNETES | sort
echo "== own"; kubectl get pods -o name; echo "rc=$?"
echo "== other"; kubectl get pods -n other 2>&1; echo "rc=$?"
echo "== status"; kubectl patch pod kubectl --subresource=status --type=merge -p '{"status":{"message":"mine"}}' 2>&1; echo "rc=$?"
echo "== can-i"; kubectl auth can-i update pods --subresource=status; kubectl auth can-i create pods --subresource=binding
kubectl auth can-i update workloads.kueue.x-k8s.io --subresource=status; kubectl auth can-i create rolebindings; kubectl auth can-i list pods
echo "== end"`
	pod := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "kubectl", Namespace: "team"}, Spec: api.PodSpec{
		RestartPolicy: api.RestartNever,
		Containers: []api.Container{{Name: "kubectl", Image: "kubectl-in-busybox:test", ImagePullPolicy: api.PullNever,
			Command: []string{"sh", "-c", script}}},
	}}
	created, err := client.Create(ctx, c, pod)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(created.Spec.Volumes); n != 1 || !strings.HasPrefix(created.Spec.Volumes[0].Name, api.APIAccessVolumePrefix) {
		t.Fatalf("admission gave the pod volumes %+v, want one kube-api-access-xxxxx", created.Spec.Volumes)
	}
	t.Cleanup(func() {
		_ = c.Delete(ctx, api.MustKindOf(&api.Pod{}), "team", "kubectl", api.DeleteOptions{})
		testwait.Until(t, 60*time.Second, func() (bool, string) {
			_, err := client.Get[*api.Pod](ctx, c, "team", "kubectl")
			ms, _ := filepath.Glob("/run/netns/" + netnsPrefix + "*")
			// A finished pod goes from the API at once; its node then
			// tears its network down (the force-deleted path).
			return api.IsNotFound(err) && len(ms) == 0, fmt.Sprintf("pod: %v; pod network namespaces: %v", err, ms)
		})
	})
	testwait.Until(t, 90*time.Second, func() (bool, string) {
		p, err := client.Get[*api.Pod](ctx, c, "team", "kubectl")
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == api.PodSucceeded || p.Status.Phase == api.PodFailed, p.Status.Phase + " " + p.Status.Message
	})
	body, err := c.Stream(ctx, "/api/v1/namespaces/team/pods/kubectl/log")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(body)
	body.Close()
	if err != nil {
		t.Fatal(err)
	}
	logs := string(b)
	t.Logf("pod output:\n%s", logs)
	section := func(name string) string {
		_, after, _ := strings.Cut(logs, "== "+name+"\n")
		before, _, _ := strings.Cut(after, "\n== ")
		return before
	}
	env := strings.Split(section("env"), "\n")
	for _, want := range []string{"KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443", "KUBERNETES_SERVICE_PORT_HTTPS=443",
		"KUBERNETES_PORT=tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1"} {
		if !slices.Contains(env, want) {
			t.Errorf("env | grep KUBERNETES lacks %s", want)
		}
	}
	if own := section("own"); !strings.Contains(own, "pod/kubectl\n") || !strings.Contains(own, "rc=0") {
		t.Errorf("kubectl get pods in its own namespace:\n%s\nwant pod/kubectl and rc=0", own)
	}
	status := section("status")
	// kubectl reads the subresource before it patches it: the read is
	// already refused (a real cluster says the same).
	if want := `pods "kubectl" is forbidden: User "system:serviceaccount:team:default" cannot get resource "pods/status" in API group "" in the namespace "team"`; !strings.Contains(status, want) || !strings.Contains(status, "rc=1") {
		t.Errorf("kubectl patch pod --subresource=status:\n%s\nwant %q and rc=1", status, want)
	}
	if canI := section("can-i"); canI != "no\nno\nno\nno\nyes" {
		t.Errorf("kubectl auth can-i (pods/status, pods/binding, workloads/status, rolebindings, list pods):\n%s\nwant no, no, no, no, yes", canI)
	}
	other := section("other")
	if want := `pods is forbidden: User "system:serviceaccount:team:default" cannot list resource "pods" in API group "" in the namespace "other"`; !strings.Contains(other, want) || !strings.Contains(other, "rc=1") {
		t.Errorf("kubectl get pods -n other:\n%s\nwant %q and rc=1", other, want)
	}
}

// podKubectl is the kubectl binary to put in the pod's image: a static
// kubectl 1.32 (the machine's /usr/bin/kubectl may be a dispatcher that
// runs versioned binaries next to it, which the image would lack).
func podKubectl(t *testing.T) string {
	t.Helper()
	bin := kubectltest.Binary(t)
	if real, err := filepath.EvalSymlinks(bin); err == nil {
		if v := filepath.Join(filepath.Dir(real), "kubectl.1.32"); fileExists(v) {
			bin = v
		}
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b[:min(len(b), 1<<20)], []byte("Go build")) && !bytes.HasPrefix(b, []byte("\x7fELF")) {
		t.Skipf("%s is not a static binary a busybox image can run", bin)
	}
	return string(b)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
