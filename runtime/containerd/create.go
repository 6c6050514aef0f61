package containerd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"skiff.dev/skiff/runtime"
)

// cfsPeriod is the CFS period CPU limits are expressed in, as the kubelet's.
const cfsPeriod = 100_000 // µs

// CreateContainer implements runtime.Runtime.
func (r *Runtime) CreateContainer(ctx context.Context, spec runtime.ContainerSpec) (string, error) {
	ctx = r.ns(ctx)
	if spec.ID == "" {
		spec.ID = newID()
	}
	id := spec.ID
	if err := runtime.ValidateID(id); err != nil {
		return "", fmt.Errorf("create container: %w", err)
	}
	name, err := runtime.NormalizeImageRef(spec.Image)
	if err != nil {
		return "", fmt.Errorf("create container %s: %w: %w", id, runtime.ErrInvalidSpec, err)
	}
	img, err := r.client.GetImage(ctx, name)
	if errdefs.IsNotFound(err) {
		return "", fmt.Errorf("create container %s: image %q: %w", id, name, runtime.ErrImageNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", id, mapErr(err))
	}
	if err := r.unpack(ctx, img); err != nil {
		return "", fmt.Errorf("create container %s: %w", id, err)
	}
	imgSpec, err := img.Spec(ctx)
	if err != nil {
		return "", fmt.Errorf("create container %s: image config: %w", id, mapErr(err))
	}

	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	logPath := spec.LogPath
	if logPath == "" {
		logPath = filepath.Join(r.cfg.StateDir, id+".log")
	}
	labels[labelLogPath] = logPath

	opts, err := r.specOpts(img, spec, runtime.ResolveArgs(imgSpec.Config.Entrypoint, imgSpec.Config.Cmd, spec.Command, spec.Args))
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", id, err)
	}
	var edits *runtime.CDIEdits
	if len(spec.CDIDevices) > 0 {
		opts = append(opts, r.withCDI(spec.CDIDevices, &edits))
	}
	if err := r.removeOrphanSnapshot(ctx, id); err != nil {
		return "", fmt.Errorf("create container %s: %w", id, err)
	}
	_, err = r.client.NewContainer(ctx, id,
		containerd.WithImage(img),
		containerd.WithSnapshotter(r.cfg.Snapshotter),
		containerd.WithNewSnapshot(id, img),
		containerd.WithRuntime(r.cfg.RuntimeName, nil),
		containerd.WithNewSpec(opts...),
		func(ctx context.Context, _ *containerd.Client, c *containers.Container) error {
			if edits != nil {
				raw, err := json.Marshal(edits)
				if err != nil {
					return err
				}
				labels[labelCDIEdits] = string(raw)
			}
			c.Labels = labels
			return nil
		})
	if err != nil {
		if !errdefs.IsAlreadyExists(err) {
			// The snapshot is made before the container record: clean it.
			if rerr := r.client.SnapshotService(r.cfg.Snapshotter).Remove(ctx, id); rerr != nil && !errdefs.IsNotFound(rerr) {
				r.log.Warn("remove snapshot of failed create", "id", id, "err", rerr)
			}
		}
		if errors.Is(err, runtime.ErrCDIUnresolved) {
			return "", fmt.Errorf("create container %s: %w", id, err)
		}
		return "", fmt.Errorf("create container %s: %w", id, mapErr(err))
	}
	return id, nil
}

