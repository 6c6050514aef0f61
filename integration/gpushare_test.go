package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/agent/gpu/usage"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/cli"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/node"
)

// GPU sharing end to end (issue 22's "Done when"), on one cluster: an
// in-process control plane and one agent on real containerd with a
// simulated DGX A100, its device plugin reading the GPU operator docs'
// time-slicing ConfigMap. Subtests run in order on the same node.

// shareStartAgent starts the node with --device-plugin-config ref.
func (g *gpuCluster) shareStartAgent(t *testing.T, ref string) {
	t.Helper()
	cfg := testNodeConfig(nil, gpuNode, g.dataDir, func(c *agent.Config) { c.HeartbeatInterval = 10 * time.Second })
	cfg.GPUs, cfg.DevicePluginConfig = "sim:dgxa100", ref
	cfg.Runtime, cfg.ContainerdAddress, cfg.ContainerdNamespace = node.RuntimeContainerd, g.ctrd.addr, g.ctrd.ns
	cfg.Listen, cfg.Credentials = "127.0.0.1:0", nodeCredentials(t, g.cp, cfg.Name, "127.0.0.1")
	g.agent = startNode(t, g.cp, cfg)
}

func nodeQuantity(n *api.Node, res string) (capacity, allocatable int64) {
	c, a := n.Status.Capacity[res], n.Status.Allocatable[res]
	return c.Value(), a.Value()
}

