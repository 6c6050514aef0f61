package podworker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/atomicfile"
	"skiff.dev/skiff/runtime"
)

// mounts prepares the pod volumes a container mounts and returns the bind
// mounts: configMap and secret keys become files, emptyDir a directory
// (tmpfs for medium Memory), hostPath the node's path, a projected volume
// the files of its sources (serviceaccount.go).
func (w *Worker) mounts(ctx context.Context, pod *api.Pod, c *api.Container, st *podState) ([]runtime.Mount, error) {
	if len(c.VolumeMounts) == 0 {
		return nil, nil
	}
	if w.cfg.VolumeDir == "" {
		return nil, fmt.Errorf("container %s mounts volumes but the agent has no volume directory", c.Name)
	}
	vols := map[string]*api.Volume{}
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var out []runtime.Mount
	for i, vm := range c.VolumeMounts {
		v, ok := vols[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMounts[%d]: no volume named %q", i, vm.Name)
		}
		src, err := w.prepareVolume(ctx, pod, v, st)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		readOnly := vm.ReadOnly || v.ConfigMap != nil || v.Secret != nil || v.Projected != nil ||
			v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly
		if vm.SubPath != "" {
			clean := filepath.Clean(vm.SubPath)
			if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
				return nil, fmt.Errorf("volumeMounts[%d].subPath %q must be a relative path inside the volume", i, vm.SubPath)
			}
			src = filepath.Join(src, clean)
			if _, err := os.Stat(src); os.IsNotExist(err) {
				if v.ConfigMap != nil || v.Secret != nil || v.Projected != nil {
					return nil, fmt.Errorf("volumeMounts[%d].subPath %q: no such key in volume %q", i, vm.SubPath, v.Name)
				}
				if err := os.MkdirAll(src, 0o755); err != nil {
					return nil, err
				}
			}
		}
		out = append(out, runtime.Mount{Type: runtime.MountBind, Source: src, Destination: vm.MountPath, ReadOnly: readOnly})
	}
	return out, nil
}

// prepareVolume makes the volume's directory on the node and returns it.
func (w *Worker) prepareVolume(ctx context.Context, pod *api.Pod, v *api.Volume, st *podState) (string, error) {
	dir := filepath.Join(w.podDir(pod.UID), "volumes", v.Name)
	switch {
	case v.HostPath != nil:
		return w.prepareHostPath(v.HostPath)
	case v.PersistentVolumeClaim != nil:
		return w.claimPath(ctx, pod, v.PersistentVolumeClaim) // claims.go
	case v.EmptyDir != nil:
		_, statErr := os.Stat(dir)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return "", err
		}
		if v.EmptyDir.Medium == "Memory" && !isMountPoint(dir) {
			opts := "mode=1777"
			if v.EmptyDir.SizeLimit != nil {
				opts += fmt.Sprintf(",size=%d", v.EmptyDir.SizeLimit.Value())
			}
			if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
				return "", fmt.Errorf("mount tmpfs for emptyDir medium Memory (needs root): %w", err)
			}
		}
		if os.IsNotExist(statErr) { // made now: give it to fsGroup once (security.go)
			return dir, applyFSGroup(pod, dir, false)
		}
		return dir, nil
	case v.ConfigMap != nil:
		files := map[string][]byte{}
		cm, err := w.configMap(ctx, pod.Namespace, v.ConfigMap.Name)
		if err != nil {
			if !(api.IsNotFound(err) && isOptional(v.ConfigMap.Optional)) {
				return "", fmt.Errorf("configmap %q: %w", v.ConfigMap.Name, err)
			}
		} else {
			for k, val := range cm.Data {
				files[k] = []byte(val)
			}
			for k, val := range cm.BinaryData {
				files[k] = val
			}
		}
		return dir, ownedFiles(pod, dir, writeFiles(dir, files, v.ConfigMap.Items, v.ConfigMap.DefaultMode, "configmap "+v.ConfigMap.Name))
	case v.Secret != nil:
		files := map[string][]byte{}
		s, err := w.secret(ctx, pod.Namespace, v.Secret.SecretName)
		if err != nil {
			if !(api.IsNotFound(err) && isOptional(v.Secret.Optional)) {
				return "", fmt.Errorf("secret %q: %w", v.Secret.SecretName, err)
			}
		} else {
			for k, val := range s.Data {
				files[k] = val
			}
		}
		return dir, ownedFiles(pod, dir, writeFiles(dir, files, v.Secret.Items, v.Secret.DefaultMode, "secret "+v.Secret.SecretName))
	case v.Projected != nil:
		if _, err := os.Stat(dir); err == nil && w.tokensCurrent(v, st) {
			return dir, nil // written for another container, tokens not due (serviceaccount.go)
		}
		files, items, err := w.projectedFiles(ctx, pod, v, st)
		if err != nil {
			return "", err
		}
		return dir, ownedFiles(pod, dir, writeFiles(dir, files, items, v.Projected.DefaultMode, "projected volume "+v.Name))
	}
	return "", fmt.Errorf("volume %q has no supported source", v.Name)
}

