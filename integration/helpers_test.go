package integration

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/cluster"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/internal/testenv"
	"skiff.dev/skiff/node"
	"skiff.dev/skiff/runtime"
	ctrd "skiff.dev/skiff/runtime/containerd"
)

// startControlPlane runs a control plane on a loopback port with its data in
// a temp dir, assembled as `skiff up` does (cluster.StartControlPlane);
// tune adjusts the config first. It stops at cleanup.
func startControlPlane(t testing.TB, tune func(*controlplane.Config)) (*controlplane.ControlPlane, *client.Client) {
	t.Helper()
	cfg := controlplane.DefaultConfig(filepath.Join(t.TempDir(), "server"))
	cfg.API.Listen = "127.0.0.1:0"
	if tune != nil {
		tune(&cfg)
	}
	cp, err := cluster.StartControlPlane(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	c, err := client.New(cp.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cp, c
}

// runningAgent is a node started by startNode.
type runningAgent struct {
	name string
	node *node.Node
	once sync.Once
}

// kill stops the agent abruptly, as kill -9 would as far as the cluster
// sees it: its goroutines end, its containers keep running, nothing is
// cleaned up. It fails the test if the agent had ended with an error.
// Safe twice.
func (a *runningAgent) kill(t testing.TB) {
	t.Helper()
	a.once.Do(func() {
		stopped := make(chan error, 1)
		go func() { stopped <- a.node.Stop() }()
		select {
		case err := <-stopped:
			if err != nil {
				t.Errorf("agent %s: %v", a.name, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("agent %s did not stop within 30s", a.name)
		}
	})
}

// testNodeConfig is a node named name on rt, with its state in dataDir, no
// GPU stack, no pod network and short heartbeats and backoffs; tune
// adjusts the agent's config last.
func testNodeConfig(rt runtime.Runtime, name, dataDir string, tune func(*agent.Config)) node.Config {
	cfg := node.DefaultConfig(dataDir)
	cfg.Name, cfg.NodeIP, cfg.UseRuntime = name, "127.0.0.1", rt
	cfg.GPUs, cfg.Network = "", node.NetworkNone // no GPU stack: a test brings its own devices
	cfg.TuneAgent = func(acfg *agent.Config) {
		acfg.HeartbeatInterval = 500 * time.Millisecond
		acfg.BaseBackoff, acfg.MaxBackoff = 200*time.Millisecond, 2*time.Second
		acfg.Resync = 5 * time.Second
		if tune != nil {
			tune(acfg)
		}
	}
	return cfg
}

// startNode runs a node against cp over HTTP, as `skiff agent` does
// (cluster.StartNode: node.Start, then wait until its Node is Ready, so
// that a test's first pod does not meet a cluster without nodes and the
// scheduler's backoff). Killed at cleanup.
func startNode(t testing.TB, cp *controlplane.ControlPlane, cfg node.Config) *runningAgent {
	t.Helper()
	c, err := client.New(cp.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	n, err := cluster.StartNode(context.Background(), cfg, c, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ra := &runningAgent{name: cfg.Name, node: n}
	t.Cleanup(func() { ra.kill(t) })
	return ra
}

// startAgent runs the node of testNodeConfig against cp (startNode).
func startAgent(t testing.TB, cp *controlplane.ControlPlane, rt runtime.Runtime, name, dataDir string, tune func(*agent.Config)) *runningAgent {
	t.Helper()
	return startNode(t, cp, testNodeConfig(rt, name, dataDir, tune))
}

// ctrdEnv is a test's own containerd namespace with the test images imported.
type ctrdEnv struct {
	addr, ns string
}

var nsUnsafe = regexp.MustCompile(`[^A-Za-z0-9]+`)

// newCtrdEnv skips (or fails, in CI) without containerd, and gives the test
// a containerd namespace of its own, emptied of containers before and after.
func newCtrdEnv(t testing.TB) *ctrdEnv {
	t.Helper()
	addr := testenv.ContainerdAddress(t)
	testenv.RequireBusybox(t)
	if os.Geteuid() != 0 {
		t.Skip("containerd integration tests need root (runc, cgroups)")
	}
	e := &ctrdEnv{addr: addr, ns: "skiff-it-" + strings.ToLower(strings.Trim(nsUnsafe.ReplaceAllString(t.Name(), "-"), "-"))}
	rt := e.runtime(t)
	e.removeAll(t, rt)
	t.Cleanup(func() { e.removeAll(t, rt) })
	return e
}

// runtime opens a containerd runtime in the test's namespace, with the test
// images imported; it is closed at cleanup.
func (e *ctrdEnv) runtime(t testing.TB) runtime.Runtime {
	t.Helper()
	cfg := ctrd.DefaultConfig()
	cfg.Address, cfg.Namespace, cfg.StateDir = e.addr, e.ns, t.TempDir()
	cfg.CDISpecDirs = []string{t.TempDir()}
	rt, err := ctrd.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	arch, err := testenv.Busybox("docker.io/library/busybox:latest", "docker.io/library/busybox:1.36").Archive()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.ImportImage(context.Background(), bytes.NewReader(arch)); err != nil {
		t.Fatalf("import busybox: %v", err)
	}
	return rt
}

func (e *ctrdEnv) removeAll(t testing.TB, rt runtime.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := rt.ListContainers(ctx, nil)
	if err != nil {
		t.Errorf("list containers of %s: %v", e.ns, err)
		return
	}
	for _, c := range cs {
		if err := rt.RemoveContainer(ctx, c.ID); err != nil {
			t.Errorf("remove container %s: %v", c.ID, err)
		}
	}
}

// Object builders.

func namespace(name string) *api.Namespace {
	return &api.Namespace{ObjectMeta: api.ObjectMeta{Name: name}}
}

func deployment(ns, name string, replicas int32, c api.Container) *api.Deployment {
	d := &api.Deployment{ObjectMeta: api.ObjectMeta{Name: name, Namespace: ns}}
	d.Spec.Replicas = &replicas
	d.Spec.Selector = &api.LabelSelector{MatchLabels: map[string]string{"app": name}}
	d.Spec.Template.Labels = map[string]string{"app": name}
	d.Spec.Template.Spec.Containers = []api.Container{c}
	return d
}

func listPods(t testing.TB, c client.Interface, ns, selector string) []*api.Pod {
	t.Helper()
	ps, _, err := client.List[*api.Pod](context.Background(), c, ns, api.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	return ps
}

// runningPods counts live pods in phase Running with every container ready.
func runningPods(ps []*api.Pod) (n int) {
	for _, p := range ps {
		if p.DeletionTimestamp == nil && p.Status.Phase == api.PodRunning && allReady(p) {
			n++
		}
	}
	return n
}

func allReady(p *api.Pod) bool {
	if len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if !cs.Ready {
			return false
		}
	}
	return true
}

func podSummary(ps []*api.Pod) string {
	var b strings.Builder
	for _, p := range ps {
		reason := ""
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Waiting != nil {
				reason += " waiting:" + cs.State.Waiting.Reason
			}
			if cs.State.Terminated != nil {
				reason += fmt.Sprintf(" terminated:%s(%d)", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
			}
			reason += fmt.Sprintf(" restarts:%d", cs.RestartCount)
		}
		fmt.Fprintf(&b, "[%s %s node=%s%s deleting=%v] ", p.Name, p.Status.Phase, p.Spec.NodeName, reason, p.DeletionTimestamp != nil)
	}
	return b.String()
}

func eventsFor(t testing.TB, c client.Interface, ns, name string) []*api.Event {
	t.Helper()
	evs, _, err := client.List[*api.Event](context.Background(), c, ns, api.ListOptions{})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []*api.Event
	for _, e := range evs {
		if e.InvolvedObject.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// skiffBinary builds the skiff binary once per test binary run.
var skiffBin struct {
	once sync.Once
	path string
	err  error
}

func skiffBinary(t testing.TB) string {
	t.Helper()
	skiffBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "skiff-it-bin-")
		if err != nil {
			skiffBin.err = err
			return
		}
		skiffBin.path = filepath.Join(dir, "skiff")
		cmd := exec.Command("go", "build", "-o", skiffBin.path, "skiff.dev/skiff")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			skiffBin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if skiffBin.err != nil {
		t.Fatal(skiffBin.err)
	}
	return skiffBin.path
}

func TestMain(m *testing.M) {
	before := leftovers()
	code := m.Run()
	if skiffBin.path != "" {
		os.RemoveAll(filepath.Dir(skiffBin.path))
	}
	// Every network namespace a test made, its pods' included, and every
	// agent's plugin-socket directory in /tmp must be gone when it ends:
	// a lab machine runs these tests again and again.
	if left := leftSince(before); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left %d thing(s) behind: %s\n"+
			"(a test that stops or kills a skiff with pods running cleans up with skiff reset, as a student does;\n"+
			"a skiff started by hand during the run makes them too)\n", len(left), strings.Join(left, " "))
		code = cmp.Or(code, 1)
	}
	os.Exit(code)
}

// netnsDir is where `ip netns` and skiff's agents keep named network
// namespaces.
const netnsDir = "/run/netns"

// leftSince lists, sorted, the leftovers that were not in before.
func leftSince(before map[string]bool) []string {
	var left []string
	for name := range leftovers() {
		if !before[name] {
			left = append(left, name)
		}
	}
	slices.Sort(left)
	return left
}

// leftovers returns what a skiff leaves on the machine until skiff reset
// removes it: the named network namespaces, and the agents' plugin-socket
// directories in the temporary directory (agent.ShortSocketDir).
func leftovers() map[string]bool {
	names := map[string]bool{}
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		names[filepath.Join(netnsDir, e.Name())] = true
	}
	socks, _ := filepath.Glob(filepath.Join(os.TempDir(), "skiff-sock-*"))
	for _, s := range socks {
		names[s] = true
	}
	return names
}