// sample is the node's Meter now.
func (g *gpuCluster) sample(t *testing.T) *usage.Sample {
	t.Helper()
	s, err := g.agent.node.GPUs().Meter.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var smiUUID = regexp.MustCompile(`GPU 0: [^(]+\(UUID: (GPU-[0-9a-f-]+)\)`)

func TestGPUSharingTimeSlicing(t *testing.T) {
	top := t
	e := newCtrdEnv(t)
	cp, c := startControlPlane(t, nil)
	g := &gpuCluster{cp: cp, c: c, ctrd: e, dataDir: t.TempDir()}
	g.cfgPath = filepath.Join(g.dataDir, "cli-config")
	if err := client.WriteKubeconfig(g.cfgPath, cp.ClientConfig()); err != nil {
		t.Fatal(err)
	}
	g.shareStartAgent(t, "time-slicing-config-all")
	gpuImportImage(t, g.agent.node.Runtime())

	g.cli(t, "apply", "-n", "kube-system", "-f", "../examples/gpu-sharing/time-slicing-config-all.yaml")
	if c, _ := nodeQuantity(g.node(t), api.ResourceNvidiaGPU); c != 8 {
		t.Fatalf("before the label: nvidia.com/gpu capacity %d, want 8 (no key \"default\": no sharing)", c)
	}
	g.cli(t, "label", "node", gpuNode, "nvidia.com/device-plugin.config=any")
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		n := g.node(t)
		c, a := nodeQuantity(n, api.ResourceNvidiaGPU)
		return c == 32 && a == 32 && n.Labels["nvidia.com/gpu.replicas"] == "4", fmt.Sprintf("capacity %d allocatable %d labels %v", c, a, n.Labels)
	})
	n := g.node(t)
	for k, want := range map[string]string{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-SHARED", "nvidia.com/gpu.sharing-strategy": "time-slicing"} {
		if n.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], want)
		}
	}
	waitEventSaying(t, c, "default", gpuNode, agent.ReasonDevicePluginConfigApplied, "time-slicing")

	t.Run("NinePodsShareEightGPUs", func(t *testing.T) {
		for i := range 9 {
			g.create(t, gpuPod(fmt.Sprintf("ts-%d", i), 1, "nvidia-smi -L; exec gpu-load --util 50 --mem 1000"))
		}
		testwait.Until(t, 60*time.Second, func() (bool, string) {
			ps := listPods(t, g.c, gpuNS, "app=gpu-test")
			running := 0
			for _, p := range ps {
				if p.Status.Phase == api.PodRunning {
					running++
				}
			}
			return running == 9, podSummary(ps)
		})
		byGPU := map[string][]string{}
		testwait.Until(t, 20*time.Second, func() (bool, string) {
			clear(byGPU)
			for i := range 9 {
				name := fmt.Sprintf("ts-%d", i)
				m := smiUUID.FindStringSubmatch(g.logs(t, name))
				if m == nil {
					return false, name + " has not printed nvidia-smi -L yet"
				}
				byGPU[m[1]] = append(byGPU[m[1]], name)
			}
			return true, ""
		})
		shared := ""
		for uuid, pods := range byGPU {
			if len(pods) >= 2 {
				shared = uuid
			}
			if len(pods) > 4 {
				t.Errorf("GPU %s holds %d pods, more than its 4 replicas: %v", uuid, len(pods), pods)
			}
		}
		if len(byGPU) != 8 || shared == "" {
			t.Fatalf("9 pods on %d GPUs (want all 8, one shared): %v", len(byGPU), byGPU)
		}
		// The two on one GPU share its SMs: 50 % + 50 %.
		testwait.Until(t, 20*time.Second, func() (bool, string) {
			for _, gs := range g.sample(t).GPUs {
				if gs.UUID == shared {
					return gs.UtilPercent == 100 && gs.MemoryUsedMiB == 2000 && len(gs.Holders()) == 2,
						fmt.Sprintf("GPU %s: %d%% %d MiB holders %v", shared, gs.UtilPercent, gs.MemoryUsedMiB, gs.Holders())
				}
			}
			return false, "no GPU " + shared
		})
	})

	t.Run("NeighbourRunsOutOfMemory", func(t *testing.T) {
		// Fill the shared GPU's memory from one of its pods, then ask more
		// from the other: CUDA's out of memory.
		var pods []string
		for _, gs := range g.sample(t).GPUs {
			if hs := gs.Holders(); len(hs) == 2 {
				pods = []string{hs[0].Pod, hs[1].Pod}
			}
		}
		if pods == nil {
			t.Fatal("no shared GPU")
		}
		g.cli(t, "exec", pods[0], "--", "sh", "-c", "gpu-load --util 10 --mem 38000 --seconds 600 >/dev/null 2>&1 &")
		testwait.Until(t, 20*time.Second, func() (bool, string) {
			for _, gs := range g.sample(t).GPUs {
				if len(gs.Holders()) == 2 {
					return gs.MemoryUsedMiB == 40000, fmt.Sprintf("%d MiB used", gs.MemoryUsedMiB)
				}
			}
			return false, "no shared GPU"
		})
		out, err := g.cliErr("exec", pods[1], "--", "sh", "-c", "gpu-load --util 10 --mem 2000 --seconds 1 2>&1")
		if err == nil || !strings.Contains(out, "CUDA error: out of memory") || !strings.Contains(out, "960 MiB free of 40960 MiB") {
			t.Errorf("the neighbour's 2000 MiB with 960 free: %v\n%s", err, out)
		}
	})

	t.Run("DescribeNodeShowsTheSplit", func(t *testing.T) {
		testwait.Until(t, 20*time.Second, func() (bool, string) {
			out := g.cli(t, "describe", "node", gpuNode)
			held := regexp.MustCompile(`(?m)^\s+\d+\s+GPU-[0-9a-f-]+::[0-3]\s+time-slicing\s+nvidia.com/gpu\s+40960MiB\s+100%\s+default/ts-\d/main$`).FindAllString(out, -1)
			free := regexp.MustCompile(`(?m)::[0-3]\s+time-slicing\s+nvidia.com/gpu\s+40960MiB\s+100%\s+<none>$`).FindAllString(out, -1)
			return strings.Contains(out, "GPU devices:") && len(held) == 9 && len(free) == 23, out
		})
	})

	t.Run("ChurnAndAgentKillNeverOverHand", func(t *testing.T) {
		check := func() {
			t.Helper()
			nd, err := gputopology.ParseNodeDevices(g.node(t).Annotations[gputopology.AnnotationDevices])
			if err != nil {
				t.Fatal(err)
			}
			perGPU, seen := map[int]int{}, map[string]bool{}
			for _, d := range nd.Devices {
				if d.Holder == "" {
					continue
				}
				if seen[d.ID] {
					t.Fatalf("device %s held twice", d.ID)
				}
				seen[d.ID] = true
				if perGPU[d.GPU]++; perGPU[d.GPU] > 4 {
					t.Fatalf("GPU %d handed out %d times, it has 4 replicas", d.GPU, perGPU[d.GPU])
				}
			}
		}
		for i := 9; i < 20; i++ {
			g.create(t, gpuPod(fmt.Sprintf("ts-%d", i), 1, gpuSleep))
		}
		check()
		g.agent.kill(t) // kill -9 as the cluster sees it: containers go on
		g.shareStartAgent(top, "time-slicing-config-all")
		for i := 20; i < 36; i++ { // 36 asked of 32 replicas
			g.create(t, gpuPod(fmt.Sprintf("ts-%d", i), 1, gpuSleep))
			if i%4 == 0 {
				check()
			}
		}
		testwait.Until(t, 90*time.Second, func() (bool, string) {
			check()
			running, pending := 0, 0
			ps := listPods(t, g.c, gpuNS, "app=gpu-test")
			for _, p := range ps {
				switch {
				case p.Status.Phase == api.PodRunning:
					running++
				case p.Spec.NodeName == "":
					pending++
				}
			}
			return running == 32 && pending == 4, podSummary(ps)
		})
		if c, _ := nodeQuantity(g.node(t), api.ResourceNvidiaGPU); c != 32 {
			t.Errorf("after the restart: capacity %d, want the kept config's 32", c)
		}
	})

	t.Run("WrongConfigRefused", func(t *testing.T) {
		cm, err := client.Get[*api.ConfigMap](context.Background(), c, "kube-system", "time-slicing-config-all")
		if err != nil {
			t.Fatal(err)
		}
		cm = api.Clone(cm)
		cm.Data["any"] = strings.Replace(cm.Data["any"], "replicas: 4", "replicas: 1", 1)
		if _, err := c.Update(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, 20*time.Second, func() (bool, string) {
			return hasEvent(t, c, "default", gpuNode, agent.ReasonInvalidDevicePluginConfig, "number of replicas must be >= 2"), "no refusal event yet"
		})
		if cap, _ := nodeQuantity(g.node(t), api.ResourceNvidiaGPU); cap != 32 {
			t.Errorf("after a wrong config: capacity %d, want the last good config's 32", cap)
		}
		if ps := listPods(t, g.c, gpuNS, "app=gpu-test"); len(ps) != 36 {
			t.Errorf("pods %s", podSummary(ps))
		}
	})
}

