// Package runtime is the seam between the node agent and whatever runs
// containers: the Runtime interface, its value types and its errors.
//
// A Runtime runs one container per call, knows nothing of pods or API objects
// and keeps no state the agent needs: everything the agent must find again
// after a restart (which pod a container belongs to, which attempt it is) is
// stored in container labels and read back with ListContainers. This is how a
// restarted agent adopts its running containers instead of starting duplicates.
//
// Implementations:
//
//   - runtime/containerd runs real containers through containerd and runc,
//     in a containerd namespace of its own.
//   - runtime/fake simulates containers in memory, with no processes, for unit
//     tests, `skiff up` on a machine without containerd, and scale tests.
//
// runtime/runtimetest holds one test suite that both must pass.
//
// # Container lifecycle
//
//	CreateContainer → created → StartContainer → running → (exit | StopContainer) → exited → RemoveContainer
//
// A container runs once: restarting a crashed container means creating a new
// one (the agent counts attempts in a label), as the kubelet does. An exited
// container keeps its status and its log until it is removed, which is what
// `skiff logs --previous` reads.
//
// # Errors
//
// ErrNotFound means the container (or image) does not exist; ErrAlreadyExists
// that a container ID is taken; ErrImageNotFound (possibly wrapped in a
// *PullError) that an image is absent locally and could not be pulled.
// Callers branch with errors.Is and errors.As.
package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/distribution/reference"
)

// Runtime runs containers on one machine.
//
// All methods are safe for concurrent use. Methods taking a ctx block until
// the operation is done or ctx ends; none of them keeps ctx after returning.
// Container IDs are opaque to callers, at most 76 characters of
// [A-Za-z0-9._-], starting with a letter or digit.
type Runtime interface {
	// EnsureImage makes the image ref available locally according to policy
	// and returns it. ref may be short ("nginx:alpine"); it is normalised the
	// way docker and Kubernetes do ("docker.io/library/nginx:alpine").
	// progress, when not nil, is called from the calling goroutine or one
	// the runtime owns, never after EnsureImage returns.
	//
	// With PullNever an absent image is ErrImageNotFound. A failed pull is
	// a *PullError; errors.Is(err, ErrImageNotFound) also holds when the
	// registry said the image does not exist.
	EnsureImage(ctx context.Context, ref string, policy PullPolicy, progress func(PullProgress)) (ImageInfo, error)

	// ImportImage reads an OCI image layout or `docker save` archive from r,
	// stores and unpacks its images, and returns their normalised names.
	// An image is named by its io.containerd.image.name annotation, or by
	// an org.opencontainers.image.ref.name that is a full reference.
	ImportImage(ctx context.Context, r io.Reader) ([]string, error)

	// ListImages lists the images stored locally.
	ListImages(ctx context.Context) ([]ImageInfo, error)

	// CreateContainer creates a container from spec (the image must be
	// present: call EnsureImage first) and returns its ID. Creating does not
	// start a process. spec.ID, when set, is the ID; a taken ID is
	// ErrAlreadyExists, which makes creation safe to retry.
	CreateContainer(ctx context.Context, spec ContainerSpec) (string, error)

	// StartContainer starts the process of a created container. The process
	// writes stdout and stderr to the container's log file.
	StartContainer(ctx context.Context, id string) error

	// StopContainer sends SIGTERM to the container's process and SIGKILL
	// after grace if it is still running, and returns once it has exited.
	// Stopping a container that is not running is not an error.
	StopContainer(ctx context.Context, id string, grace time.Duration) error

	// RemoveContainer kills the container's process if it still runs and
	// deletes the container, its filesystem and its log file.
	RemoveContainer(ctx context.Context, id string) error

	// ContainerStatus reports the container's current state.
	ContainerStatus(ctx context.Context, id string) (ContainerStatus, error)

	// ListContainers lists the containers whose labels include every
	// key=value of labels (all containers when labels is empty).
	ListContainers(ctx context.Context, labels map[string]string) ([]ContainerStatus, error)

	// WaitContainer blocks until the container has exited (at once if it
	// already has) and returns its status. It survives a runtime restart
	// (containerd's, or the connection's) by waiting again. Waiting for a
	// container that was never started is ErrInvalidState.
	WaitContainer(ctx context.Context, id string) (ContainerStatus, error)

	// Events streams container events until ctx ends, then closes the
	// channel. Events are hints for a work queue, not state: a reader that
	// falls behind, or a reconnect to the runtime, loses events, and both
	// are signalled by an EventResync after which the reader should relist.
	Events(ctx context.Context) <-chan Event

	// Exec runs a command in a running container, copying its stdio to and
	// from opts, and returns its exit code once it has exited and its
	// output has been copied. A non-zero exit code is not an error.
	Exec(ctx context.Context, id string, opts ExecOptions) (int, error)

	// Logs writes the container's output to w: the last opts.Tail lines
	// (all when Tail < 0), then, with opts.Follow, what it writes next
	// until it exits or ctx ends.
	Logs(ctx context.Context, id string, opts LogOptions, w io.Writer) error

	// Version names the runtime and its version, for Node status.
	Version(ctx context.Context) (VersionInfo, error)

	// Close releases the runtime's connections and goroutines. Containers
	// keep running. Safe to call twice.
	Close() error
}

