package podworker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
)

func TestNodePath(t *testing.T) {
	for _, tc := range []struct {
		name, root, path, want string
	}{
		{"the device plugin directory", "/data/n1", "/var/lib/kubelet/device-plugins", "/data/n1/device-plugins"},
		{"a socket in it", "/data/n1", "/var/lib/kubelet/device-plugins/kubelet.sock", "/data/n1/device-plugins/kubelet.sock"},
		{"the root itself", "/data/n1", "/var/lib/kubelet", "/data/n1"},
		{"the root with a slash", "/data/n1", "/var/lib/kubelet/", "/data/n1"},
		{"a name that only starts alike", "/data/n1", "/var/lib/kubelet-other/x", "/var/lib/kubelet-other/x"},
		{"a parent of the root", "/data/n1", "/var/lib", "/var/lib"},
		{"another path", "/data/n1", "/etc/hosts", "/etc/hosts"},
		{"no root: as written", "", "/var/lib/kubelet/device-plugins", "/var/lib/kubelet/device-plugins"},
		{"the kubelet's own root", "/var/lib/kubelet", "/var/lib/kubelet/device-plugins", "/var/lib/kubelet/device-plugins"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NodePath(tc.root, tc.path); got != tc.want {
				t.Errorf("NodePath(%q, %q) = %q, want %q", tc.root, tc.path, got, tc.want)
			}
		})
	}
}

// A pod's hostPath /var/lib/kubelet/device-plugins (NVIDIA's DaemonSet)
// mounts the node's own device plugin directory under RootDir; its type
// is checked there, not on the machine's /var/lib/kubelet; other
// hostPaths are the machine's.
func TestHostPathBelowKubeletRootIsTheNodesOwn(t *testing.T) {
	root, other := t.TempDir(), t.TempDir()
	dir := "Directory"
	pod := newPod("plugin", func(p *api.Pod) {
		p.Spec.Volumes = []api.Volume{
			{Name: "device-plugin", HostPath: &api.HostPathVolumeSource{Path: "/var/lib/kubelet/device-plugins", Type: &dir}},
			{Name: "other", HostPath: &api.HostPathVolumeSource{Path: other}},
		}
		p.Spec.Containers[0].VolumeMounts = []api.VolumeMount{
			{Name: "device-plugin", MountPath: "/var/lib/kubelet/device-plugins"},
			{Name: "other", MountPath: "/other"},
		}
	})
	f := newFixture(t, pod)
	f.w.cfg.RootDir = root
	c := &pod.Spec.Containers[0]

	// The node has no device plugin directory yet: the type check fails
	// there, naming the path as the pod wrote it.
	if _, err := f.w.mounts(context.Background(), pod, c, &podState{}); err == nil ||
		!strings.Contains(err.Error(), "/var/lib/kubelet/device-plugins is not a Directory") {
		t.Fatalf("mounts without the directory: %v; want the Directory type check to fail", err)
	}
	if err := os.Mkdir(filepath.Join(root, "device-plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	ms, err := f.w.mounts(context.Background(), pod, c, &podState{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range ms {
		got[m.Destination] = m.Source
	}
	if want := filepath.Join(root, "device-plugins"); got["/var/lib/kubelet/device-plugins"] != want {
		t.Errorf("/var/lib/kubelet/device-plugins mounts %q, want the node's %q", got["/var/lib/kubelet/device-plugins"], want)
	}
	if got["/other"] != other {
		t.Errorf("/other mounts %q, want the machine's %q", got["/other"], other)
	}
}