// cliErr runs the CLI and returns its output (stdout and stderr) and error.
func (g *gpuCluster) cliErr(args ...string) (string, error) {
	var out bytes.Buffer
	err := cli.Main(context.Background(), append([]string{"--kubeconfig", g.cfgPath}, args...), &out, &out)
	return out.String(), err
}

// waitEventSaying waits for the event hasEvent looks for. An Event is
// written by its recorder after the change it reports, asynchronously: a
// check right after the change may come first (CI once saw the HPA's
// scale-down done and its SuccessfulRescale not yet listed).
func waitEventSaying(t *testing.T, c *client.Client, ns, name, reason, text string) {
	t.Helper()
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		return hasEvent(t, c, ns, name, reason, text),
			fmt.Sprintf("no %s event %q for %s/%s: %s", reason, text, ns, name, eventLines(eventsFor(t, c, ns, name)))
	})
}

// hasEvent reports whether obj (namespace/name) has an event of reason
// whose message contains text.
func hasEvent(t *testing.T, c *client.Client, ns, name, reason, text string) bool {
	t.Helper()
	for _, ev := range eventsFor(t, c, ns, name) {
		if ev.Reason == reason && strings.Contains(ev.Message, text) {
			return true
		}
	}
	return false
}

// TestGPUSharingMIG: the MIG manager partitions the simulated DGX A100 as
// nvidia.com/mig.config asks, the device plugin (migStrategy mixed)
// advertises the MIG devices, a pod sees exactly its own, and the GPUs are
// repartitioned only once their pods are gone.
func TestGPUSharingMIG(t *testing.T) {
	e := newCtrdEnv(t)
	cp, c := startControlPlane(t, nil)
	g := &gpuCluster{cp: cp, c: c, ctrd: e, dataDir: t.TempDir()}
	g.cfgPath = filepath.Join(g.dataDir, "cli-config")
	if err := client.WriteKubeconfig(g.cfgPath, cp.ClientConfig()); err != nil {
		t.Fatal(err)
	}
	g.shareStartAgent(t, "")
	gpuImportImage(t, g.agent.node.Runtime())
	g.cli(t, "apply", "-f", "../examples/gpu-sharing/nvidia-device-plugin-config.yaml")
	g.cli(t, "label", "node", gpuNode, "nvidia.com/device-plugin.config=mig-mixed")

	// A pod on a whole GPU holds the repartitioning back.
	g.create(t, gpuPod("whole", 1, gpuSleep))
	g.gpuWaitPhase(t, "whole", api.PodRunning, 30*time.Second)
	g.cli(t, "label", "node", gpuNode, "nvidia.com/mig.config=all-1g.5gb")
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		n := g.node(t)
		return n.Labels[api.LabelMIGConfigState] == "pending" && hasEvent(t, c, "default", gpuNode, agent.ReasonMIGConfigPending, "default/whole"),
			"state " + n.Labels[api.LabelMIGConfigState]
	})
	if err := c.Delete(context.Background(), api.MustKindOf(&api.Pod{}), gpuNS, "whole", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		n := g.node(t)
		capacity, alloc := nodeQuantity(n, "nvidia.com/mig-1g.5gb")
		return n.Labels[api.LabelMIGConfigState] == "success" && capacity == 56 && alloc == 56,
			fmt.Sprintf("state %q, mig-1g.5gb %d/%d", n.Labels[api.LabelMIGConfigState], capacity, alloc)
	})
	n := g.node(t)
	for k, want := range map[string]string{"nvidia.com/mig-1g.5gb.count": "56", "nvidia.com/mig-1g.5gb.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
		"nvidia.com/mig.strategy": "mixed", "nvidia.com/mig-1g.5gb.memory": "4864"} {
		if n.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], want)
		}
	}

	p := gpuPod("mig", 0, "nvidia-smi -L; nvidia-smi mig -lgi; gpu-load --util 80 --mem 5000 --seconds 1 2>&1; echo exit=$?")
	p.Spec.Containers[0].Image = gpuImage
	p.Spec.Containers[0].Resources.Limits = api.ResourceList{"nvidia.com/mig-1g.5gb": *resource.NewQuantity(1, resource.DecimalSI)}
	g.create(t, p)
	g.gpuWaitEnded(t, "mig", 30*time.Second)
	out := g.logs(t, "mig")
	lines := regexp.MustCompile(`(?m)^  MIG 1g\.5gb +Device +0: \(UUID: MIG-[0-9a-f-]+\)$`).FindAllString(out, -1)
	if len(lines) != 1 || strings.Count(out, "MIG ") != 2 || !strings.Contains(out, "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-") {
		t.Errorf("nvidia-smi -L in a 1g.5gb pod: want its GPU and exactly one MIG device:\n%s", out)
	}
	if !regexp.MustCompile(`\|\s+0\s+MIG 1g\.5gb\s+19\s+\d+\s+[0-6]:1\s+\|`).MatchString(out) {
		t.Errorf("nvidia-smi mig -lgi: want one 1g.5gb instance (profile 19):\n%s", out)
	}
	if !strings.Contains(out, "CUDA error: out of memory") || !strings.Contains(out, "the device allows 4864 MiB") || !strings.Contains(out, "exit=1") {
		t.Errorf("5000 MiB on a 1g.5gb device: want out of memory:\n%s", out)
	}
}

