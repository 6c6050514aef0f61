package integration

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/internal/testwait"
)

// The device plugin as a pod (issue 21), on the cluster of
// TestGPUOnSimulatedDGXA100, last: the agent restarts with
// --device-plugin=external and dgx-1's nvidia.com/gpu goes; `skiff image
// self` (the skiff binary itself) imports skiff.dev/skiff:local; NVIDIA's
// static DaemonSet and skiff's apply unchanged with the real kubectl;
// skiff's pod registers through its hostPath
// /var/lib/kubelet/device-plugins, which is the agent's
// DATA-DIR/device-plugins, and the node has its eight GPUs again under
// the agent's UUIDs; a GPU pod runs on one; NVIDIA's pod cannot pull its
// image offline (ErrImagePull); deleting skiff's DaemonSet takes the GPUs
// away, as a plugin's end does on a kubelet.
func (g *gpuCluster) devicePluginAsAPod(t *testing.T) {
	const (
		skiffDS  = "../examples/workloads/skiff-device-plugin-daemonset.yaml"
		nvidiaDS = "../examples/workloads/nvidia-device-plugin.yml"
	)
	bin := skiffBinary(t) // built once per run; other tests share it
	start := time.Now()
	uuids := g.gpuUUIDs(t)
	oldPort := g.node(t).Status.DaemonEndpoints.KubeletEndpoint.Port
	g.agent.kill(t)
	g.devicePlugin = agent.DevicePluginExternal
	g.gpuStartAgent(t)
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		n := g.node(t)
		restarted := n.Status.DaemonEndpoints.KubeletEndpoint.Port != oldPort
		_, listed := n.Status.Capacity[api.ResourceNvidiaGPU]
		return restarted && !listed && n.Labels[api.LabelSkiffDevicePlugin] == agent.DevicePluginExternal,
			fmt.Sprintf("restarted %v, capacity %v, label %q", restarted, n.Status.Capacity, n.Labels[api.LabelSkiffDevicePlugin])
	})

	out, err := exec.Command(bin, "image", "self", "--containerd-address", g.ctrd.addr, "--containerd-namespace", g.ctrd.ns).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "skiff.dev/skiff:local imported (the skiff binary") {
		t.Fatalf("skiff image self: %v\n%s", err, out)
	}
	t.Logf("skiff image self: %s", strings.TrimSpace(string(out)))

	k := kubectlFor(t, g.cp)
	applied := time.Now()
	got := k.Must(t, "", "apply", "-f", nvidiaDS, "-f", skiffDS)
	for _, want := range []string{"daemonset.apps/nvidia-device-plugin-daemonset created", "daemonset.apps/skiff-device-plugin-daemonset created"} {
		if !strings.Contains(got, want) {
			t.Errorf("apply: %q lacks %q", got, want)
		}
	}
	defer k.Run(t, "", "delete", "-f", nvidiaDS, "--wait=false")
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		n := g.node(t)
		ng, err := gputopology.ParseNodeGPUs(n.Annotations[gputopology.AnnotationTopology])
		ps := listPods(t, g.c, "kube-system", "name=skiff-device-plugin-ds")
		return err == nil && gpuAllocatable(n) == 8 && len(ng.Healthy) == 8 && runningPods(ps) == 1,
			fmt.Sprintf("allocatable %v, %d GPUs healthy in the annotation; plugin pod: %s", n.Status.Allocatable, len(ng.Healthy), podSummary(ps))
	})
	fromPod := time.Since(applied)
	if ng, _ := gputopology.ParseNodeGPUs(g.node(t).Annotations[gputopology.AnnotationTopology]); len(ng.Devices) != len(uuids) {
		t.Errorf("topology lists %d GPUs, want %d", len(ng.Devices), len(uuids))
	}

	// A GPU pod on the pod's plugin: its GPU is one of the agent's.
	g.create(t, gpuPod("via-plugin-pod", 1, "nvidia-smi -L; echo visible=$NVIDIA_VISIBLE_DEVICES"))
	p := g.gpuWaitEnded(t, "via-plugin-pod", 30*time.Second)
	logs := g.logs(t, "via-plugin-pod")
	visible := ""
	for _, l := range strings.Split(logs, "\n") {
		if v, ok := strings.CutPrefix(l, "visible="); ok {
			visible = v
		}
	}
	if p.Status.Phase != api.PodSucceeded || strings.Count(logs, "A100-SXM4-40GB") != 1 || !slices.Contains(uuids, visible) {
		t.Errorf("GPU pod on the plugin pod's GPUs: %s, NVIDIA_VISIBLE_DEVICES %q (want one of the node's %v)\n%s", podSummary([]*api.Pod{p}), visible, uuids, logs)
	}

	// NVIDIA's own plugin pod: its image cannot be pulled offline.
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		ps := listPods(t, g.c, "kube-system", "name=nvidia-device-plugin-ds")
		for _, p := range ps {
			for _, cs := range p.Status.ContainerStatuses {
				if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") && p.Spec.NodeName == gpuNode {
					return true, ""
				}
			}
		}
		return false, "NVIDIA's plugin pod: " + podSummary(ps)
	})
	pulled := false
	for _, p := range listPods(t, g.c, "kube-system", "name=nvidia-device-plugin-ds") {
		for _, e := range eventsFor(t, g.c, "kube-system", p.Name) {
			pulled = pulled || e.Type == api.EventWarning && e.Reason == "Failed" && strings.Contains(e.Message, "nvcr.io/nvidia/k8s-device-plugin:v0.17.1")
		}
	}
	if !pulled {
		t.Error("no Warning Failed event naming NVIDIA's image on its plugin pod")
	}

	// The plugin pod ends: so do the node's GPUs.
	k.Must(t, "", "delete", "-f", skiffDS)
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		n := g.node(t)
		return gpuAllocatable(n) == 0, fmt.Sprintf("allocatable %v after the plugin's DaemonSet was deleted", n.Status.Allocatable)
	})
	t.Logf("MEASURE device plugin as a pod: apply → the node's 8 GPUs from the pod %v; subtest %v (agent restart, image, GPU pod, ErrImagePull, delete)",
		fromPod.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
