package api

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// # securityContext
//
// Who a pod's processes are and what they may do, as core/v1 says it: a
// pod-level PodSecurityContext (spec.securityContext, defaulted to {} as
// Kubernetes does) whose user and seccomp settings each container's
// SecurityContext may override (EffectiveSecurity). The API server
// validates both as Kubernetes does (validateSecurity below, with its
// paths and words); Pod Security admission judges them
// (controlplane/apiserver/admission_podsecurity.go); the node agent turns
// them into the runtime's runtime.SecuritySpec as the kubelet does
// (agent/podworker/security.go) and the runtime into the OCI spec as
// containerd's CRI plugin does (runtime/containerd/security.go).
//
// Not supported, refused when set: seLinuxOptions, windowsOptions,
// appArmorProfile and seLinuxChangePolicy (notSupported in strict.go).

// PodSecurityContext holds pod-level security attributes and common
// container settings.
type PodSecurityContext struct {
	// RunAsUser is the UID of every container's process (default: the
	// image's user); a container's securityContext.runAsUser wins.
	RunAsUser *int64 `json:"runAsUser,omitempty"`
	// RunAsGroup is the primary GID of every container's process
	// (default: the user's group in the image); a container's wins.
	RunAsGroup *int64 `json:"runAsGroup,omitempty"`
	// RunAsNonRoot: the node agent refuses to start a container that
	// would run as UID 0 (CreateContainerConfigError).
	RunAsNonRoot *bool `json:"runAsNonRoot,omitempty"`
	// SupplementalGroups are added to every container's process, beside
	// fsGroup and (policy Merge) the groups the image's /etc/group gives
	// its user.
	SupplementalGroups []int64 `json:"supplementalGroups,omitempty"`
	// SupplementalGroupsPolicy: Merge (default: the image's /etc/group
	// memberships of the user are added too) or Strict (only runAsGroup,
	// supplementalGroups and fsGroup).
	SupplementalGroupsPolicy *string `json:"supplementalGroupsPolicy,omitempty"`
	// FSGroup owns the pod's emptyDir, configMap, secret and projected
	// volumes (group, setgid directories, group read/write) and is a
	// supplemental group of every container.
	FSGroup *int64 `json:"fsGroup,omitempty"`
	// FSGroupChangePolicy: Always (default) or OnRootMismatch (skip the
	// change when the volume's root already has the group and mode).
	FSGroupChangePolicy *string `json:"fsGroupChangePolicy,omitempty"`
	// Sysctls set in the pod's namespaces. The node admits the kubelet's
	// safe set only (SafeSysctls); others fail the pod (SysctlForbidden).
	Sysctls []Sysctl `json:"sysctls,omitempty"`
	// SeccompProfile of every container without its own.
	SeccompProfile *SeccompProfile `json:"seccompProfile,omitempty"`
}

// SecurityContext holds a container's security attributes; where a field
// is also in PodSecurityContext, this one wins.
type SecurityContext struct {
	// Capabilities to add to or drop from the runtime's default set
	// ("ALL" for every one), Linux names without CAP_ (NET_ADMIN).
	Capabilities *Capabilities `json:"capabilities,omitempty"`
	// Privileged: every capability, every host device, no seccomp, no
	// masked /proc paths: root on the node.
	Privileged *bool `json:"privileged,omitempty"`
	// RunAsUser is the UID of the process (default: the pod's, then the image's).
	RunAsUser *int64 `json:"runAsUser,omitempty"`
	// RunAsGroup is the primary GID of the process.
	RunAsGroup *int64 `json:"runAsGroup,omitempty"`
	// RunAsNonRoot: refuse to start as UID 0.
	RunAsNonRoot *bool `json:"runAsNonRoot,omitempty"`
	// ReadOnlyRootFilesystem mounts the image's filesystem read-only.
	ReadOnlyRootFilesystem *bool `json:"readOnlyRootFilesystem,omitempty"`
	// AllowPrivilegeEscalation false sets no_new_privs: setuid binaries
	// and file capabilities give the process nothing.
	AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation,omitempty"`
	// ProcMount: Default (masked /proc paths). Unmasked needs a user
	// namespace (hostUsers: false), which skiff does not support.
	ProcMount *string `json:"procMount,omitempty"`
	// SeccompProfile of the container (default: the pod's, then Unconfined).
	SeccompProfile *SeccompProfile `json:"seccompProfile,omitempty"`
}

