package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"skiff.dev/skiff/agent/network/netnstest"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/cli"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/internal/testenv"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/node"
	"skiff.dev/skiff/runtime"
)

// The nginx lab of issue 6, end to end on real containerd, with two nodes
// that are network namespaces of their own ("hosts").
//
// Topology (all addresses are the test's own):
//
//	this namespace ── veth 10.213.81.254 ─┐
//	                                      │  bridge br0 in namespace "lan"
//	host 1 ────────── veth 10.213.81.1 ───┤  (one layer-2 segment, as the
//	host 2 ────────── veth 10.213.81.2 ───┘   host-gateway routes assume)
//
// The control plane and both nodes (node.Start) run in this process. The
// API server listens on 127.0.0.1 (the agents' clients are in this process
// too); the nodes' network commands (CNI plugins, ip route, iptables) run in
// their host's namespace through node.Config.NetNS, and each agent's HTTP server
// (logs, exec, port-forward) is opened inside its host's namespace on its
// node IP, which the API server reaches over the veth from this namespace.
// Pod IPs (10.244.x.y, from the node IPAM controller) exist only inside
// the hosts, so no packet of the test leaves its namespaces.

const (
	netLabRootIP   = "10.213.81.254"
	netLabPrefix   = "10.213.81."
	netLabNodePort = 30080
)

// netLabHost is one node: its namespace, runtime and node IP.
type netLabHost struct {
	name string
	ns   *netnstest.NS
	ip   string
	rt   runtime.Runtime
	http *http.Client // dials from inside ns, a new connection per request
}

// get GETs url from inside the host; it returns the body.
func (h *netLabHost) get(url string) (string, error) {
	resp, err := h.http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// netLabLAN makes the lan namespace with its bridge, and the veth from this
// namespace onto it; all removed at cleanup.
func netLabLAN(t *testing.T) *netnstest.NS {
	t.Helper()
	lan := netnstest.New(t, "sknl-lan")
	lan.MustRun(t, "ip", "link", "add", "br0", "type", "bridge")
	lan.MustRun(t, "ip", "link", "set", "br0", "up")
	rootIf := "sknl" + randHex(4)
	netnstest.MustRun(t, "ip", "link", "add", rootIf, "type", "veth", "peer", "name", "root", "netns", lan.Name)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "delete", rootIf).Run() })
	lan.MustRun(t, "ip", "link", "set", "root", "master", "br0")
	lan.MustRun(t, "ip", "link", "set", "root", "up")
	netnstest.MustRun(t, "ip", "addr", "add", netLabRootIP+"/24", "dev", rootIf)
	netnstest.MustRun(t, "ip", "link", "set", rootIf, "up")
	return lan
}

// netLabJoin makes a host namespace with eth0 (address ip/24) on lan's bridge.
func netLabJoin(t *testing.T, lan *netnstest.NS, name, ip string) *netnstest.NS {
	t.Helper()
	h := netnstest.New(t, "sknl-"+name)
	port := "p" + h.Name[len(h.Name)-6:]
	netnstest.MustRun(t, "ip", "link", "add", port, "netns", lan.Name, "type", "veth", "peer", "name", "eth0", "netns", h.Name)
	lan.MustRun(t, "ip", "link", "set", port, "master", "br0")
	lan.MustRun(t, "ip", "link", "set", port, "up")
	h.MustRun(t, "ip", "addr", "add", ip+"/24", "dev", "eth0")
	h.MustRun(t, "ip", "link", "set", "eth0", "up")
	return h
}

// netLabAgentsSeen says, per host, the agent port its Node gives, the
// TCP sockets listening in its namespace and its iptables rules: what a
// failed connection from the API server to an agent needs explained.
func netLabAgentsSeen(ctx context.Context, c client.Interface, hosts []*netLabHost) string {
	var b strings.Builder
	for _, h := range hosts {
		port := "?"
		if n, err := client.Get[*api.Node](ctx, c, "", h.name); err == nil {
			port = strconv.Itoa(int(n.Status.DaemonEndpoints.KubeletEndpoint.Port))
		}
		fmt.Fprintf(&b, "== %s (%s), agent port in its Node: %s\n", h.name, h.ip, port)
		for _, cmd := range [][]string{{"ss", "-ltn"}, {"iptables-save"}} {
			out, err := h.ns.Run(cmd...)
			fmt.Fprintf(&b, "-- %s (err %v)\n%s", strings.Join(cmd, " "), err, out)
		}
	}
	return b.String()
}

