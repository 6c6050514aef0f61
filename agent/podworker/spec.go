package podworker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/runtime"
)

// LabelNode marks a container with the node that owns it, so that several
// agents sharing one containerd (a multi-node cluster on one machine) only
// ever clean up their own containers.
const LabelNode = "skiff.dev/node"

// ContainerID is the runtime ID of attempt n of a container: derived, so a
// retried create after a crash finds the container it already made.
func ContainerID(podUID, container string, n int) string {
	uid := strings.ReplaceAll(podUID, "-", "")
	// Runtime IDs are at most 76 characters; a container name is at most
	// 63, so the uid gives way (its first 8 bytes are plenty per node).
	if room := 76 - len(container) - len(fmt.Sprint(n)) - 2; len(uid) > room {
		uid = uid[:max(room, 8)]
	}
	return fmt.Sprintf("%s-%s-%d", uid, container, n)
}

// containerSpec turns a pod's container into what the runtime creates:
// command, environment, mounts, limits and devices.
func (w *Worker) containerSpec(ctx context.Context, pod *api.Pod, c *api.Container, img runtime.ImageInfo, n int, st *podState) (runtime.ContainerSpec, error) {
	env, err := w.env(ctx, pod, c)
	if err != nil {
		return runtime.ContainerSpec{}, err
	}
	mounts, err := w.mounts(ctx, pod, c, st)
	if err != nil {
		return runtime.ContainerSpec{}, err
	}
	spec := runtime.ContainerSpec{
		ID: ContainerID(pod.UID, c.Name, n),
		Labels: map[string]string{
			runtime.LabelPodUID:        pod.UID,
			runtime.LabelPodNamespace:  pod.Namespace,
			runtime.LabelPodName:       pod.Name,
			runtime.LabelContainerName: c.Name,
			runtime.LabelAttempt:       strconv.Itoa(n),
			LabelNode:                  w.cfg.NodeName,
		},
		Image:      img.Name,
		Command:    expandAll(c.Command, env),
		Args:       expandAll(c.Args, env),
		WorkingDir: c.WorkingDir,
		Mounts:     mounts,
		Hostname:   pod.Name,
		TTY:        c.TTY,
	}
	if spec.Security, err = w.securitySpec(pod, c, img); err != nil { // security.go
		return runtime.ContainerSpec{}, err
	}
	if pod.Spec.Hostname != "" {
		spec.Hostname = pod.Spec.Hostname
	}
	if pod.Spec.HostNetwork {
		spec.Hostname = ""
	}
	if st.network != nil && !pod.Spec.HostNetwork {
		spec.NetNSPath = st.network.NetNSPath
	}
	if m, ok, err := w.hostsMount(ctx, pod, st); err != nil {
		return runtime.ContainerSpec{}, err
	} else if ok {
		spec.Mounts = append(spec.Mounts, m)
	}
	if m, ok, err := w.resolvConfMount(ctx, pod); err != nil { // resolvconf.go
		return runtime.ContainerSpec{}, err
	} else if ok {
		spec.Mounts = append(spec.Mounts, m)
	}
	if q, ok := c.Resources.Limits[api.ResourceCPU]; ok {
		spec.CPUMillis = q.MilliValue()
	}
	if q, ok := c.Resources.Limits[api.ResourceMemory]; ok {
		spec.MemoryBytes = q.Value()
	}
	if needsDevices(c) {
		if w.cfg.Devices == nil {
			return runtime.ContainerSpec{}, fmt.Errorf("container %s asks for devices (%s) but this node has no device manager", c.Name, strings.Join(extendedResources(c), ", "))
		}
		alloc, err := w.cfg.Devices.Allocate(ctx, pod, c)
		if err != nil {
			return runtime.ContainerSpec{}, fmt.Errorf("allocate devices for container %s: %w", c.Name, err)
		}
		spec.CDIDevices = alloc.CDIDevices
		if st.allocTrace == nil {
			st.allocTrace = map[string]map[string]any{}
		}
		st.allocTrace[c.Name] = alloc.Trace
		spec.Mounts = append(spec.Mounts, alloc.Mounts...)
		keys := make([]string, 0, len(alloc.Env))
		for k := range alloc.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			env = append(env, k+"="+alloc.Env[k])
		}
	}
	if st.claims != nil {
		// The claims' CDI devices (DRA), beside the device plugins' ones.
		for _, id := range st.claims.CDIDevices[c.Name] {
			if !slices.Contains(spec.CDIDevices, id) {
				spec.CDIDevices = append(spec.CDIDevices, id)
			}
		}
	}
	spec.Env = env
	return spec, nil
}

