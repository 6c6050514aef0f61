package podworker

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/runtime"
)

func i64(v int64) *int64 { return &v }
func bptr(v bool) *bool  { return &v }

// The Kubernetes docs' security-context-demo: the runtime gets the pod's
// user, group, fsGroup and supplemental groups, no_new_privs and the
// kubelet's masked paths; `id` says so; the emptyDir belongs to fsGroup.
func TestSecurityContextReachesRuntime(t *testing.T) {
	fsGroup := int64(2000)
	if os.Geteuid() != 0 {
		fsGroup = int64(os.Getegid()) // a group this user may chown to
	}
	pod := newPod("demo", func(p *api.Pod) {
		p.Spec.SecurityContext = &api.PodSecurityContext{RunAsUser: i64(1000), RunAsGroup: i64(3000), FSGroup: i64(fsGroup), SupplementalGroups: []int64{4000}}
		p.Spec.Volumes = []api.Volume{{Name: "vol", EmptyDir: &api.EmptyDirVolumeSource{}}}
		c := &p.Spec.Containers[0]
		c.VolumeMounts = []api.VolumeMount{{Name: "vol", MountPath: "/data/demo"}}
		c.SecurityContext = &api.SecurityContext{AllowPrivilegeEscalation: bptr(false), Capabilities: &api.Capabilities{Drop: []string{"ALL"}}}
	})
	f := newFixture(t, pod)
	f.sync("demo")
	id := f.running("demo").ID
	sec, err := f.rt.Security(id)
	if err != nil || sec == nil {
		t.Fatalf("security of the container: %v %v", sec, err)
	}
	if *sec.RunAsUser != 1000 || *sec.RunAsGroup != 3000 || !slices.Equal(sec.SupplementalGroups, []int64{fsGroup, 4000}) ||
		!sec.NoNewPrivileges || sec.Privileged || !slices.Equal(sec.CapDrop, []string{"ALL"}) || sec.Seccomp != runtime.SeccompUnconfined ||
		!slices.Equal(sec.MaskedPaths, defaultMaskedPaths) || !slices.Equal(sec.ReadonlyPaths, defaultReadonlyPaths) {
		t.Errorf("security = %+v", sec)
	}
	var out bytes.Buffer
	if _, err := f.rt.Exec(context.Background(), id, runtime.ExecOptions{Cmd: []string{"id"}, Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	want := "uid=1000 gid=3000 groups=2000,3000,4000" // the docs' answer
	if fsGroup != 2000 {
		want = "uid=1000 gid=3000 groups="
	}
	if !strings.HasPrefix(strings.TrimSpace(out.String()), want) {
		t.Errorf("id says %q, want %q", out.String(), want)
	}
	dir := filepath.Join(f.w.cfg.VolumeDir, pod.UID, "volumes", "vol")
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int64(st.Gid) != fsGroup || fi.Mode()&os.ModeSetgid == 0 || fi.Mode().Perm()&0o070 != 0o070 {
		t.Errorf("emptyDir %s: gid %d mode %v, want group %d, setgid, group rwx", dir, st.Gid, fi.Mode(), fsGroup)
	}
}

// A container's securityContext wins over the pod's; seccomp comes from
// the pod when the container names none; Localhost is a file of the
// node's seccomp directory.
func TestSecurityContextContainerWins(t *testing.T) {
	pod := newPod("two", func(p *api.Pod) {
		p.Spec.SecurityContext = &api.PodSecurityContext{RunAsUser: i64(1000), SeccompProfile: &api.SeccompProfile{Type: api.SeccompProfileTypeRuntimeDefault}}
		p.Spec.Containers[0].SecurityContext = &api.SecurityContext{RunAsUser: i64(2000), Privileged: bptr(true), ReadOnlyRootFilesystem: bptr(true)}
		p.Spec.Containers = append(p.Spec.Containers, api.Container{Name: "local", Image: "busybox:1.36", Command: []string{"sleep", "3600"},
			SecurityContext: &api.SecurityContext{SeccompProfile: &api.SeccompProfile{Type: api.SeccompProfileTypeLocalhost, LocalhostProfile: ptrString("profiles/audit.json")}}})
	})
	f := newFixture(t, pod)
	f.w.cfg.SeccompDir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(f.w.cfg.SeccompDir, "profiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.w.cfg.SeccompDir, "profiles", "audit.json"), []byte(`{"defaultAction":"SCMP_ACT_LOG"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	f.sync("two")
	for _, c := range f.containers("two") {
		sec, err := f.rt.Security(c.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch c.Labels[runtime.LabelContainerName] {
		case "main":
			if *sec.RunAsUser != 2000 || !sec.Privileged || !sec.ReadOnlyRootfs || sec.Seccomp != runtime.SeccompRuntimeDefault {
				t.Errorf("main: %+v, want uid 2000, privileged, read-only root, the pod's seccomp", sec)
			}
		case "local":
			if *sec.RunAsUser != 1000 || sec.Seccomp != runtime.SeccompLocalhost || sec.SeccompProfilePath != filepath.Join(f.w.cfg.SeccompDir, "profiles", "audit.json") {
				t.Errorf("local: %+v, want the pod's uid 1000 and the node's profile file", sec)
			}
		}
	}
}

func ptrString(s string) *string { return &s }

// runAsNonRoot: an image that runs as root is not started, in the
// kubelet's words; runAsUser 0 with runAsNonRoot likewise.
func TestRunAsNonRootRefusesRoot(t *testing.T) {
	pod := newPod("root", func(p *api.Pod) {
		p.Spec.SecurityContext = &api.PodSecurityContext{RunAsNonRoot: bptr(true)}
	})
	f := newFixture(t, pod)
	f.sync("root")
	if n := len(f.containers("root")); n != 0 {
		t.Fatalf("%d containers created for a root image with runAsNonRoot", n)
	}
	p := f.pod("root")
	w := p.Status.ContainerStatuses[0].State.Waiting
	want := `container has runAsNonRoot and image will run as root (pod: "root_default(uid-root)", container: main)`
	if w == nil || w.Reason != "CreateContainerConfigError" || w.Message != want {
		t.Errorf("waiting = %+v, want CreateContainerConfigError %q", w, want)
	}

	pod0 := newPod("zero", func(p *api.Pod) {
		p.Spec.SecurityContext = &api.PodSecurityContext{RunAsNonRoot: bptr(true), RunAsUser: i64(0)}
	})
	f = newFixture(t, pod0)
	f.sync("zero")
	if w := f.pod("zero").Status.ContainerStatuses[0].State.Waiting; w == nil ||
		w.Message != `container's runAsUser breaks non-root policy (pod: "zero_default(uid-zero)", container: main)` {
		t.Errorf("runAsUser 0: waiting = %+v", w)
	}

	ok := newPod("ok", func(p *api.Pod) {
		p.Spec.SecurityContext = &api.PodSecurityContext{RunAsNonRoot: bptr(true), RunAsUser: i64(1000)}
	})
	f = newFixture(t, ok)
	f.sync("ok")
	if p := f.pod("ok"); p.Status.Phase != api.PodRunning {
		t.Errorf("runAsNonRoot with runAsUser 1000: phase %s", p.Status.Phase)
	}
}

// A sysctl outside the safe set fails the pod at admission, as the
// kubelet's; a safe one reaches the runtime.
func TestSysctlAdmission(t *testing.T) {
	bad := newPod("bad", func(p *api.Pod) {
		p.Spec.SecurityContext = &api.PodSecurityContext{Sysctls: []api.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}, {Name: "kernel.msgmax", Value: "65536"}}}
	})
	good := newPod("good", func(p *api.Pod) {
		p.Spec.SecurityContext = &api.PodSecurityContext{Sysctls: []api.Sysctl{{Name: "kernel/shm_rmid_forced", Value: "1"}}}
	})
	// Without a pod network the pod shares the node's network namespace:
	// no net.* sysctl (it would change the node's).
	net := newPod("net", func(p *api.Pod) {
		p.Spec.SecurityContext = &api.PodSecurityContext{Sysctls: []api.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "80"}}}
	})
	f := newFixture(t, bad, good, net)
	f.sync("bad")
	p := f.pod("bad")
	if p.Status.Phase != api.PodFailed || p.Status.Reason != "SysctlForbidden" ||
		p.Status.Message != `Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted` {
		t.Errorf("status = %s %s %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	if n := len(f.containers("bad")); n != 0 {
		t.Errorf("%d containers of a rejected pod", n)
	}
	f.sync("net")
	if p := f.pod("net"); p.Status.Reason != "SysctlForbidden" ||
		p.Status.Message != `Pod was rejected: forbidden sysctl: "net.ipv4.ip_unprivileged_port_start" not allowed with host Net enabled` {
		t.Errorf("net sysctl without a pod network: %s %q", p.Status.Reason, p.Status.Message)
	}
	f.sync("good")
	sec, err := f.rt.Security(f.running("good").ID)
	if err != nil || sec.Sysctls["kernel.shm_rmid_forced"] != "1" {
		t.Errorf("sysctls of the container: %v %v", sec, err)
	}
}
