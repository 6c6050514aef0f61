package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"skiff.dev/skiff/agent/network/netnstest"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/cli"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testenv"
	"skiff.dev/skiff/internal/testwait"
)

// The course labs as a student walks them (issue 7's "Done when"), with the
// CLI, against `skiff up --nodes 3 --gpus sim:dgxa100,sim:dgxa100,none` on
// real containerd. The cluster runs in a network namespace of its own (a
// pretend machine, reached over a veth at labsNodeIP), so its bridges and
// iptables rules never touch the host's; the CLI runs in this process
// against the API server there. Images are the stand-ins of testenv under
// the course's real names, imported into the test's containerd namespace.

const (
	labsHostIP = "10.213.77.1"
	labsNodeIP = "10.213.77.2"
	labsNS     = "gpu-demo"
)

// labsCluster is the running cluster of TestLabs.
type labsCluster struct {
	cfgPath string
	c       *client.Client
	netns   *netnstest.NS
	out     *lockedBuffer // skiff up's output
	cni     bool          // the pod network is cni (pods have IPs, the proxy runs)
	home    string        // skiff up's $HOME (.skiff/kubeconfig, .kube/config)
	dataDir string        // skiff up's --data-dir
	bin     string        // the skiff binary that runs the cluster
	ctrdNS  string        // the containerd namespace of its images and containers
}