// TestGPUSharingHAMi: a node labelled gpu=on runs HAMi's device plugin
// instead of NVIDIA's: nvidia.com/gpu is 8 GPUs × 10 slices and the GPUs
// are registered in HAMi's annotation; HAMi's example pod (two cards of
// 3000 MiB and 30% of the SMs each) gets the scheduler's decision, HAMi-
// core's environment and an nvidia-smi whose total is the slice's; a pod
// asking more memory than any card has stays Pending in HAMi's words.
func TestGPUSharingHAMi(t *testing.T) {
	e := newCtrdEnv(t)
	cp, c := startControlPlane(t, nil)
	g := &gpuCluster{cp: cp, c: c, ctrd: e, dataDir: t.TempDir()}
	g.cfgPath = filepath.Join(g.dataDir, "cli-config")
	if err := client.WriteKubeconfig(g.cfgPath, cp.ClientConfig()); err != nil {
		t.Fatal(err)
	}
	g.shareStartAgent(t, "")
	gpuImportImage(t, g.agent.node.Runtime())
	g.cli(t, "label", "node", gpuNode, "gpu=on")
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		n := g.node(t)
		capacity, alloc := nodeQuantity(n, api.ResourceNvidiaGPU)
		devs, err := api.DecodeHAMiNodeDevices(n.Annotations[api.HAMiNodeRegister])
		return capacity == 80 && alloc == 80 && err == nil && len(devs) == 8,
			fmt.Sprintf("nvidia.com/gpu %d/%d, %s=%q", capacity, alloc, api.HAMiNodeRegister, n.Annotations[api.HAMiNodeRegister])
	})
	devs, _ := api.DecodeHAMiNodeDevices(g.node(t).Annotations[api.HAMiNodeRegister])
	if d := devs[0]; d.Count != 10 || d.Devmem != 40960 || d.Devcore != 100 || d.Type != "NVIDIA-NVIDIA A100-SXM4-40GB" || !d.Health {
		t.Errorf("registration of GPU 0: %+v", d)
	}

	// HAMi's example pod, but for its image and command (offline).
	raw, err := os.ReadFile("../examples/gpu-sharing/hami-default-use.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o, _, err := api.DecodeAny(raw)
	if err != nil {
		t.Fatalf("HAMi's example: %v", err)
	}
	p := o.(*api.Pod)
	p.Namespace = gpuNS
	p.Spec.Containers[0].Image = gpuImage
	p.Spec.Containers[0].Command = []string{"sh", "-c", "env | grep -E '^CUDA_DEVICE_|^NVIDIA_VISIBLE' | sort; gpu-load --util 10 --mem 3500 --seconds 1 2>&1; echo exit=$?; nvidia-smi; " + gpuSleep}
	g.create(t, p)
	g.gpuWaitPhase(t, "gpu-pod", api.PodRunning, 30*time.Second)
	pd, err := api.DecodeHAMiPodDevices(g.pod(t, "gpu-pod").Annotations[api.HAMiDevicesToAllocate])
	if err != nil || len(pd) != 1 || len(pd[0]) != 2 || pd[0][0].UUID == pd[0][1].UUID ||
		pd[0][0].Usedmem != 3000 || pd[0][0].Usedcores != 30 {
		t.Fatalf("decision %v: %v", pd, err)
	}
	var out string
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		out = g.logs(t, "gpu-pod")
		return strings.Contains(out, "Processes:"), "nvidia-smi not printed yet:\n" + out
	})
	for _, want := range []string{"CUDA_DEVICE_MEMORY_LIMIT_0=3000m", "CUDA_DEVICE_MEMORY_LIMIT_1=3000m", "CUDA_DEVICE_SM_LIMIT=30",
		"NVIDIA_VISIBLE_DEVICES=" + pd[0][0].UUID + "," + pd[0][1].UUID} {
		if !strings.Contains(out, want) {
			t.Errorf("the container lacks %s:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "CUDA error: out of memory") || !strings.Contains(out, "the device allows 3000 MiB") || !strings.Contains(out, "exit=1") {
		t.Errorf("3500 MiB in a 3000 MiB slice: want out of memory:\n%s", out)
	}
	if n := len(regexp.MustCompile(`/ +3000MiB`).FindAllString(out, -1)); n != 2 {
		t.Errorf("nvidia-smi: want both GPUs with 3000MiB total, found %d:\n%s", n, out)
	}

	big := gpuPod("too-big", 1, gpuSleep)
	big.Spec.Containers[0].Resources.Limits[api.HAMiResourceMem] = *resource.NewQuantity(50000, resource.DecimalSI)
	g.create(t, big)
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		for _, cond := range g.pod(t, "too-big").Status.Conditions {
			if cond.Type == api.PodScheduled && strings.Contains(cond.Message, "8/8 CardInsufficientMemory") {
				return true, ""
			}
		}
		return false, podSummary([]*api.Pod{g.pod(t, "too-big")})
	})

	t.Run("BindPhaseAndDescribe", func(t *testing.T) {
		if got := g.pod(t, "gpu-pod").Annotations[api.HAMiBindPhase]; got != api.HAMiBindPhaseSuccess {
			t.Errorf("bind phase %q of a Running pod, want success", got)
		}
		out := g.cli(t, "describe", "node", gpuNode)
		for _, re := range []string{`GPU devices:\s+\(HAMi vGPU slices\)`, `(?m)^\s+\d+\s+` + pd[0][0].UUID + `\s+1/10\s+3000MiB\s+30%\s+` + gpuNS + `/gpu-pod \(container `,
			`(?m)^\s+\d+\s+` + pd[0][0].UUID + `\s+free 9/10\s+37960MiB of 40960MiB\s+70% of 100%`} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("describe node lacks %s:\n%s", re, out)
			}
		}
		out = g.cli(t, "describe", "pod", "-n", gpuNS, "too-big")
		if !strings.Contains(out, "Why HAMi rejected node "+gpuNode+":") || !regexp.MustCompile(`GPU \d \(GPU-[^)]+\): CardInsufficientMemory: memory \d+ used \+ 50000 asked > 40960 MiB`).MatchString(out) {
			t.Errorf("describe pod lacks the per-GPU reasons:\n%s", out)
		}
	})

	// HAMi's device config as its chart installs it: 4 slices per GPU and
	// memory x1.5, applied without a restart; the 50000 MiB pod now fits
	// an oversubscribed 61440 MiB card. A wrong config changes nothing.
	t.Run("DeviceConfig", func(t *testing.T) {
		g.cli(t, "apply", "-f", "../examples/gpu-sharing/hami-scheduler-device.yaml")
		testwait.Until(t, 20*time.Second, func() (bool, string) {
			n := g.node(t)
			capacity, _ := nodeQuantity(n, api.ResourceNvidiaGPU)
			devs, err := api.DecodeHAMiNodeDevices(n.Annotations[api.HAMiNodeRegister])
			return capacity == 32 && err == nil && len(devs) == 8 && devs[0].Count == 4 && devs[0].Devmem == 61440,
				fmt.Sprintf("nvidia.com/gpu %d, %s=%q", capacity, api.HAMiNodeRegister, n.Annotations[api.HAMiNodeRegister])
		})
		waitEventSaying(t, c, "default", gpuNode, agent.ReasonDevicePluginConfigApplied, "deviceSplitCount 4, deviceMemoryScaling 1.5")
		g.gpuWaitPhase(t, "too-big", api.PodRunning, 30*time.Second)
		testwait.Until(t, 10*time.Second, func() (bool, string) {
			got := g.pod(t, "too-big").Annotations[api.HAMiBindPhase]
			return got == api.HAMiBindPhaseSuccess, "bind phase " + got
		})

		cm, err := client.Get[*api.ConfigMap](context.Background(), c, api.HAMiConfigNamespace, api.HAMiDeviceConfigMap)
		if err != nil {
			t.Fatal(err)
		}
		cm = api.Clone(cm)
		cm.Data[api.HAMiDeviceConfigKey] = strings.Replace(cm.Data[api.HAMiDeviceConfigKey], "deviceSplitCount: 4", "deviceSplitCount: 0", 1)
		if _, err := c.Update(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, 20*time.Second, func() (bool, string) {
			return hasEvent(t, c, "default", gpuNode, agent.ReasonInvalidDevicePluginConfig,
				`ConfigMap kube-system/hami-scheduler-device key "device-config.yaml": nvidia.deviceSplitCount: Invalid value: 0`), "no refusal event yet"
		})
		if capacity, _ := nodeQuantity(g.node(t), api.ResourceNvidiaGPU); capacity != 32 {
			t.Errorf("after a wrong config: nvidia.com/gpu %d, want the last good config's 32", capacity)
		}
	})
}
