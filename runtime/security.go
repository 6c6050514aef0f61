package runtime

// SecuritySpec is who a container's process is and what it may do: the
// CRI's LinuxContainerSecurityContext as the kubelet fills it from a
// pod's securityContext (agent/podworker/security.go). A runtime applies
// it as containerd's CRI plugin does (runtime/containerd/security.go); a
// nil SecuritySpec leaves the runtime's own defaults.
type SecuritySpec struct {
	// RunAsUser is the process's UID; nil with Username set, the image's
	// named user.
	RunAsUser *int64
	// Username is the image's non-numeric user, looked up in the
	// container's /etc/passwd, when RunAsUser is nil.
	Username string
	// RunAsGroup is the process's primary GID; nil takes the user's group
	// from the container's /etc/passwd (0 when it has none).
	RunAsGroup *int64
	// SupplementalGroups are added to the process's groups.
	SupplementalGroups []int64
	// StrictGroups leaves out the groups the container's /etc/group gives
	// the user (supplementalGroupsPolicy Strict); otherwise they are
	// added (Merge).
	StrictGroups bool
	// Privileged: every capability, the host's devices, no seccomp, no
	// masked or read-only /proc paths, writable /sys.
	Privileged bool
	// CapAdd and CapDrop change the default capability set; names as in
	// Kubernetes (NET_ADMIN, without CAP_), "ALL" for every one; drops
	// win over adds of the same capability.
	CapAdd, CapDrop []string
	// NoNewPrivileges sets no_new_privs (allowPrivilegeEscalation: false).
	NoNewPrivileges bool
	// ReadOnlyRootfs mounts the image's filesystem read-only.
	ReadOnlyRootfs bool
	// Seccomp is the seccomp profile: SeccompUnconfined (""),
	// SeccompRuntimeDefault, or SeccompLocalhost with SeccompProfilePath.
	Seccomp SeccompType
	// SeccompProfilePath is the profile file (JSON, the OCI seccomp
	// format) for SeccompLocalhost, an absolute path on the node.
	SeccompProfilePath string
	// MaskedPaths and ReadonlyPaths of /proc and /sys (the kubelet's
	// defaults; ignored when Privileged).
	MaskedPaths, ReadonlyPaths []string
	// Sysctls are set in the container's namespaces.
	Sysctls map[string]string
}

// SeccompType is how a container's system calls are filtered.
type SeccompType string

// Seccomp profile types.
const (
	SeccompUnconfined     SeccompType = ""
	SeccompRuntimeDefault SeccompType = "RuntimeDefault"
	SeccompLocalhost      SeccompType = "Localhost"
)