// startNetLabAgent runs the node of host h until cleanup: node.Start with
// a CNI pod network, routes and service proxy inside h's namespace
// (Config.NetNS), and the agent's server listening there on h's IP.
func startNetLabAgent(t *testing.T, cp *controlplane.ControlPlane, h *netLabHost, netnsPrefix string) (*runningAgent, string) {
	t.Helper()
	cfg := testNodeConfig(h.rt, h.name, t.TempDir(), nil)
	cfg.NodeIP, cfg.Network = h.ip, node.NetworkCNI
	cfg.NetNS = &node.NetNS{Wrap: h.ns.Wrap(), Do: h.ns.Do, PodPrefix: netnsPrefix}
	cfg.Listen, cfg.Credentials = net.JoinHostPort(h.ip, "0"), nodeCredentials(t, cp, cfg.Name, h.ip)
	if testing.Verbose() {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", h.name)
	}
	return startNode(t, cp, cfg), cfg.DataDir
}

func TestNetLab(t *testing.T) {
	netnstest.Require(t)
	for _, p := range []string{"/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/portmap", "/usr/lib/cni/loopback"} {
		if _, err := os.Stat(p); err != nil {
			if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
				t.Fatalf("%s missing: apt-get install containernetworking-plugins", p)
			}
			t.Skipf("%s missing: apt-get install containernetworking-plugins", p)
		}
	}
	e := newCtrdEnv(t)
	start := time.Now()
	ctx := context.Background()
	netnsPrefix := "sknl" + randHex(3) + "-"
	// Safety net, run last: pod namespaces an agent did not tear down.
	t.Cleanup(func() {
		ms, _ := filepath.Glob("/run/netns/" + netnsPrefix + "*")
		for _, m := range ms {
			t.Errorf("pod network namespace %s left behind; deleting it", m)
			_ = exec.Command("ip", "netns", "delete", filepath.Base(m)).Run()
		}
	})

	lan := netLabLAN(t)
	cp, c := startControlPlane(t, nil)
	var hosts []*netLabHost
	for i, name := range []string{"nl1", "nl2"} {
		ip := netLabPrefix + strconv.Itoa(i+1)
		ns := netLabJoin(t, lan, name, ip)
		hosts = append(hosts, &netLabHost{name: name, ns: ns, ip: ip, rt: e.runtime(t), http: &http.Client{
			Timeout:   5 * time.Second,
			Transport: &http.Transport{DialContext: netnstest.Dialer(ns.Path()), DisableKeepAlives: true},
		}})
	}
	arch, err := testenv.NginxStandIn().Archive() // serves /usr/share/nginx/html on :80
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hosts[0].rt.ImportImage(ctx, bytes.NewReader(arch)); err != nil { // one containerd namespace for both
		t.Fatalf("import the nginx stand-in: %v", err)
	}
	byNode := map[string]*netLabHost{}
	var agents []*runningAgent
	var dataDirs []string
	for _, h := range hosts {
		byNode[h.name] = h
		a, dir := startNetLabAgent(t, cp, h, netnsPrefix)
		agents, dataDirs = append(agents, a), append(dataDirs, dir)
	}
	// Runs before the agents stop: pods go the normal way (CNI DEL).
	t.Cleanup(func() {
		_ = c.Delete(ctx, api.MustKindOf(&api.Deployment{}), "default", "web", api.DeleteOptions{})
		testwait.Until(t, 60*time.Second, func() (bool, string) {
			ps := listPods(t, c, "default", "app=web")
			return len(ps) == 0, podSummary(ps)
		})
	})
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		var why []string
		for _, h := range hosts {
			n, err := client.Get[*api.Node](ctx, c, "", h.name)
			if err != nil {
				return false, err.Error()
			}
			if n.Spec.PodCIDR == "" || n.Status.DaemonEndpoints.KubeletEndpoint.Port == 0 {
				why = append(why, h.name+": no pod CIDR or agent port yet")
			}
		}
		return len(why) == 0, strings.Join(why, "; ")
	})

	// The lab's objects: a page, 3 replicas serving it, NodePort 30080.
	const page1, page2 = "<h1>skiff lab: page one</h1>\n", "<h1>skiff lab: page two</h1>\n"
	if _, err := c.Create(ctx, &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: "page", Namespace: "default"},
		Data: map[string]string{"index.html": page1}}); err != nil {
		t.Fatal(err)
	}
	html := "/usr/share/nginx/html"
	d := deployment("default", "web", 3, api.Container{Name: "nginx", Image: "nginx:alpine", ImagePullPolicy: "IfNotPresent",
		// /hostname tells the replicas apart; /tmp/ready is the readiness
		// switch; the shell ends on SIGTERM (httpd as PID 1 would not).
		Command:      []string{"sh", "-c", "hostname > " + html + "/hostname; touch /tmp/ready; trap 'exit 0' TERM; httpd -f -p 80 -h " + html + " & wait"},
		Ports:        []api.ContainerPort{{Name: "http", ContainerPort: 80}},
		VolumeMounts: []api.VolumeMount{{Name: "page", MountPath: html + "/index.html", SubPath: "index.html"}},
		ReadinessProbe: &api.Probe{Exec: &api.ExecAction{Command: []string{"cat", "/tmp/ready"}},
			PeriodSeconds: 1, FailureThreshold: 1},
	})
	d.Spec.Template.Spec.Volumes = []api.Volume{{Name: "page", ConfigMap: &api.ConfigMapVolumeSource{Name: "page"}}}
	if _, err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	svc := &api.Service{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default"}}
	svc.Spec = api.ServiceSpec{Type: "NodePort", Selector: map[string]string{"app": "web"},
		Ports: []api.ServicePort{{Port: 80, TargetPort: intstr.FromString("http"), NodePort: netLabNodePort}}}
	if _, err := c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}

	readyPods := func() []*api.Pod {
		var out []*api.Pod
		for _, p := range listPods(t, c, "default", "app=web") {
			if p.DeletionTimestamp == nil && p.Status.Phase == api.PodRunning && allReady(p) && p.Status.PodIP != "" {
				out = append(out, p)
			}
		}
		return out
	}
	endpointIPs := func() []string {
		ep, err := client.Get[*api.Endpoints](ctx, c, "default", "web")
		if err != nil {
			return nil
		}
		var ips []string
		for _, ss := range ep.Subsets {
			for _, a := range ss.Addresses {
				ips = append(ips, a.IP)
			}
		}
		sort.Strings(ips)
		return ips
	}
	var pods []*api.Pod
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		pods = readyPods()
		return len(pods) == 3 && len(endpointIPs()) == 3, podSummary(listPods(t, c, "default", "app=web")) + fmt.Sprintf(" endpoints %v", endpointIPs())
	})
	t.Logf("3 replicas ready and in Endpoints after %v", time.Since(start).Round(time.Millisecond))
	nodesUsed := map[string]bool{}
	for _, p := range pods {
		nodesUsed[p.Spec.NodeName] = true
	}
	t.Logf("replicas on nodes %v", slices.Sorted(func(yield func(string) bool) {
		for n := range nodesUsed {
			if !yield(n) {
				return
			}
		}
	}))

	nodePortURL := fmt.Sprintf("http://127.0.0.1:%d", netLabNodePort)
	// 1. curl localhost:30080 on every node: the ConfigMap's page.
	for _, h := range hosts {
		var body string
		testwait.Until(t, 20*time.Second, func() (bool, string) {
			var err error
			body, err = h.get(nodePortURL + "/")
			return err == nil && body == page1, fmt.Sprintf("from %s: %q %v", h.name, body, err)
		})
	}
	// ... spread over all replicas.
	names := func(ps []*api.Pod) map[string]bool {
		m := map[string]bool{}
		for _, p := range ps {
			m[p.Name] = true
		}
		return m
	}
	want := names(pods)
	// Endpoints list all three before every node's service proxy has
	// written them into its rules: keep asking (in rounds of 20) until each
	// replica has answered from this host, within a deadline.
	for _, h := range hosts {
		seen := map[string]int{}
		testwait.Until(t, 30*time.Second, func() (bool, string) {
			for range 20 {
				b, err := h.get(nodePortURL + "/hostname")
				if err != nil {
					t.Fatalf("from %s: %v", h.name, err)
				}
				seen[strings.TrimSpace(b)]++
			}
			for n := range want {
				if seen[n] == 0 {
					return false, fmt.Sprintf("every replica to answer localhost:%d from %s: reached %v, never %s", netLabNodePort, h.name, seen, n)
				}
			}
			return true, ""
		})
		t.Logf("from %s: replicas served %v", h.name, seen)
	}

	// Cluster DNS from a replica (dns_test.go).
	netLabDNS(t, c, pods[0], byNode[pods[0].Spec.NodeName])

	// Measure: the NodePort path against straight to a pod IP, same host.
	netLabMeasure(t, hosts[0], nodePortURL+"/", "http://"+net.JoinHostPort(pods[0].Status.PodIP, "80")+"/")

	// 2. port-forward to a pod, from this namespace through the API server.
	cfgPath := filepath.Join(t.TempDir(), "config")
	if err := client.WriteKubeconfig(cfgPath, cp.ClientConfig()); err != nil {
		t.Fatal(err)
	}
	pfPod := pods[0]
	pfCtx, pfCancel := context.WithCancel(ctx)
	var pfOut, pfErr lockedBuffer
	pfDone := make(chan struct{})
	go func() {
		defer close(pfDone)
		_ = cli.Main(pfCtx, []string{"--kubeconfig", cfgPath, "port-forward", "pod/" + pfPod.Name, ":80"}, &pfOut, &pfErr)
	}()
	stopPF := func() {
		pfCancel()
		select {
		case <-pfDone:
		case <-time.After(10 * time.Second):
			t.Error("port-forward did not stop within 10s")
		}
	}
	t.Cleanup(stopPF)
	re := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 80`)
	var local string
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		if m := re.FindStringSubmatch(pfOut.String()); m != nil {
			local = m[1]
		}
		select {
		case <-pfDone:
			if local == "" { // it gave up: say what the API server could not reach
				t.Fatalf("port-forward ended: %s\n%s", pfOut.String()+pfErr.String(), netLabAgentsSeen(ctx, c, hosts))
			}
		default:
		}
		return local != "", pfOut.String() + pfErr.String()
	})
	for range 3 {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://127.0.0.1:" + local + "/hostname")
		if err != nil {
			t.Fatalf("through port-forward: %v (stderr %s)", err, pfErr.String())
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.TrimSpace(string(b)) != pfPod.Name {
			t.Errorf("through port-forward to %s: %q", pfPod.Name, b)
		}
	}
	if !strings.Contains(pfOut.String(), "Handling connection for "+local) {
		t.Errorf("port-forward output: %q", pfOut.String())
	}
	stopPF()

	// 3. A backend whose readiness fails leaves Endpoints before it gets
	// traffic, and comes back when ready.
	victim := pods[1]
	vh := byNode[victim.Spec.NodeName]
	vid := containerIDOf(t, victim)
	if code, err := vh.rt.Exec(ctx, vid, runtime.ExecOptions{Cmd: []string{"rm", "/tmp/ready"}}); err != nil || code != 0 {
		t.Fatalf("rm /tmp/ready in %s: %d %v", victim.Name, code, err)
	}
	testwait.Until(t, 15*time.Second, func() (bool, string) {
		ips := endpointIPs()
		return len(ips) == 2 && !slices.Contains(ips, victim.Status.PodIP), fmt.Sprintf("endpoints %v, victim %s", ips, victim.Status.PodIP)
	})
	for _, h := range hosts {
		// The proxy rewrites its rules within MinSyncInterval of the change.
		testwait.Until(t, 5*time.Second, func() (bool, string) {
			for range 30 {
				b, err := h.get(nodePortURL + "/hostname")
				if err != nil {
					return false, err.Error()
				}
				if strings.TrimSpace(b) == victim.Name {
					return false, "an unready replica got a request from " + h.name
				}
			}
			return true, ""
		})
	}
	if code, err := vh.rt.Exec(ctx, vid, runtime.ExecOptions{Cmd: []string{"touch", "/tmp/ready"}}); err != nil || code != 0 {
		t.Fatalf("touch /tmp/ready in %s: %d %v", victim.Name, code, err)
	}
	testwait.Until(t, 15*time.Second, func() (bool, string) {
		ips := endpointIPs()
		return slices.Contains(ips, victim.Status.PodIP), fmt.Sprintf("endpoints %v", ips)
	})
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		b, err := hosts[0].get(nodePortURL + "/hostname")
		return err == nil && strings.TrimSpace(b) == victim.Name, fmt.Sprintf("%q %v", b, err)
	})

	// ... and a killed one: its container's processes die, the pod leaves
	// Endpoints, the agent restarts the container, and it comes back.
	st, err := vh.rt.ContainerStatus(ctx, vid)
	if err != nil || st.Pid == 0 {
		t.Fatalf("status of %s: %+v %v", vid, st, err)
	}
	if err := syscall.Kill(int(st.Pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 15*time.Second, func() (bool, string) {
		ips := endpointIPs()
		return !slices.Contains(ips, victim.Status.PodIP), fmt.Sprintf("endpoints %v after the kill", ips)
	})
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		ips := endpointIPs()
		return len(ips) == 3 && slices.Contains(ips, victim.Status.PodIP), fmt.Sprintf("endpoints %v after the restart", ips)
	})

	// 4. Edit the page and `rollout restart`: every node serves the new one.
	cm, err := client.Get[*api.ConfigMap](ctx, c, "default", "page")
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["index.html"] = page2
	if _, err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		dep, err := client.Get[*api.Deployment](ctx, c, "default", "web")
		if err != nil {
			return false, err.Error()
		}
		if dep.Spec.Template.Annotations == nil {
			dep.Spec.Template.Annotations = map[string]string{}
		}
		dep.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = time.Now().Format(time.RFC3339)
		_, err = c.Update(ctx, dep)
		return err == nil, fmt.Sprint(err) // a conflict: read again
	})
	old := names(pods)
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		ps := listPods(t, c, "default", "app=web")
		rp := readyPods()
		for _, p := range ps {
			if old[p.Name] {
				return false, "old replicas left: " + podSummary(ps)
			}
		}
		return len(ps) == 3 && len(rp) == 3 && len(endpointIPs()) == 3, podSummary(ps)
	})
	for _, h := range hosts {
		testwait.Until(t, 10*time.Second, func() (bool, string) {
			for range 10 {
				b, err := h.get(nodePortURL + "/")
				if err != nil || b != page2 {
					return false, fmt.Sprintf("from %s: %q %v", h.name, b, err)
				}
			}
			return true, ""
		})
	}
	t.Logf("nginx lab done in %v", time.Since(start).Round(time.Millisecond))

	// 5. skiff reset on nl2 (reset_lab_test.go).
	netLabReset(t, c, agents[1], hosts[1], dataDirs[1], netnsPrefix)
}

// netLabMeasure runs a bounded load (fixed concurrency and count, a new
// connection per request, as busybox httpd closes after each response)
// from inside h against two URLs and logs requests/s and p99 of each and
// their ratio.
func netLabMeasure(t *testing.T, h *netLabHost, nodePort, podIP string) {
	t.Helper()
	const concurrency, total = 8, 400
	run := func(url string) (rps float64, p50, p99 time.Duration) {
		lat := make([]time.Duration, total)
		var next sync.Mutex
		i := 0
		var wg sync.WaitGroup
		began := time.Now()
		var firstErr error
		var errMu sync.Mutex
		for range concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					next.Lock()
					k := i
					i++
					next.Unlock()
					if k >= total {
						return
					}
					t0 := time.Now()
					_, err := h.get(url)
					lat[k] = time.Since(t0)
					if err != nil {
						errMu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						errMu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		el := time.Since(began)
		if firstErr != nil {
			t.Fatalf("measure %s: %v", url, firstErr)
		}
		slices.Sort(lat)
		return float64(total) / el.Seconds(), percentile(lat, 0.50), percentile(lat, 0.99)
	}
	run(podIP) // warm up
	pr, p50p, p99p := run(podIP)
	nr, p50n, p99n := run(nodePort)
	msg := fmt.Sprintf("nginx lab, %d GETs at concurrency %d from one host namespace, new connection each:\n"+
		"  pod IP        %8.0f req/s  p50 %s ms  p99 %s ms\n"+
		"  NodePort 30080 (localhost) %8.0f req/s  p50 %s ms  p99 %s ms\n"+
		"  NodePort/pod IP: throughput %.2f, p99 %.2f",
		total, concurrency, pr, ms(p50p), ms(p99p), nr, ms(p50n), ms(p99n), nr/pr, float64(p99n)/float64(p99p))
	t.Log(msg)
	if os.Getenv("SKIFF_BENCH") != "" {
		fmt.Println(msg)
	}
}
