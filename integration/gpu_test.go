package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/agent/devices"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/cli"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/internal/testenv"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/node"
	"skiff.dev/skiff/runtime"
)

// GPUs end to end (issue 5's "Done when"): an in-process control plane, one
// agent on real containerd with a simulated DGX A100 (eight A100s on
// NVSwitch, NV12 between every pair). The simulated GPUs reach containers
// the way real ones do: device plugin → device manager → CDI spec →
// containerd; nvidia-smi inside is the generated script (it runs under the
// image's busybox sh). The image is busybox named like NVIDIA's CUDA base.

const (
	gpuNode  = "dgx-1"
	gpuImage = "nvidia/cuda:12.4.0-base-ubuntu22.04"
	gpuNS    = "default"
)

// gpuCluster is the cluster of TestGPU.
type gpuCluster struct {
	cp      *controlplane.ControlPlane
	c       *client.Client
	ctrd    *ctrdEnv
	dataDir string
	cfgPath string // CLI config
	agent   *runningAgent
	// devicePlugin is the agent's --device-plugin ("": builtin).
	devicePlugin string
	// dynamicMIG starts the agent with --dra-dynamic-mig.
	dynamicMIG bool
}

// gpuStartAgent starts the node as `skiff agent --gpus sim:dgxa100` does:
// node.Start sets up the simulated GPUs over the data dir (their CDI spec,
// the device manager, the device plugin) and opens containerd, in the
// test's namespace, reading that CDI spec. The heartbeat is the kubelet's
// 10 s, so that anything faster (allocatable after a fault) comes from the
// device change path.
func (g *gpuCluster) gpuStartAgent(t *testing.T) {
	t.Helper()
	cfg := testNodeConfig(nil, gpuNode, g.dataDir, func(c *agent.Config) { c.HeartbeatInterval = 10 * time.Second })
	cfg.GPUs, cfg.DevicePlugin, cfg.DRADynamicMIG = "sim:dgxa100", g.devicePlugin, g.dynamicMIG
	cfg.Runtime, cfg.ContainerdAddress, cfg.ContainerdNamespace = node.RuntimeContainerd, g.ctrd.addr, g.ctrd.ns
	cfg.Listen, cfg.Credentials = "127.0.0.1:0", nodeCredentials(t, g.cp, cfg.Name, "127.0.0.1")
	if os.Getenv("GPU_DEBUG") != "" {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	g.agent = startNode(t, g.cp, cfg)
}

// gpuImportImage imports the CUDA stand-in image into rt.
func gpuImportImage(t *testing.T, rt runtime.Runtime) {
	t.Helper()
	arch, err := testenv.Busybox(gpuImage, "docker.io/library/busybox:1.36").Archive()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.ImportImage(context.Background(), bytes.NewReader(arch)); err != nil {
		t.Fatalf("import %s: %v", gpuImage, err)
	}
}

// gpuPod is a pod of one container asking for gpus GPUs (none: a CPU pod).
// A long-running script stops at once on SIGTERM.
func gpuPod(name string, gpus int64, script string) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: gpuNS, Labels: map[string]string{"app": "gpu-test"}}}
	grace := int64(2)
	p.Spec.TerminationGracePeriodSeconds = &grace
	image := gpuImage
	if gpus == 0 {
		image = "busybox:1.36"
	}
	c := api.Container{Name: "main", Image: image, Command: []string{"sh", "-c", script}}
	if gpus > 0 {
		c.Resources.Limits = api.ResourceList{api.ResourceNvidiaGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	p.Spec.Containers = []api.Container{c}
	return p
}

const gpuSleep = `trap 'exit 0' TERM; while true; do sleep 1; done`

func (g *gpuCluster) create(t *testing.T, p *api.Pod) {
	t.Helper()
	if p.Spec.RestartPolicy == "" {
		p.Spec.RestartPolicy = "Never"
	}
	if _, err := g.c.Create(context.Background(), p); err != nil {
		t.Fatalf("create pod %s: %v", p.Name, err)
	}
}

func (g *gpuCluster) pod(t *testing.T, name string) *api.Pod {
	t.Helper()
	p, err := client.Get[*api.Pod](context.Background(), g.c, gpuNS, name)
	if err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	return p
}

func (g *gpuCluster) node(t *testing.T) *api.Node {
	t.Helper()
	n, err := client.Get[*api.Node](context.Background(), g.c, "", gpuNode)
	if err != nil {
		t.Fatalf("get node: %v", err)
	}
	return n
}

func gpuAllocatable(n *api.Node) int64 {
	q := n.Status.Allocatable[api.ResourceNvidiaGPU]
	return q.Value()
}

// gpuWaitPhase waits until pod name is in phase.
func (g *gpuCluster) gpuWaitPhase(t *testing.T, name string, phase string, timeout time.Duration) *api.Pod {
	t.Helper()
	var p *api.Pod
	testwait.Until(t, timeout, func() (bool, string) {
		p = g.pod(t, name)
		return p.Status.Phase == phase, fmt.Sprintf("pod %s: %s", name, podSummary([]*api.Pod{p}))
	})
	return p
}

// gpuWaitEnded waits until pod name has succeeded or failed.
func (g *gpuCluster) gpuWaitEnded(t *testing.T, name string, timeout time.Duration) *api.Pod {
	t.Helper()
	var p *api.Pod
	testwait.Until(t, timeout, func() (bool, string) {
		p = g.pod(t, name)
		return p.Status.Phase == api.PodSucceeded || p.Status.Phase == api.PodFailed, fmt.Sprintf("pod %s: %s", name, podSummary([]*api.Pod{p}))
	})
	return p
}

func (g *gpuCluster) logs(t *testing.T, name string) string {
	t.Helper()
	body, err := g.c.Stream(context.Background(), "/api/v1/namespaces/"+gpuNS+"/pods/"+name+"/log")
	if err != nil {
		t.Fatalf("logs of %s: %v", name, err)
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatalf("logs of %s: %v", name, err)
	}
	return string(b)
}

// gpuAllocations reads the node's allocations annotation (uuid → ns/pod).
func (g *gpuCluster) gpuAllocations(t *testing.T) map[string]string {
	t.Helper()
	s, ok := g.node(t).Annotations[gputopology.AnnotationAllocations]
	if !ok {
		return nil
	}
	a, err := gputopology.ParseAllocations(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// gpuCheckpoint reads the device manager's checkpoint: pod (ns/name) → GPUs.
func (g *gpuCluster) gpuCheckpoint(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(g.dataDir, "device-plugins", devices.CheckpointName))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var ck struct {
		Entries []struct {
			Namespace, PodName, Resource string
			DeviceIDs                    []string
		}
	}
	if err := json.Unmarshal(b, &ck); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	out := map[string][]string{}
	for _, e := range ck.Entries {
		if e.Resource == api.ResourceNvidiaGPU {
			out[e.Namespace+"/"+e.PodName] = append(out[e.Namespace+"/"+e.PodName], e.DeviceIDs...)
		}
	}
	return out
}

// gpuNoDoubleUse fails when a GPU is held by two pods that are both
// running (or starting), in the checkpoint or in the pods' environment.
func (g *gpuCluster) gpuNoDoubleUse(t *testing.T) {
	t.Helper()
	pods := listPods(t, g.c, gpuNS, "app=gpu-test")
	live := map[string]bool{}
	for _, p := range pods {
		if p.Status.Phase == api.PodRunning || p.Status.Phase == api.PodPending && p.Spec.NodeName != "" {
			live[gpuNS+"/"+p.Name] = true
		}
	}
	holder := map[string]string{}
	for pod, ids := range g.gpuCheckpoint(t) {
		if !live[pod] {
			continue
		}
		for _, id := range ids {
			if other, ok := holder[id]; ok {
				t.Fatalf("GPU %s is held by two live pods: %s and %s", id, other, pod)
			}
			holder[id] = pod
		}
	}
}

// gpuUUIDs are the UUIDs of the node's GPUs, by index.
func (g *gpuCluster) gpuUUIDs(t *testing.T) []string {
	t.Helper()
	ng, err := gputopology.ParseNodeGPUs(g.node(t).Annotations[gputopology.AnnotationTopology])
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(ng.Devices))
	for _, d := range ng.Devices {
		out[d.Index] = d.UUID
	}
	return out
}

func (g *gpuCluster) cli(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := cli.Main(context.Background(), append([]string{"--kubeconfig", g.cfgPath}, args...), &out, &errOut); err != nil {
		t.Fatalf("skiff %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

func (g *gpuCluster) deleteAll(t *testing.T) {
	t.Helper()
	for _, p := range listPods(t, g.c, gpuNS, "app=gpu-test") {
		if err := g.c.Delete(context.Background(), api.MustKindOf(p), gpuNS, p.Name, api.DeleteOptions{}); err != nil && !api.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		ps := listPods(t, g.c, gpuNS, "app=gpu-test")
		return len(ps) == 0 && len(g.gpuAllocations(t)) == 0, "pods left: " + podSummary(ps)
	})
}

func TestGPUOnSimulatedDGXA100(t *testing.T) {
	e := newCtrdEnv(t)
	top, start := t, time.Now()
	cp, c := startControlPlane(t, gpuHPATune) // the HPA's sync and window shortened (gpu_hpa_test.go)
	g := &gpuCluster{cp: cp, c: c, ctrd: e, dataDir: t.TempDir()}
	g.cfgPath = filepath.Join(g.dataDir, "cli-config")
	if err := client.WriteKubeconfig(g.cfgPath, cp.ClientConfig()); err != nil {
		t.Fatal(err)
	}
	g.gpuStartAgent(t)
	gpuImportImage(t, g.agent.node.Runtime())
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		n, err := client.Get[*api.Node](context.Background(), c, "", gpuNode)
		if err != nil {
			return false, err.Error()
		}
		return gpuAllocatable(n) == 8 && n.Annotations[gputopology.AnnotationTopology] != "", fmt.Sprintf("allocatable %v", n.Status.Allocatable)
	})
	uuids := g.gpuUUIDs(t)

	t.Run("OneGPUPodSeesOneA100", func(t *testing.T) {
		g.create(t, gpuPod("smi", 1, "nvidia-smi; env; ls /dev/nvidia0"))
		p := g.gpuWaitEnded(t, "smi", 30*time.Second)
		out := g.logs(t, "smi")
		if n := strings.Count(out, "A100-SXM4-40GB"); n != 1 {
			t.Errorf("nvidia-smi shows %d A100s, want exactly 1:\n%s", n, out)
		}
		if !strings.Contains(out, "NVIDIA_VISIBLE_DEVICES=GPU-") {
			t.Errorf("NVIDIA_VISIBLE_DEVICES not set:\n%s", out)
		}
		if !strings.Contains(out, "\n/dev/nvidia0\n") {
			t.Errorf("/dev/nvidia0 missing:\n%s", out)
		}
		if p.Status.Phase != api.PodSucceeded {
			t.Errorf("pod smi: %s\n%s", podSummary([]*api.Pod{p}), out)
		}

		// apply → Running of CPU and 1-GPU pods, alternating, three each.
		timeRun := func(p *api.Pod) time.Duration {
			t0 := time.Now()
			g.create(t, p)
			g.gpuWaitPhase(t, p.Name, api.PodRunning, 30*time.Second)
			return time.Since(t0)
		}
		var cpu, gpus []time.Duration
		for i := range 3 {
			cpu = append(cpu, timeRun(gpuPod(fmt.Sprintf("cpu-%d", i), 0, gpuSleep)))
			gpus = append(gpus, timeRun(gpuPod(fmt.Sprintf("gpu-timed-%d", i), 1, gpuSleep)))
		}
		slices.Sort(cpu)
		slices.Sort(gpus)
		cpuDur, gpuDur := cpu[1], gpus[1]
		t.Logf("MEASURE apply→Running (each %v): CPU %v GPU %v", "3 runs", cpu, gpus)
		t.Logf("MEASURE apply→Running medians: CPU pod %v, 1-GPU pod %v, ratio %.2f", cpuDur.Round(time.Millisecond), gpuDur.Round(time.Millisecond), float64(gpuDur)/float64(cpuDur))
	})

	t.Run("TwoGPUPodGetsNVLinkedPair", func(t *testing.T) {
		g.create(t, gpuPod("topo", 2, "nvidia-smi topo -m; nvidia-smi -L"))
		g.gpuWaitEnded(t, "topo", 30*time.Second)
		out := g.logs(t, "topo")
		if !regexp.MustCompile(`(?m)^GPU0\s+X\s+NV12\b`).MatchString(out) || !regexp.MustCompile(`(?m)^GPU1\s+NV12\s+X\b`).MatchString(out) {
			t.Errorf("nvidia-smi topo -m: want NV12 between GPU0 and GPU1:\n%s", out)
		}
		if n := strings.Count(out, "\nGPU ") + boolInt(strings.HasPrefix(out, "GPU ")); n != 2 {
			t.Errorf("nvidia-smi -L lists %d GPUs, want 2:\n%s", n, out)
		}
	})
	g.deleteAll(t)

	t.Run("BobsGPUQuota", g.bobsGPUQuota) // gpu_quota_test.go

	t.Run("NinthPodPending", func(t *testing.T) {
		for i := range 9 {
			g.create(t, gpuPod(fmt.Sprintf("one-%d", i), 1, gpuSleep))
		}
		var pending *api.Pod
		testwait.Until(t, 45*time.Second, func() (bool, string) {
			ps := listPods(t, g.c, gpuNS, "app=gpu-test")
			pending = nil
			running := 0
			for _, p := range ps {
				switch {
				case p.Status.Phase == api.PodRunning:
					running++
				case p.Spec.NodeName == "":
					pending = p
				}
			}
			return running == 8 && pending != nil && gpuUnschedulable(pending), podSummary(ps)
		})
		evs := eventsFor(t, c, gpuNS, pending.Name)
		found := false
		for _, ev := range evs {
			found = found || ev.Reason == "FailedScheduling" && strings.Contains(ev.Message, "Insufficient nvidia.com/gpu")
		}
		if !found {
			t.Errorf("no FailedScheduling event with Insufficient nvidia.com/gpu for %s", pending.Name)
		}
		testwait.Until(t, 10*time.Second, func() (bool, string) {
			a := g.gpuAllocations(t)
			return len(a) == 8, fmt.Sprintf("allocations %v", a)
		})
		g.gpuNoDoubleUse(t)
		out := g.cli(t, "describe", "node", gpuNode)
		for _, want := range []string{"GPUs:", "(simulated GPUs)", "NVIDIA A100-SXM4-40GB", uuids[0], "default/one-"} {
			if !strings.Contains(out, want) {
				t.Errorf("describe node: missing %q:\n%s", want, out)
			}
		}
		if out := g.cli(t, "get", "nodes", "-o", "wide"); !strings.Contains(out, "GPU-PRODUCT") || !strings.Contains(out, "NVIDIA-A100-SXM4-40GB") {
			t.Errorf("get nodes -o wide: no GPU columns:\n%s", out)
		}

		t.Run("AgentRestartKeepsAllocations", func(t *testing.T) {
			before := g.gpuCheckpoint(t)
			oldPort := g.node(t).Status.DaemonEndpoints.KubeletEndpoint.Port
			g.agent.kill(t)      // and its GPU stack
			g.gpuStartAgent(top) // the parent's: the agent outlives this subtest
			// The new device manager read the checkpoint: the same pods hold
			// the same GPUs, and the pending pod still has none to take.
			testwait.Until(t, 20*time.Second, func() (bool, string) {
				n := g.node(t)
				ng, err := gputopology.ParseNodeGPUs(n.Annotations[gputopology.AnnotationTopology])
				restarted := n.Status.DaemonEndpoints.KubeletEndpoint.Port != oldPort // the new agent's server
				return restarted && err == nil && len(ng.Free) == 0 && len(ng.Healthy) == 8 && gpuAllocatable(n) == 8,
					fmt.Sprintf("restarted %v, annotation %v", restarted, n.Annotations[gputopology.AnnotationTopology])
			})
			if after := g.gpuCheckpoint(t); !sameHolders(before, after) {
				t.Errorf("allocations changed over the agent restart:\nbefore %v\nafter  %v", before, after)
			}
			if p := g.pod(t, pending.Name); p.Spec.NodeName != "" {
				t.Errorf("the pending pod was placed after the restart: %s", podSummary([]*api.Pod{p}))
			}
		})

		t.Run("ChurnNeverSharesAGPU", func(t *testing.T) {
			// Delete three, create three, twice, checking all along.
			for round := range 2 {
				ps := listPods(t, g.c, gpuNS, "app=gpu-test")
				sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
				deleted := 0
				for _, p := range ps {
					if p.Status.Phase == api.PodRunning && deleted < 3 {
						if err := c.Delete(context.Background(), api.MustKindOf(p), gpuNS, p.Name, api.DeleteOptions{}); err != nil {
							t.Fatal(err)
						}
						deleted++
					}
				}
				for i := range 3 {
					g.create(t, gpuPod(fmt.Sprintf("churn-%d-%d", round, i), 1, gpuSleep))
				}
				testwait.Until(t, 45*time.Second, func() (bool, string) {
					g.gpuNoDoubleUse(t)
					ps := listPods(t, g.c, gpuNS, "app=gpu-test")
					return len(ps) == 9 && runningPods(ps) == 8, podSummary(ps)
				})
			}
			g.gpuNoDoubleUse(t)
		})
	})
	g.deleteAll(t)

	t.Run("FaultLowersAllocatable", func(t *testing.T) {
		faulty := 3
		faultStart := time.Now()
		if out := g.cli(t, "gpu", "fault", gpuNode, fmt.Sprint(faulty), "--xid", "79"); !strings.Contains(out, "unhealthy") {
			t.Errorf("skiff gpu fault: %q", out)
		}
		testwait.Until(t, 5*time.Second, func() (bool, string) {
			n := g.node(t)
			return gpuAllocatable(n) == 7, fmt.Sprintf("allocatable %v", n.Status.Allocatable)
		})
		t.Logf("MEASURE fault → allocatable 7 in %v (heartbeat every 10 s)", time.Since(faultStart).Round(time.Millisecond))
		if out := g.cli(t, "describe", "node", gpuNode); !strings.Contains(out, "Unhealthy (Xid 79)") {
			t.Errorf("describe node does not show the fault:\n%s", out)
		}
		for i := range 8 {
			g.create(t, gpuPod(fmt.Sprintf("after-fault-%d", i), 1, gpuSleep))
		}
		testwait.Until(t, 45*time.Second, func() (bool, string) {
			ps := listPods(t, g.c, gpuNS, "app=gpu-test")
			unsched := 0
			for _, p := range ps {
				if p.Spec.NodeName == "" && gpuUnschedulable(p) {
					unsched++
				}
			}
			return runningPods(ps) == 7 && unsched == 1, podSummary(ps)
		})
		if pod, ok := g.gpuAllocations(t)[uuids[faulty]]; ok {
			t.Errorf("the faulty GPU %d went to %s", faulty, pod)
		}
		g.cli(t, "gpu", "fault", gpuNode, fmt.Sprint(faulty), "--clear")
		testwait.Until(t, 30*time.Second, func() (bool, string) {
			ps := listPods(t, g.c, gpuNS, "app=gpu-test")
			return runningPods(ps) == 8 && gpuAllocatable(g.node(t)) == 8, podSummary(ps)
		})
		if pod, ok := g.gpuAllocations(t)[uuids[faulty]]; !ok || !strings.HasPrefix(pod, gpuNS+"/after-fault-") {
			t.Errorf("after clearing, GPU %d is held by %q, want the last pod", faulty, pod)
		}
		g.gpuNoDoubleUse(t)
	})
	g.deleteAll(t)

	t.Run("HPAScalesOnGPUUtilization", g.gpuHPAScalesOnUtilization) // gpu_hpa_test.go
	// Its Deployments keep their GPU pods: the next subtest needs one free GPU.
	t.Run("DevicePluginAsAPod", g.devicePluginAsAPod) // deviceplugin_pod_test.go (last: the agent restarts without its plugin)
	t.Logf("TestGPUOnSimulatedDGXA100 took %v", time.Since(start).Round(time.Millisecond))
}

// gpuUnschedulable: the pod's PodScheduled condition says there are not
// enough GPUs.
func gpuUnschedulable(p *api.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == api.PodScheduled && c.Status == api.ConditionFalse && strings.Contains(c.Message, "Insufficient nvidia.com/gpu") {
			return true
		}
	}
	return false
}

func sameHolders(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