// Capabilities to add to or drop from a container.
type Capabilities struct {
	// Add these capabilities.
	Add []string `json:"add,omitempty"`
	// Drop these capabilities.
	Drop []string `json:"drop,omitempty"`
}

// Sysctl is one kernel parameter set in the pod's namespaces.
type Sysctl struct {
	// Name of the sysctl (net.ipv4.ip_unprivileged_port_start).
	Name string `json:"name"`
	// Value to set.
	Value string `json:"value"`
}

// SeccompProfile chooses a container's seccomp filter.
type SeccompProfile struct {
	// Type: RuntimeDefault (containerd's default profile), Unconfined
	// (none) or Localhost (a file on the node).
	Type string `json:"type"`
	// LocalhostProfile is the profile's path under the node's seccomp
	// directory (DATA-DIR/seccomp; the kubelet's /var/lib/kubelet/seccomp);
	// only with type Localhost.
	LocalhostProfile *string `json:"localhostProfile,omitempty"`
}

// Values of securityContext fields (core/v1).
const (
	SeccompProfileTypeRuntimeDefault = "RuntimeDefault"
	SeccompProfileTypeUnconfined     = "Unconfined"
	SeccompProfileTypeLocalhost      = "Localhost"

	ProcMountDefault  = "Default"
	ProcMountUnmasked = "Unmasked"

	FSGroupChangeAlways         = "Always"
	FSGroupChangeOnRootMismatch = "OnRootMismatch"

	SupplementalGroupsPolicyMerge  = "Merge"
	SupplementalGroupsPolicyStrict = "Strict"
)

// SafeSysctls are the sysctls a node admits without
// --allowed-unsafe-sysctls: the kubelet's safe set
// (pkg/kubelet/sysctl/safe_sysctls.go; the newer ones need a kernel that
// namespaces them, which every kernel skiff runs on does).
var SafeSysctls = []string{
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
	"net.ipv4.tcp_rmem",
	"net.ipv4.tcp_wmem",
}

// EffectiveSecurity is Kubernetes' DetermineEffectiveSecurityContext: the
// container's securityContext with the pod's runAsUser, runAsGroup,
// runAsNonRoot and seccompProfile filling what it leaves unset. It never
// returns nil and shares no memory with pod or c.
func EffectiveSecurity(spec *PodSpec, c *Container) SecurityContext {
	var out SecurityContext
	if c.SecurityContext != nil {
		b, _ := json.Marshal(c.SecurityContext)
		_ = json.Unmarshal(b, &out)
	}
	if p := spec.SecurityContext; p != nil {
		if out.RunAsUser == nil && p.RunAsUser != nil {
			out.RunAsUser = ptr(*p.RunAsUser)
		}
		if out.RunAsGroup == nil && p.RunAsGroup != nil {
			out.RunAsGroup = ptr(*p.RunAsGroup)
		}
		if out.RunAsNonRoot == nil && p.RunAsNonRoot != nil {
			out.RunAsNonRoot = ptr(*p.RunAsNonRoot)
		}
		if out.SeccompProfile == nil && p.SeccompProfile != nil {
			sp := *p.SeccompProfile
			if sp.LocalhostProfile != nil {
				sp.LocalhostProfile = ptr(*sp.LocalhostProfile)
			}
			out.SeccompProfile = &sp
		}
	}
	return out
}

// sysctlName is Kubernetes' SysctlContainSlashFmt: dotted or slashed
// segments of lower-case letters, digits, '_', '-' (and '*' only in
// allowlists, not here).
var sysctlName = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

// sysctlMaxLength is Kubernetes' SysctlMaxLength.
const sysctlMaxLength = 253