// sk runs the skiff CLI in process and returns its stdout; a failing
// command fails the test.
func (l *labsCluster) sk(t *testing.T, args ...string) string {
	t.Helper()
	out, err := l.try(args...)
	if err != nil {
		t.Fatalf("skiff %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (l *labsCluster) try(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cli.Main(ctx, append([]string{"--kubeconfig", l.cfgPath}, args...), &out, &errOut)
	if err != nil {
		return out.String() + errOut.String(), err
	}
	return out.String(), nil
}

// until polls a CLI command until check accepts its output.
func (l *labsCluster) until(t *testing.T, timeout time.Duration, check func(string) bool, args ...string) string {
	t.Helper()
	var last string
	testwait.Until(t, timeout, func() (bool, string) {
		out, err := l.try(args...)
		last = out
		if err != nil {
			return false, err.Error() + ": " + out
		}
		return check(out), "skiff " + strings.Join(args, " ") + ":\n" + out
	})
	return last
}

// startLabsCluster starts the 3-node cluster in a network namespace and
// waits until `skiff up` says its nodes are Ready.
func startLabsCluster(t *testing.T) *labsCluster {
	t.Helper()
	return startLabsClusterWith(t, labsOptions{gpus: "sim:dgxa100,sim:dgxa100,none", hostIP: labsHostIP, nodeIP: labsNodeIP, nsPrefix: "skl"})
}

// labsOptions are what differs between clusters of startLabsClusterWith:
// the nodes' GPUs (skiff up --gpus) and the pretend machine's addresses
// (a /30: host side, node side), so two tests' clusters cannot collide.
type labsOptions struct {
	gpus, hostIP, nodeIP, nsPrefix string
	// args: more flags of skiff up.
	args []string
}

// startLabsClusterWith is startLabsCluster with other GPUs and addresses.
func startLabsClusterWith(t *testing.T, o labsOptions) *labsCluster {
	t.Helper()
	e := newCtrdEnv(t)
	netnstest.Require(t)
	rt := e.runtime(t)
	// nginx stops at once on SIGTERM; busybox httpd as PID 1 ignores it,
	// so the stand-in's shell does it, or every scale-down would wait out
	// the 30 s grace period.
	// nginx:1.16.0 is the image of `helm create`'s chart (helm_test.go).
	nginx := testenv.NginxStandIn("docker.io/library/nginx:latest", "docker.io/library/nginx:alpine", "docker.io/library/nginx:1.16.0")
	nginx.Cmd = []string{"sh", "-c", "trap 'exit 0' TERM; " + strings.Join(nginx.Cmd, " ") + " & wait"}
	// busybox:1.28 is the Kubernetes docs' load generator's image.
	for _, img := range []testenv.Image{nginx, testenv.CUDAStandIn(), testenv.Busybox("docker.io/library/busybox:1.28")} {
		arch, err := img.Archive()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.ImportImage(context.Background(), bytes.NewReader(arch)); err != nil {
			t.Fatalf("import %v: %v", img.Names, err)
		}
	}

	ns := netnstest.New(t, o.nsPrefix)
	hostIf := "v" + ns.Name[len(ns.Name)-6:] + "h"
	netnstest.MustRun(t, "ip", "link", "add", hostIf, "type", "veth", "peer", "name", "eth0", "netns", ns.Name)
	netnstest.MustRun(t, "ip", "addr", "add", o.hostIP+"/30", "dev", hostIf)
	netnstest.MustRun(t, "ip", "link", "set", hostIf, "up")
	ns.MustRun(t, "ip", "addr", "add", o.nodeIP+"/30", "dev", "eth0")
	ns.MustRun(t, "ip", "link", "set", "eth0", "up")
	ns.MustRun(t, "ip", "route", "add", "default", "via", o.hostIP)

	bin := skiffBinary(t)
	home := t.TempDir()
	dataDir := filepath.Join(home, "data")
	before := leftovers()
	// nsenter, not `ip netns exec`: only the network namespace changes, so
	// the pods' network namespaces skiff mounts stay visible to containerd.
	cmd := exec.Command("nsenter", "--net="+ns.Path(), "--", bin, "up",
		"--nodes", "3", "--gpus", o.gpus, "--node-name", "lab",
		"--runtime", "containerd", "--containerd-address", e.addr, "--containerd-namespace", e.ns,
		"--no-gossip", "--data-dir", dataDir, "--listen", o.nodeIP+":7443")
	cmd.Args = append(cmd.Args, o.args...)
	cmd.Env = append(os.Environ(), "HOME="+home)
	pr, pw := io.Pipe()
	out := &lockedBuffer{}
	cmd.Stdout = io.MultiWriter(out, pw)
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); pw.Close(); close(done) }()
	t.Cleanup(func() {
		// Ctrl-C, as a student stops it: the proxy removes its rules.
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("skiff up did not stop within 30s of SIGINT; killing it")
			_ = cmd.Process.Kill()
			<-done
		}
		// Ctrl-C leaves the pods running, network namespaces and all:
		// skiff reset removes them, as the student's next step would
		// (in the node's network namespace, where skiff up ran).
		said, err := exec.Command("nsenter", "--net="+ns.Path(), "--", bin, "reset", "--data-dir", dataDir).CombinedOutput()
		if err != nil {
			t.Errorf("skiff reset after the lab: %v\n%s", err, said)
		}
		// Named here, with skiff up's output, not only by TestMain.
		if left := leftSince(before); len(left) > 0 {
			t.Errorf("left behind after skiff reset: %s\nskiff reset said:\n%s", strings.Join(left, " "), said)
		}
		if t.Failed() {
			t.Logf("skiff up output:\n%s", out.String())
		}
	})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "3 nodes are Ready") {
				close(ready)
				break
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case <-ready:
	case <-done:
		t.Fatalf("skiff up exited:\n%s", out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("skiff up: no Ready nodes within 60s:\n%s", out.String())
	}
	l := &labsCluster{cfgPath: filepath.Join(dataDir, "kubeconfig"), netns: ns, out: out, home: home, dataDir: dataDir, bin: bin, ctrdNS: e.ns}
	cfg, err := client.LoadKubeconfig(l.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if l.c, err = client.New(cfg); err != nil {
		t.Fatal(err)
	}
	// Wait for the rest of the startup output (network, what to try).
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(out.String(), "Try, in another terminal"), out.String()
	})
	l.cni = strings.Contains(out.String(), "pod network: cni")
	t.Logf("skiff up:\n%s", out.String())
	return l
}

