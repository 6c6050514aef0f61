package apiserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/controllers"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
)

// nvidiaDevicePlugin is NVIDIA's static manifest, unchanged
// (github.com/NVIDIA/k8s-device-plugin, deployments/static/
// nvidia-device-plugin.yml, v0.17.x): a DaemonSet in kube-system with the
// nvidia.com/gpu toleration, priority system-node-critical and a hostPath
// to the kubelet's device-plugins directory.
const nvidiaDevicePlugin = `# Copyright (c) 2019, NVIDIA CORPORATION.  All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: nvidia-device-plugin-daemonset
  namespace: kube-system
spec:
  selector:
    matchLabels:
      name: nvidia-device-plugin-ds
  updateStrategy:
    type: RollingUpdate
  template:
    metadata:
      labels:
        name: nvidia-device-plugin-ds
    spec:
      tolerations:
      - key: nvidia.com/gpu
        operator: Exists
        effect: NoSchedule
      # Mark this pod as a critical add-on; when enabled, the critical add-on
      # scheduler reserves resources for critical add-on pods so that they can
      # be rescheduled after a failure.
      # See https://kubernetes.io/docs/tasks/administer-cluster/guaranteed-scheduling-critical-addon-pods/
      priorityClassName: "system-node-critical"
      containers:
      - image: nvcr.io/nvidia/k8s-device-plugin:v0.17.1
        name: nvidia-device-plugin-ctr
        env:
          - name: FAIL_ON_INIT_ERROR
            value: "false"
        securityContext:
          allowPrivilegeEscalation: false
          capabilities:
            drop: ["ALL"]
        volumeMounts:
        - name: device-plugin
          mountPath: /var/lib/kubelet/device-plugins
      volumes:
      - name: device-plugin
        hostPath:
          path: /var/lib/kubelet/device-plugins
`

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
	file := filepath.Join(t.TempDir(), "nvidia-device-plugin.yml")
	if err := os.WriteFile(file, []byte(nvidiaDevicePlugin), 0o644); err != nil {
		t.Fatal(err)
	}
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
