package containerd

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// Config sets up a containerd Runtime.
type Config struct {
	// Address is containerd's gRPC socket.
	Address string
	// Namespace is the containerd namespace skiff's images and containers
	// live in, apart from other users of the same containerd (`ctr -n skiff`
	// shows them).
	Namespace string
	// StateDir holds one log file per container.
	StateDir string
	// CDISpecDirs are searched for CDI specs, in increasing priority.
	CDISpecDirs []string
	// Snapshotter unpacks images into container filesystems.
	Snapshotter string
	// RuntimeName is the containerd shim that runs containers.
	RuntimeName string
	// DialTimeout bounds how long New waits for containerd to answer.
	DialTimeout time.Duration
	// Logger gets the runtime's own log lines (reconnects, cleanup failures).
	Logger *slog.Logger
	// RegistryHostsDir is containerd's registry hosts directory (the CRI
	// plugin's registry config_path, ctr's and nerdctl's --hosts-dir):
	// DIR/HOST/hosts.toml names mirrors of HOST (an offline lab room's
	// local registry for registry.k8s.io), DIR/HOST/*.crt its CAs. skiff
	// pulls through the containerd client, so it reads the directory
	// itself. A host without a directory is pulled from as named.
	RegistryHostsDir string
}

// DefaultConfig returns the configuration for the system containerd.
func DefaultConfig() Config {
	return Config{
		// The socket of Debian's and upstream's containerd packages.
		Address: "/run/containerd/containerd.sock",
		// Own namespace: skiff never sees or touches Docker's ("moby") or
		// Kubernetes' ("k8s.io") containers on the same containerd.
		Namespace: "skiff",
		// containerd's documented place for registry hosts.
		RegistryHostsDir: "/etc/containerd/certs.d",
		// Next to skiff's other node state; survives agent restarts, so
		// logs of adopted containers stay readable.
		StateDir: "/var/lib/skiff/containers",
		// Where the NVIDIA Container Toolkit (nvidia-ctk cdi generate) and
		// skiff's own GPU code write specs.
		CDISpecDirs: cdi.DefaultSpecDirs,
		// overlayfs is containerd's default and the fastest on ext4/xfs.
		Snapshotter: "overlayfs",
		// runc through the v2 shim: the shim outlives containerd restarts,
		// so containers keep running through them.
		RuntimeName: "io.containerd.runc.v2",
		// Long enough for a containerd that is starting, short enough that
		// `skiff up` falls back to the fake runtime quickly.
		DialTimeout: 5 * time.Second,
	}
}

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if c.Address == "" {
		errs = append(errs, errors.New("address: required"))
	}
	if c.Namespace == "" {
		errs = append(errs, errors.New("namespace: required"))
	}
	if !filepath.IsAbs(c.StateDir) {
		errs = append(errs, fmt.Errorf("stateDir %q: must be an absolute path", c.StateDir))
	}
	for i, d := range c.CDISpecDirs {
		if !filepath.IsAbs(d) {
			errs = append(errs, fmt.Errorf("cdiSpecDirs[%d] %q: must be an absolute path", i, d))
		}
	}
	if c.Snapshotter == "" {
		errs = append(errs, errors.New("snapshotter: required"))
	}
	if c.RuntimeName == "" {
		errs = append(errs, errors.New("runtimeName: required"))
	}
	if c.DialTimeout <= 0 {
		errs = append(errs, errors.New("dialTimeout: must be positive"))
	}
	return errors.Join(errs...)
}
