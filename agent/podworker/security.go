package podworker

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	utilsysctl "k8s.io/component-helpers/node/util/sysctl"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/runtime"
)

// # securityContext on the node
//
// What the kubelet does with a pod's securityContext (api/security.go)
// before the runtime sees it (pkg/kubelet/kuberuntime/security_context.go,
// pkg/kubelet/sysctl, pkg/volume/volume_linux.go):
//
//   - Admission: a pod asking for a sysctl outside the safe set
//     (api.SafeSysctls) fails at once: phase Failed, reason
//     SysctlForbidden, `Pod was rejected: forbidden sysctl: "kernel.msgmax"
//     not allowlisted`, and an event saying the same.
//   - The container's effective context (api.EffectiveSecurity) becomes a
//     runtime.SecuritySpec: the user is runAsUser, else the image's
//     numeric user, else its user name, else root; the supplemental groups
//     are fsGroup then supplementalGroups; no_new_privs when
//     allowPrivilegeEscalation is false; seccomp from the container, else
//     the pod, else Unconfined (a Localhost profile is a file under
//     Config.SeccompDir); the kubelet's masked and read-only /proc paths.
//   - runAsNonRoot: a container that would run as UID 0, or as a user
//     name whose UID cannot be known, is not created:
//     CreateContainerConfigError with the kubelet's words.
//   - fsGroup: the pod's emptyDir, configMap, secret and projected volumes
//     are given the group (setgid directories, group read for read-only
//     volumes, read and write for emptyDir), unless fsGroupChangePolicy is
//     OnRootMismatch and the volume's root already has them.

// Kubelet's reason for a pod refused because of its sysctls.
const sysctlForbiddenReason = "SysctlForbidden"

// defaultMaskedPaths and defaultReadonlyPaths are the kubelet's
// (pkg/securitycontext/util.go, kept in sync with moby), for procMount
// Default.
var (
	defaultMaskedPaths = []string{"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
		"/sys/firmware", "/sys/devices/virtual/powercap"}
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// admitSysctls is the kubelet's sysctl admission: "" when pod may run
// here, else the message it is refused with. hostNet: the pod's
// containers share the node's network namespace (hostNetwork, or a node
// without a pod network), where a net.* sysctl would change the node's.
func admitSysctls(pod *api.Pod, hostNet bool) string {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return ""
	}
	for _, s := range sc.Sysctls {
		name := utilsysctl.NormalizeName(s.Name)
		ns, _, _ := utilsysctl.GetNamespace(name)
		switch {
		case !slices.Contains(api.SafeSysctls, name):
			return fmt.Sprintf("forbidden sysctl: %q not allowlisted", name)
		case hostNet && ns == utilsysctl.NetNamespace:
			return fmt.Sprintf("forbidden sysctl: %q not allowed with host %s enabled", name, ns)
		}
	}
	return ""
}

// reject fails a pod the node will not run, as the kubelet's rejectPod:
// an event, then phase Failed with the reason and "Pod was rejected: ".
func (w *Worker) reject(ctx context.Context, pod *api.Pod, reason, msg string) error {
	w.event(ctx, pod, api.EventWarning, reason, "%s", msg)
	p := api.Clone(pod)
	p.Status.Phase = api.PodFailed
	p.Status.Reason = reason
	p.Status.Message = "Pod was rejected: " + msg
	_, err := w.writeStatus(ctx, pod, p)
	return err
}

// imageUser is the kubelet's getImageUser: the image's numeric UID, or
// its user name, or UID 0 when the image names no user.
func imageUser(img runtime.ImageInfo) (uid *int64, name string) {
	if img.User == "" {
		root := int64(0)
		return &root, ""
	}
	user, _, _ := strings.Cut(img.User, ":")
	if n, err := strconv.ParseInt(user, 10, 64); err == nil {
		return &n, ""
	}
	return nil, user
}