// PullPolicy is Kubernetes' imagePullPolicy.
type PullPolicy string

// Pull policies.
const (
	PullAlways       PullPolicy = "Always"
	PullIfNotPresent PullPolicy = "IfNotPresent"
	PullNever        PullPolicy = "Never"
)

// PullProgress is one progress report of a pull.
type PullProgress struct {
	Ref        string
	DoneBytes  int64 // bytes fetched so far
	TotalBytes int64 // bytes known to fetch so far; grows as manifests are read
	Done       bool  // the last report
}

// ImageInfo describes a local image.
type ImageInfo struct {
	Name   string // normalised reference, e.g. docker.io/library/busybox:latest
	Digest string // manifest (or index) digest
	Size   int64  // compressed size of its blobs
	// Entrypoint, Cmd, Env and WorkingDir come from the image config.
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	// User is the image config's user ("1000", "1000:1000", "nobody",
	// "" for root), what the kubelet reads for runAsNonRoot.
	User string
}

// ContainerSpec is what a container is created from.
type ContainerSpec struct {
	// ID of the container; generated when empty.
	ID string
	// Labels are stored with the container and returned in its status;
	// the agent keeps pod uid, namespace, name, container name and restart
	// attempt here (see the Label* constants).
	Labels map[string]string
	// Image is the image reference, present locally.
	Image string
	// Command replaces the image's entrypoint and Args its cmd, as in a
	// Kubernetes container (see ResolveArgs).
	Command []string
	Args    []string
	// Env is KEY=VALUE; it adds to and overrides the image's environment.
	Env []string
	// WorkingDir overrides the image's working directory when set.
	WorkingDir string
	Mounts     []Mount
	// CPUMillis limits CPU time (1000 = one core) through the CFS quota;
	// 0 is no limit.
	CPUMillis int64
	// MemoryBytes limits memory (cgroup); going over it gets the process
	// OOM-killed and the container reason OOMKilled. 0 is no limit.
	MemoryBytes int64
	// Hostname of the container; the ID's first 63 characters when empty.
	Hostname string
	// NetNSPath is a network namespace to join (/var/run/netns/NAME or
	// /proc/PID/ns/net), set up beforehand by the agent's CNI step. Empty
	// means the host's network namespace, like hostNetwork: true.
	NetNSPath string
	// CDIDevices are fully qualified CDI device names
	// (nvidia.com/gpu=0) resolved against the runtime's CDI spec
	// directories. An unknown name is ErrCDIUnresolved. The edits made
	// are reported in ContainerStatus.CDIEdits, for the pod trace.
	CDIDevices []string
	// LogPath is the file stdout and stderr go to; a file under the
	// runtime's state directory when empty.
	LogPath string
	// TTY gives the process a terminal; its output still goes to the log.
	TTY bool
	// Security is the process's user, groups, capabilities and
	// confinement (security.go); nil keeps the runtime's defaults.
	Security *SecuritySpec
}

// Mount is a bind mount of a host path or a tmpfs.
type Mount struct {
	Type        MountType
	Source      string // host path, for binds
	Destination string // path in the container
	ReadOnly    bool
	SizeBytes   int64 // tmpfs size limit; 0 is the kernel default (half of RAM)
}

// MountType is how a Mount is made.
type MountType string

// Mount types.
const (
	MountBind  MountType = "bind"
	MountTmpfs MountType = "tmpfs"
)

// Label keys the agent sets on containers and finds them by.
const (
	LabelPodUID        = "skiff.dev/pod-uid"
	LabelPodNamespace  = "skiff.dev/pod-namespace"
	LabelPodName       = "skiff.dev/pod-name"
	LabelContainerName = "skiff.dev/container-name"
	LabelAttempt       = "skiff.dev/attempt"
)

// ContainerState is where a container is in its lifecycle.
type ContainerState string

// Container states.
const (
	StateCreated ContainerState = "created"
	StateRunning ContainerState = "running"
	StateExited  ContainerState = "exited"
	StateUnknown ContainerState = "unknown"
)

// Exit reasons, worded as Kubernetes' container state reasons.
const (
	ReasonCompleted = "Completed" // exit code 0
	ReasonError     = "Error"     // any other exit code
	ReasonOOMKilled = "OOMKilled" // killed by the kernel for going over its memory limit
)

// ContainerStatus is a container's state, as the runtime sees it now.
type ContainerStatus struct {
	ID     string
	Image  string
	Labels map[string]string
	State  ContainerState
	Pid    uint32 // of the main process while running
	// ExitCode and Reason are set once exited.
	ExitCode   int
	Reason     string
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	LogPath    string
	// CDIEdits are the OCI spec edits CDI devices made at creation.
	CDIEdits *CDIEdits
}

