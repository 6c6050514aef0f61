package containerd

import (
	"slices"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cap"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"

	"skiff.dev/skiff/runtime"
)

// The OCI spec a SecuritySpec makes, on containerd's default spec, as the
// CRI plugin makes it (no containerd needed: no user to look up).
func TestSecurityOpts(t *testing.T) {
	ctx := namespaces.WithNamespace(t.Context(), "test")
	gen := func(t *testing.T, sec *runtime.SecuritySpec) *oci.Spec {
		t.Helper()
		opts, err := securityOpts(sec)
		if err != nil {
			t.Fatal(err)
		}
		s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "c"}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	allCaps, err := cap.Current()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("restricted", func(t *testing.T) {
		s := gen(t, &runtime.SecuritySpec{SupplementalGroups: []int64{4000, 2000, 4000}, CapAdd: []string{"net_bind_service"}, CapDrop: []string{"ALL"},
			NoNewPrivileges: true, ReadOnlyRootfs: true, Seccomp: runtime.SeccompRuntimeDefault,
			Sysctls: map[string]string{"net.ipv4.ip_unprivileged_port_start": "80"}, MaskedPaths: []string{"/proc/kcore"}, ReadonlyPaths: []string{"/proc/sys"}})
		p := s.Process
		if want := []string{"CAP_NET_BIND_SERVICE"}; !slices.Equal(p.Capabilities.Bounding, want) || !slices.Equal(p.Capabilities.Effective, want) || len(p.Capabilities.Ambient) != 0 {
			t.Errorf("capabilities %+v, want only %v, no ambient", p.Capabilities, want)
		}
		if !p.NoNewPrivileges || !s.Root.Readonly || len(p.Rlimits) != 0 {
			t.Errorf("noNewPrivileges %v, readonly root %v, rlimits %v", p.NoNewPrivileges, s.Root.Readonly, p.Rlimits)
		}
		if s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction == "" || len(s.Linux.Seccomp.Syscalls) == 0 {
			t.Errorf("seccomp %+v, want containerd's default profile", s.Linux.Seccomp)
		}
		if s.Linux.Sysctl["net.ipv4.ip_unprivileged_port_start"] != "80" {
			t.Errorf("sysctls %v", s.Linux.Sysctl)
		}
		if !slices.Equal(p.User.AdditionalGids, []uint32{2000, 4000}) {
			t.Errorf("additional gids %v, want [2000 4000]", p.User.AdditionalGids)
		}
		if !slices.Equal(s.Linux.MaskedPaths, []string{"/proc/kcore"}) || !slices.Equal(s.Linux.ReadonlyPaths, []string{"/proc/sys"}) {
			t.Errorf("masked %v, read-only %v", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		s := gen(t, &runtime.SecuritySpec{})
		if s.Process.NoNewPrivileges || s.Linux.Seccomp != nil || len(s.Process.Rlimits) != 0 {
			t.Errorf("noNewPrivileges %v, seccomp %v, rlimits %v: want the CRI's defaults (off, none, none)", s.Process.NoNewPrivileges, s.Linux.Seccomp, s.Process.Rlimits)
		}
		def, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "c"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.Process.Capabilities.Bounding, def.Process.Capabilities.Bounding) {
			t.Errorf("capabilities %v, want containerd's default set %v", s.Process.Capabilities.Bounding, def.Process.Capabilities.Bounding)
		}
	})
	t.Run("add ALL drop one", func(t *testing.T) {
		s := gen(t, &runtime.SecuritySpec{CapAdd: []string{"ALL"}, CapDrop: []string{"CHOWN"}})
		want := slices.DeleteFunc(slices.Clone(allCaps), func(c string) bool { return c == "CAP_CHOWN" })
		if !slices.Equal(s.Process.Capabilities.Bounding, want) {
			t.Errorf("capabilities %v, want all but CAP_CHOWN", s.Process.Capabilities.Bounding)
		}
	})
	t.Run("privileged", func(t *testing.T) {
		s := gen(t, &runtime.SecuritySpec{Privileged: true, Seccomp: runtime.SeccompRuntimeDefault, MaskedPaths: []string{"/proc/kcore"}})
		if !slices.Equal(s.Process.Capabilities.Bounding, allCaps) || s.Linux.Seccomp != nil || len(s.Linux.MaskedPaths) != 0 {
			t.Errorf("privileged: capabilities %v, seccomp %v, masked %v; want every capability, no seccomp, nothing masked",
				s.Process.Capabilities.Bounding, s.Linux.Seccomp, s.Linux.MaskedPaths)
		}
	})
	t.Run("group without user", func(t *testing.T) {
		g := int64(5)
		if _, err := securityOpts(&runtime.SecuritySpec{RunAsGroup: &g}); err == nil {
			t.Error("a group without a user was accepted")
		}
	})
}
