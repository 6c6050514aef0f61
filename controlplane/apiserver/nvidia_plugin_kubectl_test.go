package apiserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/controllers"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
)

// NVIDIA's static device plugin manifest applies unchanged with the real
// kubectl and the daemonset controller makes one pod per node, a node
// tainted nvidia.com/gpu=present:NoSchedule (as GPU node pools are)
// included; the pods carry the manifest's priority (2000001000) and
// hostPath.
func TestKubectlNVIDIADevicePluginDaemonSet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- controllers.Run(ctx, e.local, e.local, controllers.Options{}) }()
	t.Cleanup(func() { cancel(); <-done })
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	fakeNodes(t, e.local, "gpu-1", "gpu-2")
	c.Must(t, "", "taint", "node", "gpu-2", "nvidia.com/gpu=present:NoSchedule")
	// NVIDIA's static manifest, unchanged (github.com/NVIDIA/k8s-device-plugin,
	// deployments/static/nvidia-device-plugin.yml, v0.17.x): a DaemonSet in
	// kube-system with the nvidia.com/gpu toleration, priority
	// system-node-critical and a hostPath to the kubelet's device-plugins
	// directory.
	file := "../../examples/workloads/nvidia-device-plugin.yml"
	if out := c.Must(t, "", "apply", "-f", file); strings.TrimSpace(out) != "daemonset.apps/nvidia-device-plugin-daemonset created" {
		t.Fatalf("apply: %q", out)
	}
	var pods []*api.Pod
	testwait.For(t, 20*time.Second, "a running device plugin pod on each node", func() bool {
		ps, _, err := client.List[*api.Pod](t.Context(), e.local, "kube-system", api.ListOptions{LabelSelector: "name=nvidia-device-plugin-ds"})
		nodes := map[string]bool{}
		for _, p := range ps {
			if p.Status.Phase == api.PodRunning {
				nodes[p.Spec.NodeName] = true
			}
		}
		pods = ps
		return err == nil && len(ps) == 2 && nodes["gpu-1"] && nodes["gpu-2"]
	})
	for _, p := range pods {
		if p.Spec.Priority == nil || *p.Spec.Priority != 2000001000 || len(p.Spec.Volumes) == 0 || p.Spec.Volumes[0].HostPath == nil ||
			p.Spec.Volumes[0].HostPath.Path != "/var/lib/kubelet/device-plugins" {
			t.Errorf("pod %s: priority %v, volumes %+v", p.Name, p.Spec.Priority, p.Spec.Volumes)
		}
	}
	lines := strings.Split(strings.TrimSpace(c.Must(t, "", "get", "ds", "-n", "kube-system")), "\n")
	if len(lines) != 2 || !strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "nvidia-device-plugin-daemonset 2 2 2 2 2 <none> ") {
		t.Errorf("get ds:\n%s", strings.Join(lines, "\n"))
	}
	if out := c.Must(t, "", "apply", "-f", file); strings.TrimSpace(out) != "daemonset.apps/nvidia-device-plugin-daemonset unchanged" {
		t.Errorf("apply again: %q", out)
	}
}