func TestLabs(t *testing.T) {
	start := time.Now()
	l := startLabsCluster(t)
	ctx := context.Background()

	t.Run("Up", func(t *testing.T) {
		o := l.out.String()
		for _, want := range []string{
			"lab-1 --gpus sim:dgxa100", "lab-2 --gpus sim:dgxa100", "lab-3 --gpus none",
			"8x NVIDIA A100-SXM4-40GB (simulated", "Choose other GPUs per node with --gpus",
		} {
			if !strings.Contains(o, want) {
				t.Errorf("skiff up output lacks %q:\n%s", want, o)
			}
		}
		nodes := l.sk(t, "get", "nodes")
		if n := strings.Count(nodes, " Ready "); n != 3 {
			t.Errorf("get nodes: %d Ready, want 3:\n%s", n, nodes)
		}
	})

	t.Run("Lab1Nginx", func(t *testing.T) {
		l.sk(t, "apply", "-f", "../examples/lab1-nginx.yaml")
		want := 3
		if !l.cni {
			t.Log("pod network none: the three nginx replicas share the node's network and port 80, so only one can run")
			want = 1
		}
		l.until(t, 60*time.Second, func(o string) bool {
			return strings.Contains(o, "configmap/nginx-page") && strings.Contains(o, "service/nginx-demo") &&
				strings.Contains(o, "80:30080/TCP") && (!l.cni || regexp.MustCompile(`deployment.apps/nginx-demo\s+3/3`).MatchString(o)) &&
				strings.Count(o, "Running") >= want
		}, "get", "configmap,deploy,pods,svc", "-n", labsNS)

		t.Run("Page30080", func(t *testing.T) {
			if !l.cni {
				t.Skip("the page on :30080 needs the service proxy, which runs with the cni pod network (root, containerd, CNI plugins in /usr/lib/cni); this cluster runs with --network none")
			}
			// curl localhost:30080 on the node.
			var page string
			testwait.Until(t, 30*time.Second, func() (bool, string) {
				var err error
				derr := netnstest.DoPath(l.netns.Path(), func() error { page, err = httpGet("127.0.0.1:30080"); return nil })
				if derr != nil {
					return false, derr.Error()
				}
				return err == nil && strings.Contains(page, "Hello from skiff"), fmt.Sprintf("curl localhost:30080 on the node: %v %s", err, page)
			})
			// And from another machine, at the node's address.
			testwait.Until(t, 10*time.Second, func() (bool, string) {
				o, err := httpGet(labsNodeIP + ":30080")
				return err == nil && strings.Contains(o, "Hello from skiff"), fmt.Sprintf("curl %s:30080: %v %s", labsNodeIP, err, o)
			})
			t.Logf("the lab 1 page: %s", strings.TrimSpace(page))
		})

		l.sk(t, "scale", "deployment", "nginx-demo", "-n", labsNS, "--replicas=2")
		wide := l.until(t, 60*time.Second, func(o string) bool {
			return strings.Count(o, "nginx-demo-") == 2 && strings.Count(o, "Running") == 2 && !strings.Contains(o, "Terminating")
		}, "get", "pods", "-n", labsNS, "-l", "app=nginx-demo", "-o", "wide")
		if !strings.Contains(wide, "IP") || !strings.Contains(wide, "NODE") || !regexp.MustCompile(`lab-\d`).MatchString(wide) {
			t.Errorf("get pods -o wide lacks IP and NODE:\n%s", wide)
		}
		if l.cni && !regexp.MustCompile(`10\.244\.\d+\.\d+`).MatchString(wide) {
			t.Errorf("get pods -o wide: no pod IP from the pod CIDRs:\n%s", wide)
		}
	})

	t.Run("Lab2GPUPod", func(t *testing.T) {
		l.sk(t, "apply", "-f", "../examples/lab2-gpu-pod.yaml")
		l.until(t, 60*time.Second, func(o string) bool { return strings.Contains(o, "Completed") },
			"get", "pod", "gpu-test", "-n", labsNS)
		logs := l.sk(t, "logs", "gpu-test", "-n", labsNS)
		if !strings.Contains(logs, "NVIDIA-SMI") || strings.Count(logs, "A100-SXM4-40GB") != 1 {
			t.Errorf("logs gpu-test: want the nvidia-smi table with one A100:\n%s", logs)
		}
		node := l.sk(t, "get", "pod", "gpu-test", "-n", labsNS, "-o", "jsonpath={.spec.nodeName}")
		if node != "lab-1" && node != "lab-2" {
			t.Errorf("gpu-test ran on %q, want a DGX A100 node (lab-1 or lab-2)", node)
		}
	})

	t.Run("Lab3Contention", func(t *testing.T) {
		l.sk(t, "apply", "-f", "../examples/lab3-gpu-deployment.yaml")
		l.until(t, 60*time.Second, func(o string) bool { return strings.Contains(o, "Running") },
			"get", "pods", "-n", labsNS, "-l", "app=gpu-inference")
		// logs -l shows the last 10 lines of each pod, like kubectl's.
		l.until(t, 20*time.Second, func(o string) bool { return strings.Contains(o, "NVIDIA_VISIBLE_DEVICES=GPU-") },
			"logs", "-n", labsNS, "-l", "app=gpu-inference")
		if logs := l.sk(t, "logs", "-n", labsNS, "deployment/gpu-inference"); !strings.Contains(logs, "A100-SXM4-40GB") {
			t.Errorf("logs deployment/gpu-inference: no nvidia-smi table:\n%s", logs)
		}
		// 17 GPUs asked of two DGX A100s (16) and a node without GPUs.
		l.sk(t, "scale", "deployment", "gpu-inference", "-n", labsNS, "--replicas=17")
		l.until(t, 90*time.Second, func(o string) bool { return strings.Count(o, "Running") == 16 && strings.Count(o, "Pending") == 1 },
			"get", "pods", "-n", labsNS, "-l", "app=gpu-inference")
		pending := l.sk(t, "get", "pods", "-n", labsNS, "--field-selector=status.phase=Pending", "-o", "jsonpath={.items[0].metadata.name}")
		if !strings.HasPrefix(pending, "gpu-inference-") {
			t.Fatalf("the pending pod: %q", pending)
		}
		const want = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
		desc := l.until(t, 20*time.Second, func(o string) bool { return strings.Contains(o, want) },
			"describe", "pod", pending, "-n", labsNS)
		ev := desc[strings.Index(desc, "Events:"):]
		if !strings.Contains(ev, "FailedScheduling") || !strings.Contains(ev, want) {
			t.Errorf("describe pod %s: Events lack FailedScheduling %q:\n%s", pending, want, ev)
		}
		t.Logf("describe pod %s | grep -A5 Events:\n%s", pending, firstLines(ev, 6))
		l.sk(t, "scale", "deployment", "gpu-inference", "-n", labsNS, "--replicas=2")
		l.until(t, 60*time.Second, func(o string) bool {
			return strings.Count(o, "gpu-inference-") == 2 && strings.Count(o, "Running") == 2
		}, "get", "pods", "-n", labsNS, "-l", "app=gpu-inference")
	})

	t.Run("ExerciseNodes", func(t *testing.T) {
		name := l.sk(t, "get", "nodes", "-o", "jsonpath={.items[0].metadata.name}")
		if name != "lab-1" {
			t.Errorf("first node %q, want lab-1", name)
		}
		desc := l.sk(t, "describe", "node", name)
		if got := grepA(desc, "nvidia.com", 5); !regexp.MustCompile(`nvidia.com/gpu:\s+8`).MatchString(got) {
			t.Errorf("describe node %s | grep -A 5 nvidia.com: no nvidia.com/gpu: 8:\n%s", name, got)
		}
		var list struct {
			Items []api.Node `json:"items"`
		}
		if err := json.Unmarshal([]byte(l.sk(t, "get", "nodes", "-o", "json")), &list); err != nil {
			t.Fatal(err)
		}
		a100 := 0
		for _, n := range list.Items {
			if n.Labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB" && n.Labels["nvidia.com/gpu.count"] == "8" {
				a100++
			}
		}
		if a100 != 2 || len(list.Items) != 3 {
			t.Errorf("get nodes -o json: %d nodes, %d labelled as 8x A100; want 3 and 2", len(list.Items), a100)
		}
	})

	t.Run("ExerciseServiceAndAffinity", func(t *testing.T) {
		l.sk(t, "apply", "-f", "../examples/gpu-clusterip-service.yaml")
		l.until(t, 30*time.Second, func(o string) bool { return strings.Contains(o, ":8080") },
			"get", "endpoints", "gpu-inference", "-n", labsNS)
		l.sk(t, "apply", "-f", "../examples/gpu-node-affinity.yaml")
		l.until(t, 60*time.Second, func(o string) bool { return strings.Contains(o, "Completed") },
			"get", "pod", "gpu-affinity", "-n", labsNS)
		node := l.sk(t, "get", "pod", "gpu-affinity", "-n", labsNS, "-o", "jsonpath={.spec.nodeName}")
		if node != "lab-1" && node != "lab-2" {
			t.Errorf("gpu-affinity ran on %q, want an A100 node", node)
		}
		if logs := l.sk(t, "logs", "gpu-affinity", "-n", labsNS); !strings.Contains(logs, "A100") {
			t.Errorf("nvidia-smi -L in gpu-affinity: %s", logs)
		}
	})

	t.Run("Cleanup", func(t *testing.T) {
		for _, f := range []string{"gpu-node-affinity", "gpu-clusterip-service", "lab3-gpu-deployment", "lab2-gpu-pod", "lab1-nginx"} {
			if out, err := l.try("delete", "-f", "../examples/"+f+".yaml"); err != nil && !strings.Contains(out, "NotFound") && !strings.Contains(out, "not found") {
				t.Errorf("delete -f %s: %v\n%s", f, err, out)
			}
		}
		if out, err := l.try("delete", "namespace", labsNS); err != nil && !strings.Contains(out, "not found") {
			t.Errorf("delete namespace: %v\n%s", err, out)
		}
		testwait.Until(t, 60*time.Second, func() (bool, string) {
			var left []string
			for _, obj := range []api.Object{&api.Deployment{}, &api.ReplicaSet{}, &api.Pod{}, &api.ConfigMap{}, &api.Service{}} {
				objs, _, err := l.c.List(ctx, api.MustKindOf(obj), labsNS, api.ListOptions{})
				if err != nil {
					return false, err.Error()
				}
				for _, o := range objs {
					left = append(left, fmt.Sprintf("%T/%s", o, o.GetObjectMeta().Name))
				}
			}
			_, err := client.Get[*api.Namespace](ctx, l.c, "", labsNS)
			return len(left) == 0 && api.IsNotFound(err), fmt.Sprintf("left in %s: %v; namespace: %v", labsNS, left, err)
		})
	})
	t.Logf("TestLabs took %v", time.Since(start).Round(time.Millisecond))
}

// httpGet is a plain HTTP/1.0 GET of / on addr, dialled from the calling
// goroutine (so from inside a namespace under netnstest.DoPath); it
// returns the whole response.
func httpGet(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\nHost: localhost\r\n\r\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	return string(b), err
}

// grepA is `grep -A n pattern`.
func grepA(s, pattern string, n int) string {
	lines := strings.Split(s, "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		if strings.Contains(lines[i], pattern) {
			end := min(len(lines), i+n+1)
			out = append(out, lines[i:end]...)
			i = end - 1
		}
	}
	return strings.Join(out, "\n")
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