// CDIEdits records what resolving a container's CDI devices changed in its
// OCI spec, for the pod trace.
type CDIEdits struct {
	Devices []string // qualified names asked for
	// DeviceNodes are container paths of device nodes added.
	DeviceNodes []string
	Env         []string // KEY=VALUE added or changed
	Mounts      []string // "host:container" bind mounts added
	Hooks       []string // hook paths added
}

// Event is a change in a container, or EventResync.
type Event struct {
	Type   EventType
	ID     string // empty for EventResync
	Labels map[string]string
	// ExitCode and Reason come with EventExited.
	ExitCode int
	Reason   string
	Time     time.Time
}

// EventType says what an Event reports.
type EventType string

// Event types.
const (
	EventStarted EventType = "started"
	EventExited  EventType = "exited"
	EventOOM     EventType = "oom" // an OOM kill in the container; an exit follows
	// EventResync says events may have been lost: list containers again.
	EventResync EventType = "resync"
)

// ExecOptions are the command and stdio of an Exec. Stdout and Stderr may
// be one writer (an exec probe passes one buffer): a runtime that copies
// the two streams at once serializes their writes (internal/outpair).
type ExecOptions struct {
	Cmd    []string
	Stdin  io.Reader // nil for none
	Stdout io.Writer // nil to discard
	Stderr io.Writer // nil to discard; ignored with TTY (a terminal has one output)
	TTY    bool
	// Resize carries the client's terminal size changes (TTY only; nil for
	// none). The runtime reads it until it closes or the command ends.
	Resize <-chan TerminalSize
}

// TerminalSize is the size of an exec's terminal, in characters.
type TerminalSize struct {
	Width, Height uint16
}

// LogOptions select what Logs writes.
type LogOptions struct {
	Follow bool
	Tail   int // last lines to write; < 0 for all
}

// VersionInfo names a runtime.
type VersionInfo struct {
	Name    string // "containerd" or "fake"
	Version string
}

// Errors callers branch on.
var (
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("already exists")
	ErrImageNotFound = errors.New("image not found")
	ErrNotRunning    = errors.New("container is not running")
	ErrInvalidState  = errors.New("invalid container state")
	ErrCDIUnresolved = errors.New("unresolvable CDI device")
	ErrInvalidSpec   = errors.New("invalid container spec")
	ErrUnavailable   = errors.New("container runtime unavailable")
)

// PullError is a failed image pull: Kubernetes' ErrImagePull.
type PullError struct {
	Ref string
	Err error
	// NotFound is true when the registry answered that the image does not
	// exist (as opposed to an unreachable registry or a denied request).
	NotFound bool
}

func (e *PullError) Error() string { return fmt.Sprintf("pull image %q: %v", e.Ref, e.Err) }

// Unwrap returns the cause.
func (e *PullError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrImageNotFound) hold when the registry said the
// image does not exist.
func (e *PullError) Is(target error) bool { return target == ErrImageNotFound && e.NotFound }

// ResolveArgs returns the process arguments of a container, with the rules of
// a Kubernetes container: command replaces the image's entrypoint and then
// drops its cmd; args replaces the image's cmd.
func ResolveArgs(entrypoint, cmd, command, args []string) []string {
	var out []string
	switch {
	case len(command) > 0:
		out = append(out, command...)
		out = append(out, args...)
	case len(args) > 0:
		out = append(out, entrypoint...)
		out = append(out, args...)
	default:
		out = append(out, entrypoint...)
		out = append(out, cmd...)
	}
	return out
}

// ValidateID reports whether id is a valid container ID.
func ValidateID(id string) error {
	if id == "" || len(id) > 76 {
		return fmt.Errorf("container id %q: must be 1 to 76 characters: %w", id, ErrInvalidSpec)
	}
	prevSep := true
	for i, r := range id {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		sep := r == '.' || r == '_' || r == '-'
		switch {
		case alnum:
			prevSep = false
		case sep && !prevSep && i != len(id)-1:
			prevSep = true
		default:
			return fmt.Errorf("container id %q: letters, digits and single . _ - between them only: %w", id, ErrInvalidSpec)
		}
	}
	return nil
}

// ExitReason is the Kubernetes reason for an exit code.
func ExitReason(code int, oomKilled bool) string {
	switch {
	case oomKilled:
		return ReasonOOMKilled
	case code == 0:
		return ReasonCompleted
	default:
		return ReasonError
	}
}

// MatchLabels reports whether have includes every key=value of want.
func MatchLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// NormalizeImageRef returns the full form of an image reference, as docker
// and the kubelet read it: "busybox" is "docker.io/library/busybox:latest".
func NormalizeImageRef(ref string) (string, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	return reference.TagNameOnly(named).String(), nil
}

// TailLines returns the last n lines of data (all of it when n < 0).
func TailLines(data []byte, n int) []byte {
	if n < 0 {
		return data
	}
	if n == 0 {
		return nil
	}
	i := len(data)
	if i > 0 && data[i-1] == '\n' {
		i--
	}
	for ; n > 0; n-- {
		j := bytes.LastIndexByte(data[:i], '\n')
		if j < 0 {
			return data
		}
		i = j
	}
	return data[i+1:]
}