func extendedResources(c *api.Container) []string {
	var out []string
	for name := range c.Resources.Limits {
		if strings.Contains(name, "/") && !strings.HasPrefix(name, "kubernetes.io/") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func needsDevices(c *api.Container) bool { return len(extendedResources(c)) > 0 }

// env resolves a container's environment: envFrom first, then env, each
// value with $(VAR) references to earlier variables expanded.
func (w *Worker) env(ctx context.Context, pod *api.Pod, c *api.Container) ([]string, error) {
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	// Service links first: the container's own env wins (discovery.go).
	for _, kv := range w.serviceLinks(ctx, pod) {
		set(kv[0], kv[1])
	}
	for i, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, err := w.configMap(ctx, pod.Namespace, from.ConfigMapRef.Name)
			if err != nil {
				if isOptional(from.ConfigMapRef.Optional) && api.IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("envFrom[%d]: %w", i, err)
			}
			for _, k := range sortedKeys(cm.Data) {
				set(from.Prefix+k, cm.Data[k])
			}
		case from.SecretRef != nil:
			s, err := w.secret(ctx, pod.Namespace, from.SecretRef.Name)
			if err != nil {
				if isOptional(from.SecretRef.Optional) && api.IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("envFrom[%d]: %w", i, err)
			}
			keys := make([]string, 0, len(s.Data))
			for k := range s.Data {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				set(from.Prefix+k, string(s.Data[k]))
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vals))
			continue
		}
		v, skip, err := w.valueFrom(ctx, pod, c, e)
		if err != nil {
			return nil, err
		}
		if !skip {
			set(e.Name, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return out, nil
}

func (w *Worker) valueFrom(ctx context.Context, pod *api.Pod, c *api.Container, e api.EnvVar) (string, bool, error) {
	src := e.ValueFrom
	switch {
	case src.FieldRef != nil:
		v, err := fieldValue(pod, src.FieldRef.FieldPath, w.cfg.NodeIP)
		return v, false, err
	case src.ResourceFieldRef != nil:
		return resourceValue(c, src.ResourceFieldRef), false, nil
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := w.configMap(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if isOptional(ref.Optional) && api.IsNotFound(err) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("env %s: %w", e.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if isOptional(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("env %s: couldn't find key %s in ConfigMap %s/%s", e.Name, ref.Key, pod.Namespace, ref.Name)
		}
		return v, false, nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := w.secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if isOptional(ref.Optional) && api.IsNotFound(err) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("env %s: %w", e.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if isOptional(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("env %s: couldn't find key %s in Secret %s/%s", e.Name, ref.Key, pod.Namespace, ref.Name)
		}
		return string(v), false, nil
	}
	return "", true, nil
}

// fieldValue reads a downward-API field of the pod.
func fieldValue(pod *api.Pod, path, nodeIP string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return pod.UID, nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return nodeIP, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	}
	for _, p := range []struct {
		prefix string
		m      map[string]string
	}{{"metadata.labels['", pod.Labels}, {"metadata.annotations['", pod.Annotations}} {
		if strings.HasPrefix(path, p.prefix) && strings.HasSuffix(path, "']") {
			return p.m[strings.TrimSuffix(strings.TrimPrefix(path, p.prefix), "']")], nil
		}
	}
	return "", fmt.Errorf("fieldRef %q is not supported", path)
}

func resourceValue(c *api.Container, ref *api.ResourceFieldSelector) string {
	parts := strings.SplitN(ref.Resource, ".", 2)
	if len(parts) != 2 {
		return ""
	}
	list := c.Resources.Limits
	if parts[0] == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[parts[1]]
	if !ok {
		return ""
	}
	v, _ := api.ResourceAmount(parts[1], q) // millicores for cpu
	if ref.Divisor != nil && ref.Divisor.Sign() > 0 {
		if d, _ := api.ResourceAmount(parts[1], *ref.Divisor); d > 0 {
			return strconv.FormatInt(ceilDiv(v, d), 10)
		}
	}
	if parts[1] == api.ResourceCPU {
		return strconv.FormatInt(ceilDiv(v, 1000), 10)
	}
	return strconv.FormatInt(v, 10)
}

// ceilDiv is ⌈a/b⌉ for b > 0, without the a+b-1 that overflows near the
// int64 bound.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b > 0 {
		q++
	}
	return q
}

func isOptional(b *bool) bool { return b != nil && *b }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// expand replaces $(VAR) with earlier variables; $$(VAR) escapes.
func expand(s string, vals map[string]string) string {
	if !strings.Contains(s, "$(") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '$' && i+1 < len(s) {
			if s[i+1] == '$' {
				b.WriteByte('$')
				i++
				continue
			}
			if s[i+1] == '(' {
				if j := strings.IndexByte(s[i+2:], ')'); j >= 0 {
					name := s[i+2 : i+2+j]
					if v, ok := vals[name]; ok {
						b.WriteString(v)
					} else {
						b.WriteString(s[i : i+3+j])
					}
					i += 2 + j
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func expandAll(args []string, env []string) []string {
	if len(args) == 0 {
		return nil
	}
	vals := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vals[k] = v
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = expand(a, vals)
	}
	return out
}

func (w *Worker) configMap(ctx context.Context, ns, name string) (*api.ConfigMap, error) {
	o, err := w.cfg.Client.Get(ctx, api.MustKindOf(&api.ConfigMap{}), ns, name)
	if err != nil {
		return nil, err
	}
	return o.(*api.ConfigMap), nil
}

func (w *Worker) secret(ctx context.Context, ns, name string) (*api.Secret, error) {
	o, err := w.cfg.Client.Get(ctx, api.MustKindOf(&api.Secret{}), ns, name)
	if err != nil {
		return nil, err
	}
	return o.(*api.Secret), nil
}

// podDir is where a pod's volumes live on the node.
func (w *Worker) podDir(uid string) string { return filepath.Join(w.cfg.VolumeDir, uid) }

func (w *Worker) removeVolumes(uid string) error {
	if w.cfg.VolumeDir == "" || uid == "" {
		return nil
	}
	dir := w.podDir(uid)
	unmountTmpfs(dir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove volumes of pod %s: %w", uid, err)
	}
	return nil
}

// cleanupVolumes removes volume directories of pods not in live.
func (w *Worker) cleanupVolumes(live map[string]bool) error {
	if w.cfg.VolumeDir == "" {
		return nil
	}
	entries, err := os.ReadDir(w.cfg.VolumeDir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		if e.IsDir() && !live[e.Name()] {
			if err := w.removeVolumes(e.Name()); err != nil {
				return err
			}
		}
	}
	return nil
}
