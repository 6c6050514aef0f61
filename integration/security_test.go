package integration

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	psapi "k8s.io/pod-security-admission/api"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/runtime"
)

// securityContext on real containers (issue 20), one node for all:
//
//  1. A pod that meets Pod Security's restricted level runs in a
//     restricted namespace as UID 1000 without capabilities: `id` says
//     uid=1000 gid=3000 groups=2000,3000,4000 (the docs' answer),
//     /proc/self/status no capability, no_new_privs and seccomp filtering,
//     the root filesystem refuses a write, the fsGroup emptyDir takes one
//     (setgid: group 2000), the sysctl is set.
//  2. A pod without securityContext runs as root with containerd's
//     default capabilities, no no_new_privs, no seccomp (the CRI's
//     defaults, what Kubernetes pods get).
//  3. A privileged pod runs in kube-system (privileged for Pod Security)
//     with every capability; the same pod with a hostPath in a baseline
//     namespace is refused with Pod Security's words.
//  4. runAsNonRoot on an image that runs as root is not started:
//     CreateContainerConfigError in the kubelet's words.
func TestSecurityContextOnContainerd(t *testing.T) {
	c, rt := oneNode(t)
	ctx := context.Background()
	for name, labels := range map[string]map[string]string{
		"locked": {psapi.EnforceLevelLabel: "restricted"},
		"lab":    nil,
	} {
		ns := namespace(name)
		ns.Labels = labels
		if _, err := c.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	busybox := func(ns, name, script string) *api.Pod {
		p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: ns}}
		p.Spec.Containers = []api.Container{{Name: "c", Image: "busybox:1.36", ImagePullPolicy: "IfNotPresent",
			Command: []string{"sh", "-c", script}}}
		return p
	}
	i64 := func(v int64) *int64 { return &v }
	yes, no := true, false

	restricted := busybox("locked", "restricted", "sleep 3600")
	restricted.Spec.SecurityContext = &api.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: i64(1000), RunAsGroup: i64(3000),
		FSGroup: i64(2000), SupplementalGroups: []int64{4000}, SeccompProfile: &api.SeccompProfile{Type: api.SeccompProfileTypeRuntimeDefault},
		Sysctls: []api.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}}}
	restricted.Spec.Volumes = []api.Volume{{Name: "data", EmptyDir: &api.EmptyDirVolumeSource{}}}
	restricted.Spec.Containers[0].VolumeMounts = []api.VolumeMount{{Name: "data", MountPath: "/data"}}
	restricted.Spec.Containers[0].SecurityContext = &api.SecurityContext{AllowPrivilegeEscalation: &no,
		Capabilities: &api.Capabilities{Drop: []string{"ALL"}}, ReadOnlyRootFilesystem: &yes}
	plain := busybox("lab", "plain", "sleep 3600")
	privileged := busybox(api.NamespaceSystem, "agent", "sleep 3600")
	privileged.Spec.Containers[0].SecurityContext = &api.SecurityContext{Privileged: &yes}
	nonRoot := busybox("lab", "nonroot", "sleep 3600")
	nonRoot.Spec.SecurityContext = &api.PodSecurityContext{RunAsNonRoot: &yes}
	for _, p := range []*api.Pod{restricted, plain, privileged, nonRoot} {
		if _, err := c.Create(ctx, p); err != nil {
			t.Fatalf("create pod %s/%s: %v", p.Namespace, p.Name, err)
		}
	}

	hostAgent := busybox("lab", "host-agent", "sleep 3600")
	hostAgent.Spec.Containers[0].SecurityContext = &api.SecurityContext{Privileged: &yes}
	hostAgent.Spec.Volumes = []api.Volume{{Name: "root", HostPath: &api.HostPathVolumeSource{Path: "/"}}}
	hostAgent.Spec.Containers[0].VolumeMounts = []api.VolumeMount{{Name: "root", MountPath: "/host"}}
	_, err := c.Create(ctx, hostAgent)
	if want := `pods "host-agent" is forbidden: violates PodSecurity "baseline:latest": hostPath volumes (volume "root"), privileged (container "c" must not set securityContext.privileged=true)`; err == nil || err.Error() != want {
		t.Errorf("privileged hostPath pod in a baseline namespace: %v, want %s", err, want)
	}

	pods := map[string]*api.Pod{}
	testwait.Until(t, 90*time.Second, func() (bool, string) {
		var status []string
		done := true
		for _, p := range []*api.Pod{restricted, plain, privileged, nonRoot} {
			got, err := client.Get[*api.Pod](ctx, c, p.Namespace, p.Name)
			if err != nil {
				return false, err.Error()
			}
			pods[p.Name] = got
			if p == nonRoot {
				w := waitingOf(got)
				done = done && w != nil && w.Reason == "CreateContainerConfigError"
			} else {
				done = done && runningPods([]*api.Pod{got}) == 1
			}
			status = append(status, podSummary([]*api.Pod{got}))
		}
		return done, strings.Join(status, "; ")
	})

	exec := func(p *api.Pod, script string) (string, int) {
		t.Helper()
		var out, errb bytes.Buffer
		code, err := rt.Exec(ctx, containerIDOf(t, p), runtime.ExecOptions{Cmd: []string{"sh", "-c", script}, Stdout: &out, Stderr: &errb})
		if err != nil {
			t.Fatalf("exec %q in %s: %v", script, p.Name, err)
		}
		return out.String() + errb.String(), code
	}
	status := func(p *api.Pod) map[string]string {
		t.Helper()
		out, _ := exec(p, "grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status")
		m := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			k, v, _ := strings.Cut(line, ":")
			m[k] = strings.TrimSpace(v)
		}
		return m
	}

	r := pods["restricted"]
	if out, _ := exec(r, "id"); strings.TrimSpace(out) != "uid=1000 gid=3000 groups=2000,3000,4000" {
		t.Errorf("restricted: id says %q, want uid=1000 gid=3000 groups=2000,3000,4000", out)
	}
	if st := status(r); st["CapEff"] != "0000000000000000" || st["CapPrm"] != "0000000000000000" || st["CapBnd"] != "0000000000000000" ||
		st["NoNewPrivs"] != "1" || st["Seccomp"] != "2" {
		t.Errorf("restricted: /proc/self/status %v, want no capability, NoNewPrivs 1, Seccomp 2 (filter)", st)
	}
	if out, code := exec(r, "touch /rootfs-write"); code == 0 || !strings.Contains(out, "Read-only file system") {
		t.Errorf("restricted: a write to the read-only root filesystem: exit %d, %q", code, out)
	}
	if out, code := exec(r, "touch /data/x && stat -c %g /data/x && cat /proc/sys/kernel/shm_rmid_forced"); code != 0 || strings.Fields(out)[0] != "2000" || strings.Fields(out)[1] != "1" {
		t.Errorf("restricted: fsGroup emptyDir write and sysctl: exit %d, %q, want group 2000 and shm_rmid_forced 1", code, out)
	}

	if out, _ := exec(pods["plain"], "id -u"); strings.TrimSpace(out) != "0" {
		t.Errorf("plain: id -u = %q, want 0 (the image's root)", out)
	}
	// containerd's default set (the CRI's, Docker's): CHOWN DAC_OVERRIDE
	// FOWNER FSETID KILL SETGID SETUID SETPCAP NET_BIND_SERVICE NET_RAW
	// SYS_CHROOT MKNOD AUDIT_WRITE SETFCAP.
	if st := status(pods["plain"]); st["CapEff"] != "00000000a80425fb" || st["NoNewPrivs"] != "0" || st["Seccomp"] != "0" {
		t.Errorf("plain: /proc/self/status %v, want CapEff 00000000a80425fb, NoNewPrivs 0, Seccomp 0", st)
	}
	// Privileged: every capability the runtime holds (SYS_ADMIN, bit 21,
	// and NET_ADMIN, bit 12, among them), no seccomp.
	if st := status(pods["agent"]); st["CapEff"] != st["CapBnd"] || !hasCap(st["CapEff"], 21) || !hasCap(st["CapEff"], 12) || st["Seccomp"] != "0" {
		t.Errorf("privileged: /proc/self/status %v, want every capability and no seccomp", st)
	}

	w := waitingOf(pods["nonroot"])
	want := fmt.Sprintf(`container has runAsNonRoot and image will run as root (pod: "nonroot_lab(%s)", container: c)`, pods["nonroot"].UID)
	if w == nil || w.Message != want {
		t.Errorf("runAsNonRoot on a root image: waiting %+v, want %q", w, want)
	}
}

func waitingOf(p *api.Pod) *api.ContainerStateWaiting {
	if len(p.Status.ContainerStatuses) == 0 {
		return nil
	}
	return p.Status.ContainerStatuses[0].State.Waiting
}

// hasCap reports whether capability bit n is set in a /proc status mask.
func hasCap(hexMask string, n uint) bool {
	v, err := strconv.ParseUint(hexMask, 16, 64)
	return err == nil && v&(1<<n) != 0
}