// validatePodSecurity is Kubernetes' validatePodSpecSecurityContext for
// the fields skiff has, at path p (spec.securityContext).
func validatePodSecurity(sc *PodSecurityContext, hostNetwork bool, p string) FieldErrors {
	if sc == nil {
		return nil
	}
	var errs FieldErrors
	if sc.FSGroup != nil {
		errs = append(errs, idErrors(p+".fsGroup", *sc.FSGroup, validation.IsValidGroupID)...)
	}
	if sc.RunAsUser != nil {
		errs = append(errs, idErrors(p+".runAsUser", *sc.RunAsUser, validation.IsValidUserID)...)
	}
	if sc.RunAsGroup != nil {
		errs = append(errs, idErrors(p+".runAsGroup", *sc.RunAsGroup, validation.IsValidGroupID)...)
	}
	for i, g := range sc.SupplementalGroups {
		errs = append(errs, idErrors(elemPath(p, ".supplementalGroups", i), g, validation.IsValidGroupID)...)
	}
	names := map[string]bool{}
	for i, s := range sc.Sysctls {
		np := fmt.Sprintf("%s.sysctls[%d].name", p, i)
		switch {
		case s.Name == "":
			errs = append(errs, Required(np, ""))
		case len(s.Name) > sysctlMaxLength || !sysctlName.MatchString(s.Name):
			errs = append(errs, Invalid(np, s.Name, fmt.Sprintf("must have at most %d characters and match regex %s", sysctlMaxLength, sysctlName)))
		case names[s.Name]:
			errs = append(errs, Duplicate(np, s.Name))
		}
		if ns, _, _ := utilsysctl.GetNamespace(s.Name); hostNetwork && ns == utilsysctl.NetNamespace {
			errs = append(errs, Invalid(np, s.Name, "may not be specified when 'hostNetwork' is true"))
		}
		names[s.Name] = true
	}
	if f := sc.FSGroupChangePolicy; f != nil && *f != FSGroupChangeAlways && *f != FSGroupChangeOnRootMismatch {
		errs = append(errs, NotSupported(p+".fsGroupChangePolicy", *f, FSGroupChangeAlways, FSGroupChangeOnRootMismatch))
	}
	errs = append(errs, validateSeccomp(sc.SeccompProfile, p+".seccompProfile")...)
	if g := sc.SupplementalGroupsPolicy; g != nil && *g != SupplementalGroupsPolicyMerge && *g != SupplementalGroupsPolicyStrict {
		errs = append(errs, NotSupported(p+".supplementalGroupsPolicy", *g, SupplementalGroupsPolicyMerge, SupplementalGroupsPolicyStrict))
	}
	return errs
}

