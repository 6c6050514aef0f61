package containerd

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cap"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"skiff.dev/skiff/runtime"
)

// securityOpts turns a container's runtime.SecuritySpec into OCI spec
// edits the way containerd's CRI plugin does for the kubelet
// (internal/cri/server/container_create*.go, internal/cri/opts):
//
//   - containerd's default seccomp, AppArmor and rlimits go
//     (WithoutDefaultSecuritySettings); no_new_privs is off unless asked
//     (allowPrivilegeEscalation: false);
//   - the user "UID[:GID]" (or the image's user name) is looked up in the
//     container's /etc/passwd for its group; the groups /etc/group gives
//     the user are added (policy Merge), then the supplemental groups;
//   - capabilities: "ALL" in add gives every capability the runtime has,
//     "ALL" in drop takes every one away, then each named one (CAP_
//     prefixed) is added, then each dropped; ambient capabilities are
//     cleared, so a non-root process has none in effect;
//   - privileged: every capability, the host's devices, no masked or
//     read-only paths, writable /sys, no seccomp;
//   - masked and read-only /proc paths are the kubelet's;
//   - readOnlyRootFilesystem, sysctls, and seccomp RuntimeDefault
//     (containerd's default profile, after the capabilities it depends
//     on), Localhost (a profile file) or Unconfined (none).
//
// A nil sec keeps containerd's defaults (skiff's tests that create
// containers directly).
func securityOpts(sec *runtime.SecuritySpec) ([]oci.SpecOpts, error) {
	if sec == nil {
		return nil, nil
	}
	opts := []oci.SpecOpts{withoutDefaultSecuritySettings, oci.WithNewPrivileges}

	user := sec.Username
	if sec.RunAsUser != nil {
		user = strconv.FormatInt(*sec.RunAsUser, 10)
	}
	if user == "" && sec.RunAsGroup != nil {
		return nil, fmt.Errorf("user group %d is specified without user: %w", *sec.RunAsGroup, runtime.ErrInvalidSpec)
	}
	opts = append(opts, withUser(user, sec.RunAsGroup, sec.StrictGroups), withSupplementalGroups(sec.SupplementalGroups),
		oci.WithMaskedPaths(slices.Clone(sec.MaskedPaths)), oci.WithReadonlyPaths(slices.Clone(sec.ReadonlyPaths)))

	allCaps, err := cap.Current()
	if err != nil {
		return nil, fmt.Errorf("capabilities of the runtime: %w", err)
	}
	opts = append(opts, withCapabilities(sec.CapAdd, sec.CapDrop, allCaps))
	if sec.Privileged {
		opts = append(opts, oci.WithPrivileged, oci.WithHostDevices, oci.WithAllDevicesAllowed)
	}
	opts = append(opts, withoutAmbientCaps)
	if sec.NoNewPrivileges {
		opts = append(opts, oci.WithNoNewPrivileges)
	}
	if sec.ReadOnlyRootfs {
		opts = append(opts, oci.WithRootFSReadonly())
	}
	if len(sec.Sysctls) > 0 {
		opts = append(opts, withSysctls(sec.Sysctls))
	}
	if !sec.Privileged { // a privileged container is never filtered
		switch sec.Seccomp {
		case runtime.SeccompUnconfined:
		case runtime.SeccompRuntimeDefault:
			opts = append(opts, seccomp.WithDefaultProfile())
		case runtime.SeccompLocalhost:
			opts = append(opts, seccomp.WithProfile(sec.SeccompProfilePath))
		default:
			return nil, fmt.Errorf("seccomp profile type %q: %w", sec.Seccomp, runtime.ErrInvalidSpec)
		}
	}
	return opts, nil
}

// withUser sets the process's user ("UID", a name, or "" for the
// image's) and group (nil: the user's in /etc/passwd), and its groups
// from /etc/group unless strict (then none but what is added after). Each
// lookup mounts the container's filesystem; a root container of an image
// without a user (oci.WithImageConfig made it uid 0, gid 0 and looked up
// root's groups already) is left as it is: the lookups would change
// nothing.
func withUser(user string, group *int64, strict bool) oci.SpecOpts {
	return func(ctx context.Context, client oci.Client, c *containers.Container, s *oci.Spec) error {
		if user == "0" && group == nil && !strict && s.Process != nil && s.Process.User.UID == 0 && s.Process.User.GID == 0 {
			return nil
		}
		var opts []oci.SpecOpts
		switch {
		case user != "" && group != nil:
			opts = append(opts, oci.WithUser(user+":"+strconv.FormatInt(*group, 10)))
		case user != "":
			opts = append(opts, oci.WithUser(user))
		}
		if strict {
			opts = append(opts, withoutAdditionalGIDs)
		} else if user != "" {
			opts = append(opts, oci.WithAdditionalGIDs(user))
		}
		return oci.Compose(opts...)(ctx, client, c, s)
	}
}

// withoutDefaultSecuritySettings is the CRI's: no default seccomp or
// AppArmor profile, no default rlimits (containerd's RLIMIT_NOFILE 1024).
func withoutDefaultSecuritySettings(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
	if s.Process != nil {
		s.Process.ApparmorProfile = ""
		s.Process.Rlimits = nil
	}
	if s.Linux != nil {
		s.Linux.Seccomp = nil
	}
	return nil
}

// withoutAdditionalGIDs forgets the groups the image's user had
// (supplementalGroupsPolicy Strict).
func withoutAdditionalGIDs(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
	if s.Process != nil {
		s.Process.User.AdditionalGids = nil
	}
	return nil
}

// withSupplementalGroups merges groups into the process's additional
// groups, sorted and without repeats (the CRI's mergeGids).
func withSupplementalGroups(groups []int64) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Process == nil {
			s.Process = &specs.Process{}
		}
		gids := slices.Clone(s.Process.User.AdditionalGids)
		for _, g := range groups {
			gids = append(gids, uint32(g))
		}
		slices.Sort(gids)
		s.Process.User.AdditionalGids = slices.Compact(gids)
		return nil
	}
}

// withCapabilities is the CRI's WithCapabilities: ALL first, then the
// named capabilities added, then the named ones dropped.
func withCapabilities(add, drop, allCaps []string) oci.SpecOpts {
	if add == nil && drop == nil {
		return func(context.Context, oci.Client, *containers.Container, *oci.Spec) error { return nil }
	}
	var opts []oci.SpecOpts
	if slices.Contains(add, "ALL") {
		opts = append(opts, oci.WithCapabilities(allCaps))
	}
	if slices.Contains(drop, "ALL") {
		opts = append(opts, oci.WithCapabilities(nil))
	}
	prefixed := func(names []string) []string {
		out := []string{}
		for _, c := range names {
			if strings.ToUpper(c) != "ALL" {
				out = append(out, "CAP_"+strings.ToUpper(c))
			}
		}
		return out
	}
	opts = append(opts, oci.WithAddedCapabilities(prefixed(add)), oci.WithDroppedCapabilities(prefixed(drop)))
	return oci.Compose(opts...)
}

// withoutAmbientCaps is the CRI's: no ambient capabilities, so a process
// that is not root keeps none in effect after exec.
func withoutAmbientCaps(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
	if s.Process != nil && s.Process.Capabilities != nil {
		s.Process.Capabilities.Ambient = nil
	}
	return nil
}

// withSysctls sets kernel parameters in the container's namespaces.
func withSysctls(sysctls map[string]string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		if s.Linux.Sysctl == nil {
			s.Linux.Sysctl = map[string]string{}
		}
		for k, v := range sysctls {
			s.Linux.Sysctl[k] = v
		}
		return nil
	}
}