// specOpts turns a ContainerSpec into OCI spec edits, on top of containerd's
// default spec (namespaces, default mounts and devices, capabilities).
func (r *Runtime) specOpts(img containerd.Image, spec runtime.ContainerSpec, args []string) ([]oci.SpecOpts, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("no command: the image has no entrypoint or cmd and none is given: %w", runtime.ErrInvalidSpec)
	}
	hostname := spec.Hostname
	if hostname == "" {
		hostname = spec.ID[:min(len(spec.ID), 63)]
	}
	opts := []oci.SpecOpts{
		oci.WithImageConfig(img),
		oci.WithProcessArgs(args...),
		oci.WithHostname(hostname),
		oci.WithHostResolvconf,
		oci.WithHostHostsFile,
	}
	if len(spec.Env) > 0 {
		opts = append(opts, oci.WithEnv(spec.Env))
	}
	if spec.WorkingDir != "" {
		opts = append(opts, oci.WithProcessCwd(spec.WorkingDir))
	}
	if spec.NetNSPath == "" {
		opts = append(opts, oci.WithHostNamespace(specs.NetworkNamespace))
	} else {
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: spec.NetNSPath}))
	}
	if spec.TTY {
		opts = append(opts, oci.WithTTY)
	}
	if spec.MemoryBytes > 0 {
		opts = append(opts, oci.WithMemoryLimit(uint64(spec.MemoryBytes)))
	}
	if spec.CPUMillis > 0 {
		// At least 1 ms per period: the kernel's minimum quota.
		quota := max(spec.CPUMillis*cfsPeriod/1000, 1000)
		opts = append(opts, oci.WithCPUCFS(quota, cfsPeriod))
	}
	var mounts []specs.Mount
	for i, m := range spec.Mounts {
		if !filepath.IsAbs(m.Destination) {
			return nil, fmt.Errorf("mounts[%d]: destination %q must be absolute: %w", i, m.Destination, runtime.ErrInvalidSpec)
		}
		switch m.Type {
		case runtime.MountBind, "":
			if !filepath.IsAbs(m.Source) {
				return nil, fmt.Errorf("mounts[%d]: source %q must be absolute: %w", i, m.Source, runtime.ErrInvalidSpec)
			}
			o := []string{"rbind", "rprivate", "rw"}
			if m.ReadOnly {
				o[2] = "ro"
			}
			mounts = append(mounts, specs.Mount{Type: "bind", Source: m.Source, Destination: m.Destination, Options: o})
		case runtime.MountTmpfs:
			o := []string{"nosuid", "nodev", "mode=1777"}
			if m.SizeBytes > 0 {
				o = append(o, fmt.Sprintf("size=%d", m.SizeBytes))
			}
			if m.ReadOnly {
				o = append(o, "ro")
			}
			mounts = append(mounts, specs.Mount{Type: "tmpfs", Source: "tmpfs", Destination: m.Destination, Options: o})
		default:
			return nil, fmt.Errorf("mounts[%d]: type %q: %w", i, m.Type, runtime.ErrInvalidSpec)
		}
	}
	if len(mounts) > 0 {
		opts = append(opts, oci.WithMounts(mounts))
	}
	sec, err := securityOpts(spec.Security) // security.go
	if err != nil {
		return nil, err
	}
	return append(opts, sec...), nil
}

// withCDI resolves CDI devices against the spec directories, applies their
// edits and records what changed in *edits.
func (r *Runtime) withCDI(devices []string, edits **runtime.CDIEdits) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		// Refresh errors belong to other, broken specs; an unresolvable
		// device below reports them.
		refreshErr := r.cdi.Refresh()
		before := snapshotSpec(s)
		if unresolved, err := r.cdi.InjectDevices(s, devices...); err != nil {
			if len(unresolved) > 0 {
				return fmt.Errorf("CDI devices %v (spec dirs %v): %w: %w", unresolved, r.cfg.CDISpecDirs, runtime.ErrCDIUnresolved, errors.Join(err, refreshErr))
			}
			return fmt.Errorf("CDI devices %v: %w", devices, err)
		}
		after := snapshotSpec(s)
		*edits = &runtime.CDIEdits{
			Devices:     slices.Clone(devices),
			DeviceNodes: added(before.devices, after.devices),
			Env:         added(before.env, after.env),
			Mounts:      added(before.mounts, after.mounts),
			Hooks:       added(before.hooks, after.hooks),
		}
		return nil
	}
}

type specSnapshot struct{ devices, env, mounts, hooks []string }

func snapshotSpec(s *oci.Spec) specSnapshot {
	var ss specSnapshot
	if s.Process != nil {
		ss.env = slices.Clone(s.Process.Env)
	}
	if s.Linux != nil {
		for _, d := range s.Linux.Devices {
			ss.devices = append(ss.devices, d.Path)
		}
	}
	for _, m := range s.Mounts {
		ss.mounts = append(ss.mounts, m.Source+":"+m.Destination)
	}
	if s.Hooks != nil {
		//lint:ignore SA1019 CDI specs and older runtimes still write prestart hooks: report them too
		for _, hs := range [][]specs.Hook{s.Hooks.Prestart, s.Hooks.CreateRuntime, s.Hooks.CreateContainer, s.Hooks.StartContainer, s.Hooks.Poststart, s.Hooks.Poststop} {
			for _, h := range hs {
				ss.hooks = append(ss.hooks, h.Path)
			}
		}
	}
	return ss
}

// added returns the entries of after that are not in before.
func added(before, after []string) []string {
	var out []string
	for _, a := range after {
		if !slices.Contains(before, a) {
			out = append(out, a)
		}
	}
	return out
}

// removeOrphanSnapshot removes the snapshot named id when no container of
// that id exists: what a create interrupted between the snapshot and the
// container record leaves (containerd killed, or gone while the failed
// create's cleanup ran). Left there, the next create of id would fail with
// the snapshot's "already exists", which reads as the container's.
func (r *Runtime) removeOrphanSnapshot(ctx context.Context, id string) error {
	sn := r.client.SnapshotService(r.cfg.Snapshotter)
	if _, err := sn.Stat(ctx, id); errdefs.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("snapshot %s: %w", id, mapErr(err))
	}
	if _, err := r.client.ContainerService().Get(ctx, id); err == nil || !errdefs.IsNotFound(err) {
		return mapErr(err) // nil: the container owns it
	}
	r.log.Warn("removing the snapshot of an interrupted create", "id", id)
	if err := sn.Remove(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove the snapshot of an interrupted create: %w", mapErr(err))
	}
	return nil
}