// validateContainerSecurity is Kubernetes' ValidateSecurityContext at path
// p (spec.containers[0].securityContext); every pod has hostUsers true.
func validateContainerSecurity(sc *SecurityContext, p string) FieldErrors {
	if sc == nil {
		return nil
	}
	var errs FieldErrors
	if sc.RunAsUser != nil {
		errs = append(errs, idErrors(p+".runAsUser", *sc.RunAsUser, validation.IsValidUserID)...)
	}
	if sc.RunAsGroup != nil {
		errs = append(errs, idErrors(p+".runAsGroup", *sc.RunAsGroup, validation.IsValidGroupID)...)
	}
	if pm := sc.ProcMount; pm != nil {
		switch *pm {
		case ProcMountDefault:
		case ProcMountUnmasked:
			// hostUsers is true for every skiff pod (no user namespaces).
			errs = append(errs, Invalid(p+".procMount", *pm, "`hostUsers` must be false to use `Unmasked`"))
		default:
			errs = append(errs, NotSupported(p+".procMount", *pm, ProcMountDefault, ProcMountUnmasked))
		}
	}
	errs = append(errs, validateSeccomp(sc.SeccompProfile, p+".seccompProfile")...)
	if a := sc.AllowPrivilegeEscalation; a != nil && !*a {
		if sc.Privileged != nil && *sc.Privileged {
			errs = append(errs, Invalid(p, internalSecurityContext{sc}, "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
		}
		if sc.Capabilities != nil && slices.Contains(sc.Capabilities.Add, "CAP_SYS_ADMIN") {
			errs = append(errs, Invalid(p, internalSecurityContext{sc}, "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
		}
	}
	return errs
}

// validateSeccomp is Kubernetes' validateSeccompProfileField.
func validateSeccomp(sp *SeccompProfile, p string) FieldErrors {
	if sp == nil {
		return nil
	}
	var errs FieldErrors
	switch sp.Type {
	case SeccompProfileTypeLocalhost, SeccompProfileTypeRuntimeDefault, SeccompProfileTypeUnconfined:
	case "":
		errs = append(errs, Required(p+".type", "type is required when seccompProfile is set"))
	default:
		errs = append(errs, NotSupported(p+".type", sp.Type, SeccompProfileTypeLocalhost, SeccompProfileTypeRuntimeDefault, SeccompProfileTypeUnconfined))
	}
	if sp.Type == SeccompProfileTypeLocalhost {
		if sp.LocalhostProfile == nil {
			errs = append(errs, Required(p+".localhostProfile", "must be set when seccomp type is Localhost"))
		} else {
			errs = append(errs, validateLocalDescendingPath(*sp.LocalhostProfile, p+".localhostProfile")...)
		}
	} else if sp.LocalhostProfile != nil {
		errs = append(errs, Invalid(p+".localhostProfile", seccompValue{sp}, "can only be set when seccomp type is Localhost"))
	}
	return errs
}

// validateLocalDescendingPath is Kubernetes' check of a path that must
// stay below a directory: relative, no '..' element.
func validateLocalDescendingPath(target, p string) FieldErrors {
	var errs FieldErrors
	if strings.HasPrefix(target, "/") {
		errs = append(errs, Invalid(p, target, "must be a relative path"))
	}
	for _, item := range strings.Split(target, "/") {
		if item == ".." {
			errs = append(errs, Invalid(p, target, "must not contain '..'"))
			break
		}
	}
	return errs
}

func idErrors(p string, id int64, check func(int64) []string) FieldErrors {
	var errs FieldErrors
	for _, msg := range check(id) {
		errs = append(errs, Invalid(p, id, msg))
	}
	return errs
}

// internalSecurityContext prints a SecurityContext as kube-apiserver's
// field errors print its internal type (JSON with Go field names).
type internalSecurityContext struct{ sc *SecurityContext }

func (v internalSecurityContext) String() string {
	type capabilities struct{ Add, Drop []string }
	type seccomp struct {
		Type             string
		LocalhostProfile *string
	}
	var caps *capabilities
	if c := v.sc.Capabilities; c != nil {
		caps = &capabilities{Add: c.Add, Drop: c.Drop}
	}
	var sp *seccomp
	if s := v.sc.SeccompProfile; s != nil {
		sp = &seccomp{Type: s.Type, LocalhostProfile: s.LocalhostProfile}
	}
	b, _ := json.Marshal(struct {
		Capabilities             *capabilities
		Privileged               *bool
		SELinuxOptions           *struct{}
		WindowsOptions           *struct{}
		RunAsUser                *int64
		RunAsGroup               *int64
		RunAsNonRoot             *bool
		ReadOnlyRootFilesystem   *bool
		AllowPrivilegeEscalation *bool
		ProcMount                *string
		SeccompProfile           *seccomp
		AppArmorProfile          *struct{}
	}{caps, v.sc.Privileged, nil, nil, v.sc.RunAsUser, v.sc.RunAsGroup, v.sc.RunAsNonRoot, v.sc.ReadOnlyRootFilesystem,
		v.sc.AllowPrivilegeEscalation, v.sc.ProcMount, sp, nil})
	return string(b)
}

// seccompValue prints a SeccompProfile as kube-apiserver's field errors
// print its internal type.
type seccompValue struct{ sp *SeccompProfile }

func (v seccompValue) String() string {
	b, _ := json.Marshal(struct {
		Type             string
		LocalhostProfile *string
	}{v.sp.Type, v.sp.LocalhostProfile})
	return string(b)
}