// securitySpec is the kubelet's determineEffectiveSecurityContext and
// verifyRunAsNonRoot for container c of pod, run from img.
func (w *Worker) securitySpec(pod *api.Pod, c *api.Container, img runtime.ImageInfo) (*runtime.SecuritySpec, error) {
	sc := api.EffectiveSecurity(&pod.Spec, c)
	uid, name := imageUser(img)
	if err := verifyRunAsNonRoot(pod, c, &sc, uid, name); err != nil {
		return nil, err
	}
	out := &runtime.SecuritySpec{RunAsUser: sc.RunAsUser, RunAsGroup: sc.RunAsGroup,
		Privileged:      sc.Privileged != nil && *sc.Privileged,
		NoNewPrivileges: sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
		ReadOnlyRootfs:  sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem,
		MaskedPaths:     slices.Clone(defaultMaskedPaths), ReadonlyPaths: slices.Clone(defaultReadonlyPaths)}
	if out.RunAsUser == nil {
		out.RunAsUser, out.Username = uid, name
	}
	if caps := sc.Capabilities; caps != nil {
		out.CapAdd, out.CapDrop = slices.Clone(caps.Add), slices.Clone(caps.Drop)
		if out.CapAdd == nil {
			out.CapAdd = []string{}
		}
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.FSGroup != nil {
			out.SupplementalGroups = append(out.SupplementalGroups, *psc.FSGroup)
		}
		out.SupplementalGroups = append(out.SupplementalGroups, psc.SupplementalGroups...)
		out.StrictGroups = psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == api.SupplementalGroupsPolicyStrict
		if len(psc.Sysctls) > 0 {
			out.Sysctls = map[string]string{}
			for _, s := range psc.Sysctls {
				out.Sysctls[utilsysctl.NormalizeName(s.Name)] = s.Value
			}
		}
	}
	if sp := sc.SeccompProfile; sp != nil {
		switch sp.Type {
		case api.SeccompProfileTypeRuntimeDefault:
			out.Seccomp = runtime.SeccompRuntimeDefault
		case api.SeccompProfileTypeLocalhost:
			if w.cfg.SeccompDir == "" || sp.LocalhostProfile == nil {
				return nil, fmt.Errorf("container %s: seccomp profile %s: this node has no seccomp profile directory", c.Name, sp.Type)
			}
			out.Seccomp = runtime.SeccompLocalhost
			out.SeccompProfilePath = filepath.Join(w.cfg.SeccompDir, *sp.LocalhostProfile)
		}
	}
	return out, nil
}

// verifyRunAsNonRoot is the kubelet's, with its words.
func verifyRunAsNonRoot(pod *api.Pod, c *api.Container, sc *api.SecurityContext, uid *int64, name string) error {
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		return nil
	}
	podName := fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
	if sc.RunAsUser != nil {
		if *sc.RunAsUser == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", podName, c.Name)
		}
		return nil
	}
	switch {
	case uid != nil && *uid == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", podName, c.Name)
	case uid == nil && name != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", name, podName, c.Name)
	}
	return nil
}

// Masks of the kubelet's SetVolumeOwnership.
const (
	rwMask   = 0o660
	roMask   = 0o440
	execMask = 0o110
)

// applyFSGroup gives the volume at dir to the pod's fsGroup, as the
// kubelet's SetVolumeOwnership: every file and directory gets the group
// (symbolic links are not followed), group read (readOnly) or read and
// write, directories also setgid and group search. Nothing without
// fsGroup; nothing with OnRootMismatch when dir already has them.
func applyFSGroup(pod *api.Pod, dir string, readOnly bool) error {
	psc := pod.Spec.SecurityContext
	if psc == nil || psc.FSGroup == nil {
		return nil
	}
	gid := int(*psc.FSGroup)
	mask := os.FileMode(rwMask)
	if readOnly {
		mask = roMask
	}
	if p := psc.FSGroupChangePolicy; p != nil && *p == api.FSGroupChangeOnRootMismatch {
		if fi, err := os.Stat(dir); err == nil && ownedBy(fi, gid) && fi.Mode()&mask == mask && fi.Mode()&os.ModeSetgid != 0 {
			return nil
		}
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, gid); err != nil {
			return fmt.Errorf("fsGroup %d: %w", gid, err)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		m := mask
		if d.IsDir() {
			m |= os.ModeSetgid | execMask
		}
		return os.Chmod(path, fi.Mode()|m)
	})
}

// ownedBy reports whether fi's group is gid.
func ownedBy(fi fs.FileInfo, gid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Gid) == gid
}