// ownedFiles gives a read-only volume just written (err: how the write
// went) to the pod's fsGroup (security.go).
func ownedFiles(pod *api.Pod, dir string, err error) error {
	if err != nil {
		return err
	}
	return applyFSGroup(pod, dir, true)
}

// KubeletRootDir is the kubelet's root directory (its --root-dir
// default). Upstream manifests mount paths below it: NVIDIA's device
// plugin /var/lib/kubelet/device-plugins, CSI and DRA drivers
// /var/lib/kubelet/plugins_registry.
const KubeletRootDir = "/var/lib/kubelet"

// NodePath is where a hostPath is on a node whose counterpart of the
// kubelet's root directory is rootDir: p itself, except that
// /var/lib/kubelet and every path below it are taken from under rootDir
// (/var/lib/kubelet/device-plugins is rootDir/device-plugins). A path
// that merely starts with the same letters (/var/lib/kubelet-x) is not
// below it. "" rootDir, or rootDir itself /var/lib/kubelet, maps nothing.
// Who may mount a hostPath at all is Pod Security's to say (the API
// server's admission), on the path as written; the API refuses a path
// with ".." (api validation), so a mapped path stays under rootDir.
func NodePath(rootDir, p string) string {
	if rootDir == "" {
		return p
	}
	rest, ok := strings.CutPrefix(p, KubeletRootDir)
	if !ok || rest != "" && rest[0] != '/' {
		return p
	}
	return filepath.Join(rootDir, rest)
}

// prepareHostPath makes or checks a hostPath as its type asks, where it
// is on this node (NodePath), and returns that path.
func (w *Worker) prepareHostPath(h *api.HostPathVolumeSource) (string, error) {
	p := NodePath(w.cfg.RootDir, h.Path)
	typ := ""
	if h.Type != nil {
		typ = *h.Type
	}
	switch typ {
	case "DirectoryOrCreate":
		return p, os.MkdirAll(p, 0o755)
	case "FileOrCreate":
		f, err := os.OpenFile(p, os.O_CREATE, 0o644)
		if err != nil {
			return "", err
		}
		return p, f.Close()
	case "":
	default:
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("hostPath type check failed: %s is not a %s", h.Path, typ)
		}
	}
	return p, nil
}

// writeFiles writes keys as files (all keys, or the chosen items), each
// atomically (atomicfile.WriteFile) so a running container never reads half a file.
func writeFiles(dir string, files map[string][]byte, items []api.KeyToPath, defMode *int32, what string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if defMode != nil {
		mode = os.FileMode(*defMode)
	}
	type file struct {
		path string
		data []byte
		mode os.FileMode
	}
	var want []file
	if len(items) == 0 {
		for k, v := range files {
			want = append(want, file{k, v, mode})
		}
	} else {
		for _, it := range items {
			v, ok := files[it.Key]
			if !ok {
				return fmt.Errorf("%s has no key %q", what, it.Key)
			}
			m := mode
			if it.Mode != nil {
				m = os.FileMode(*it.Mode)
			}
			want = append(want, file{it.Path, v, m})
		}
	}
	for _, f := range want {
		p := filepath.Join(dir, filepath.Clean("/" + f.path)[1:])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := atomicfile.WriteFile(p, f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

func isMountPoint(dir string) bool {
	var st, parent unix.Stat_t
	if unix.Stat(dir, &st) != nil || unix.Stat(filepath.Dir(dir), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}

// unmountTmpfs unmounts memory-backed emptyDirs under a pod directory.
func unmountTmpfs(podDir string) {
	entries, err := os.ReadDir(filepath.Join(podDir, "volumes"))
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(podDir, "volumes", e.Name())
		if isMountPoint(p) {
			_ = unix.Unmount(p, unix.MNT_DETACH)
		}
	}
}
