package podworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/backoff"
	"skiff.dev/skiff/runtime"
)

// Network sets up a pod's network namespace (agent/network through CNI).
// Every method is idempotent; TearDown of an unknown pod is not an error.
// Retain is the agent's resync (agent.go): it tears down the network of
// every pod whose uid is not among live's (deleted while the agent was
// down, or whose containers never came), from the network's own record,
// and may block on the network plugins. It calls live after it read that
// record: a pod whose set-up began before is in live's answer (only a
// pod the agent's informer has gets set up), so it stays.
type Network interface {
	SetUp(ctx context.Context, pod *api.Pod) (PodNetwork, error)
	TearDown(ctx context.Context, namespace, name, uid string) error
	Retain(ctx context.Context, live func() map[string]bool) error
}

// PodNetwork is the result of a network set-up.
type PodNetwork struct {
	IP        string
	NetNSPath string
}

// DeviceAllocator gives containers their devices (agent/devices: the device
// plugin API). Allocate is idempotent per pod uid and container; Release
// frees everything a pod held; Retain, the agent's resync (agent.go), frees
// the devices of every pod whose uid is not in live (an implementation may
// keep allocations too young to have their pod in the agent's cache yet).
// Retain does not block on plugins: it only changes the allocator's record.
type DeviceAllocator interface {
	Allocate(ctx context.Context, pod *api.Pod, container *api.Container) (Allocation, error)
	Release(ctx context.Context, podUID string) error
	// ReleaseGone frees the devices of every pod of this namespace and
	// name: the API has no pod of that name any more (deleted or
	// force-deleted, perhaps before any container was made).
	ReleaseGone(namespace, name string) error
	Retain(live map[string]bool) error
}

// AdmissionError is a device plugin's refusal of a pod's devices (its
// Allocate answered an error): the kubelet fails such a pod at admission,
// with reason UnexpectedAdmissionError, and never retries it. Message is
// the kubelet's sentence ("Allocate failed due to rpc error: ..., which
// is unexpected").
type AdmissionError struct{ Message string }

func (e *AdmissionError) Error() string { return e.Message }

// ReasonUnexpectedAdmissionError is the pod's status.reason and the
// event's reason when its devices were refused at admission.
const ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"

// DeviceAdmitter is a DeviceAllocator that allocates every container's
// devices when the pod is admitted, as the kubelet's device manager does;
// an *AdmissionError fails the pod, any other error is retried.
type DeviceAdmitter interface {
	Admit(ctx context.Context, pod *api.Pod) error
}

// Allocation is what a device plugin answered for one container.
type Allocation struct {
	// CDIDevices are fully qualified CDI names, e.g. nvidia.com/gpu=0.
	CDIDevices []string
	// Env to add (NVIDIA_VISIBLE_DEVICES, ...).
	Env map[string]string
	// Mounts and device nodes a plugin asked for directly.
	Mounts []runtime.Mount
	// Devices by resource name, for the pod status and trace.
	Devices map[string][]string
	// Trace is what the device manager asked and the plugins answered
	// (per resource), for the "create" span of the pod trace.
	Trace map[string]any
}

// ClaimPreparer prepares a pod's ResourceClaims on this node (agent/dra:
// the kubelet side of DRA). PrepareResources is idempotent per pod and
// returns, per container name, the CDI devices of the claims the
// container lists in resources.claims; UnprepareResources ends the pod's
// use of its claims (a claim no other pod here uses is unprepared by its
// driver) and is idempotent. Both may block on the drivers.
type ClaimPreparer interface {
	PrepareResources(ctx context.Context, pod *api.Pod) (PreparedClaims, error)
	UnprepareResources(ctx context.Context, podUID string) error
}

// PreparedClaims is what PrepareResources found for one pod.
type PreparedClaims struct {
	// CDIDevices by container name.
	CDIDevices map[string][]string
	// Trace is what was asked and answered, for the "prepare" span.
	Trace map[string]any
	// Summary is one line per claim for the span's message: driver,
	// claim, devices and CDI devices.
	Summary []string
}

// Config of a Worker.
type Config struct {
	// NodeName is this node's name; NodeIP its address.
	NodeName, NodeIP string
	Client           client.Interface
	// Simulated: Runtime runs no processes (runtime/fake), so nothing
	// answers a probe: probes pass unless the pod's
	// api.AnnotationSimulatedProbeFailure names them (probes.go).
	Simulated bool
	Runtime   runtime.Runtime
	// Recorder posts Events; nil posts none.
	Recorder *client.Recorder
	// Network, or nil: pods then share the node's network namespace (as
	// with hostNetwork) and report the node IP.
	Network Network
	// Devices, or nil: pods asking for extended resources cannot start.
	Devices DeviceAllocator
	// Claims, or nil: pods with spec.resourceClaims cannot start.
	Claims ClaimPreparer
	// VolumeDir holds pod volumes: VolumeDir/<pod uid>/volumes/<name>.
	VolumeDir string
	// RootDir is this node's counterpart of the kubelet's --root-dir
	// (KubeletRootDir, /var/lib/kubelet): the agent's data directory,
	// which holds what the kubelet's does (device-plugins/, pods/,
	// seccomp/, plugins_registry/). A hostPath at or below
	// /var/lib/kubelet is taken from under RootDir (NodePath), so a
	// device plugin pod's hostPath /var/lib/kubelet/device-plugins
	// reaches this node's device manager. "": hostPaths as written.
	RootDir string
	// SeccompDir holds the node's seccomp profiles (the kubelet's
	// /var/lib/kubelet/seccomp): a container's seccompProfile of type
	// Localhost names a file below it (security.go). "": none.
	SeccompDir string
	// BaseBackoff and MaxBackoff bound the restart and image pull backoff
	// (kubelet: 10 s doubling to 5 min; zero takes those).
	BaseBackoff, MaxBackoff time.Duration
	Log                     *slog.Logger
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time
	// Enqueue asks for another Sync of a pod: a probe's result changed,
	// or a background stop failed. The agent enqueues the pod's key.
	// Called from probe timers and stop goroutines: must not block.
	Enqueue func(namespace, name string)
}

// Worker syncs pods. One Worker serves all pods of a node; Sync must not be
// called concurrently for the same pod (the agent's loop guarantees it).
type Worker struct {
	cfg Config
	log *slog.Logger
	// backoff is BaseBackoff doubling to MaxBackoff, for both restarts
	// (CrashLoopBackOff) and image pulls (ImagePullBackOff).
	backoff backoff.Policy

	mu    sync.Mutex
	state map[string]*podState // by pod uid

	probes *prober

	// terminating holds the uids of pods being stopped in the background:
	// a stop waits out the grace period, and pods are stopped in parallel,
	// as the kubelet does, not one worker at a time.
	terminating map[string]bool
	// stopFailures counts the failed stops of a pod in a row (uid).
	stopFailures map[string]int
	stops        sync.WaitGroup
}

// podState is what the worker remembers between syncs. Losing it (an agent
// restart) only resets backoff timers.
type podState struct {
	// backoff per container name: when the next attempt may start and the
	// delay that was used.
	restart map[string]retryAfter
	pull    map[string]pullFailure
	// started records that the Started event was posted, per container id.
	started map[string]bool
	network *PodNetwork
	// previous holds, per container name, the attempt before the latest.
	previous map[string]runtime.ContainerStatus
	// allocTrace is the device manager's Allocate per container name
	// (Allocation.Trace), for the create span.
	allocTrace map[string]map[string]any
	// claims are the pod's prepared ResourceClaims (nil: not yet).
	claims *PreparedClaims
	// tokens written into projected volumes, by "volume/source index",
	// with when to replace them (serviceaccount.go); under Worker.mu.
	tokens map[string]issuedToken
	// spans of the pod's trace taken during the current Sync, posted in
	// one request before its status is written (flushTrace).
	spans []api.TraceSpan
}

// retryAfter is a container's backoff: the next attempt waits until until.
type retryAfter struct {
	until time.Time
	// failures counted since the backoff last started over; delay is
	// Worker.backoff's delay for them.
	failures int
	delay    time.Duration
	// forID is the exited container this backoff waits out (restarts).
	forID string
}

type pullFailure struct {
	retryAfter
	message string
	// shown: a status with ErrImagePull was written; later ones say ImagePullBackOff.
	shown bool
	// config: the failure was building the container's config (a missing
	// ConfigMap key, say), not the pull.
	config bool
}

// New returns a Worker.
func New(cfg Config) *Worker {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BaseBackoff == 0 {
		cfg.BaseBackoff = 10 * time.Second
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 5 * time.Minute
	}
	lg := cfg.Log
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	w := &Worker{cfg: cfg, log: lg.With("component", "podworker"), state: map[string]*podState{}, terminating: map[string]bool{}, stopFailures: map[string]int{},
		backoff: backoff.Policy{Initial: cfg.BaseBackoff, Max: cfg.MaxBackoff}}
	w.probes = newProber(w)
	return w
}

// Close stops every probe timer and waits for background stops to end
// (they end with the ctx they were started with). Containers keep running.
func (w *Worker) Close() {
	w.probes.stopAll()
	w.stops.Wait()
}

// terminateAsync stops a deleting pod in the background, once.
func (w *Worker) terminateAsync(ctx context.Context, pod *api.Pod) {
	w.mu.Lock()
	if w.terminating[pod.UID] {
		w.mu.Unlock()
		return
	}
	w.terminating[pod.UID] = true
	w.mu.Unlock()
	w.stops.Add(1)
	go func() {
		defer w.stops.Done()
		err := w.terminate(ctx, pod)
		w.mu.Lock()
		failures := 0
		if err != nil {
			w.stopFailures[pod.UID]++
			failures = w.stopFailures[pod.UID]
		} else {
			delete(w.stopFailures, pod.UID)
		}
		w.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			w.log.Warn("stop pod", "pod", api.KeyOf(pod), "failures", failures, "err", err)
			// Try again after a backoff, still marked terminating: with
			// the runtime down (containerd restarting) an immediate
			// retry fails at once, a busy loop.
			select {
			case <-ctx.Done():
			case <-time.After(stopRetry.Delay(failures)):
			}
		}
		w.mu.Lock()
		delete(w.terminating, pod.UID)
		w.mu.Unlock()
		if err != nil && ctx.Err() == nil && w.cfg.Enqueue != nil {
			w.cfg.Enqueue(pod.Namespace, pod.Name)
		}
	}()
}

// stopRetry spaces the retries of a pod's failed stop.
var stopRetry = backoff.Policy{Initial: 250 * time.Millisecond, Max: 10 * time.Second}

// WaitStops waits for background stops (tests).
func (w *Worker) WaitStops() { w.stops.Wait() }

func (w *Worker) stateOf(uid string) *podState {
	w.mu.Lock()
	defer w.mu.Unlock()
	st, ok := w.state[uid]
	if !ok {
		st = &podState{restart: map[string]retryAfter{}, pull: map[string]pullFailure{}, started: map[string]bool{}}
		w.state[uid] = st
	}
	return st
}

func (w *Worker) forget(uid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.state, uid)
}

// Sync drives one pod toward its spec. It returns how long until it wants
// to look again (0: only on the next event).
func (w *Worker) Sync(ctx context.Context, pod *api.Pod) (time.Duration, error) {
	if pod.Spec.NodeName != w.cfg.NodeName {
		return 0, nil
	}
	if pod.DeletionTimestamp != nil {
		w.terminateAsync(ctx, pod)
		return 0, nil
	}
	containers, err := w.cfg.Runtime.ListContainers(ctx, map[string]string{runtime.LabelPodUID: pod.UID})
	if err != nil {
		return 0, fmt.Errorf("list containers of pod %s: %w", api.KeyOf(pod), err)
	}
	latest := latestByName(containers)
	st := w.stateOf(pod.UID)
	defer func() { w.flushTrace(ctx, pod, st) }() // spans of a Sync that ended early

	if pod.Status.Phase == api.PodSucceeded || pod.Status.Phase == api.PodFailed {
		// Terminal pods never run again; make sure nothing is left running.
		for _, c := range latest {
			if c.State == runtime.StateRunning {
				_ = w.cfg.Runtime.StopContainer(ctx, c.ID, w.grace(pod))
			}
		}
		return 0, nil
	}

	// The first time the agent sees the pod: admit it (its sysctls,
	// security.go), then say ContainerCreating at once, so `get pods -w`
	// shows the step before a long image pull.
	if pod.Status.Phase == "" || pod.Status.Phase == api.PodPending && pod.Status.StartTime == nil {
		if msg := admitSysctls(pod, pod.Spec.HostNetwork || w.cfg.Network == nil); msg != "" {
			return 0, w.reject(ctx, pod, sysctlForbiddenReason, msg)
		}
		now := api.NewTime(w.cfg.Now())
		p := api.Clone(pod)
		p.Status.StartTime = &now
		p.Status.HostIP = w.cfg.NodeIP
		p.Status.Phase = api.PodPending
		p.Status.ContainerStatuses = w.statuses(pod, pod.Spec.Containers, latest, st, false)
		p.Status.InitContainerStatuses = w.statuses(pod, pod.Spec.InitContainers, latest, st, false)
		if updated, err := w.writeStatus(ctx, pod, p); err == nil {
			pod = updated
		} else {
			return 0, err
		}
	}

	var requeueAfter time.Duration
	want := func(d time.Duration) {
		if d > 0 && (requeueAfter == 0 || d < requeueAfter) {
			requeueAfter = d
		}
	}

	// Admission: the devices of every container, as the kubelet's device
	// manager allocates them; a plugin's refusal fails the pod for good.
	if failed, err := w.admit(ctx, pod); failed || err != nil {
		return 0, err
	}

	// Dynamic resources next, then the network: the pod's sandbox.
	if err := w.setUpSandbox(ctx, pod, st); err != nil {
		return 0, err
	}

	// Service account tokens at 80% of their life (serviceaccount.go).
	want(w.refreshTokens(ctx, pod, st))

	d, err := w.stepContainers(ctx, pod, latest, st)
	if err != nil {
		return 0, err
	}
	want(d)

	// Read back what the runtime now has and report it.
	containers, err = w.cfg.Runtime.ListContainers(ctx, map[string]string{runtime.LabelPodUID: pod.UID})
	if err != nil {
		return 0, fmt.Errorf("list containers of pod %s: %w", api.KeyOf(pod), err)
	}
	latest = latestByName(containers)
	st.previous = previousByName(containers)
	w.syncProbes(pod, latest, st)
	next := api.Clone(pod)
	w.computeStatus(next, latest, st)
	w.flushTrace(ctx, pod, st)
	if _, err := w.writeStatus(ctx, pod, next); err != nil {
		return 0, err
	}
	for name, pf := range st.pull {
		pf.shown = true
		st.pull[name] = pf
	}
	return requeueAfter, nil
}

// setUpSandbox prepares what the pod's containers share, once: its
// dynamic resources (the kubelet's NodePrepareResources, agent/dra), then
// its network namespace (containers join it); a pod already set up gets
// its hosts file's services refreshed (discovery.go).
func (w *Worker) setUpSandbox(ctx context.Context, pod *api.Pod, st *podState) error {
	if len(pod.Spec.ResourceClaims) > 0 && st.claims == nil {
		if w.cfg.Claims == nil {
			err := fmt.Errorf("pod %s has resource claims but this node has no DRA manager", api.KeyOf(pod))
			w.event(ctx, pod, api.EventWarning, "FailedPrepareDynamicResources", "Failed to prepare dynamic resources: %v", err)
			return err
		}
		t0 := w.cfg.Now()
		pc, err := w.cfg.Claims.PrepareResources(ctx, pod)
		if err != nil {
			w.event(ctx, pod, api.EventWarning, "FailedPrepareDynamicResources", "Failed to prepare dynamic resources: %v", err)
			w.trace(st, "prepare", t0, "NodePrepareResources failed: "+err.Error(), nil)
			return fmt.Errorf("prepare resource claims of pod %s: %w", api.KeyOf(pod), err)
		}
		st.claims = &pc
		w.trace(st, "prepare", t0, "NodePrepareResources "+strings.Join(pc.Summary, "; "), pc.Trace)
	}
	if st.network == nil && !pod.Spec.HostNetwork && w.cfg.Network != nil {
		t0 := w.cfg.Now()
		pn, err := w.cfg.Network.SetUp(ctx, pod)
		if err != nil {
			w.event(ctx, pod, api.EventWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			return fmt.Errorf("set up network of pod %s: %w", api.KeyOf(pod), err)
		}
		st.network = &pn
		w.trace(st, "network", t0, "pod IP "+pn.IP, nil)
	} else if st.network != nil {
		// Keep the hosts file's services current (discovery.go).
		if _, _, err := w.hostsMount(ctx, pod, st); err != nil {
			w.log.Debug("refresh hosts file", "pod", api.KeyOf(pod), "err", err)
		}
	}
	return nil
}

// stepContainers takes the next step of each container: init containers
// run one after the other, and the app containers start only when all
// have succeeded. It returns the soonest time to look again.
func (w *Worker) stepContainers(ctx context.Context, pod *api.Pod, latest map[string]runtime.ContainerStatus, st *podState) (time.Duration, error) {
	var soonest time.Duration
	want := func(d time.Duration) {
		if d > 0 && (soonest == 0 || d < soonest) {
			soonest = d
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cur, ok := latest[c.Name]
		if ok && cur.State == runtime.StateExited && cur.ExitCode == 0 {
			continue
		}
		d, err := w.step(ctx, pod, c, cur, ok, st, true)
		return d, err
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cur, ok := latest[c.Name]
		d, err := w.step(ctx, pod, c, cur, ok, st, false)
		if err != nil {
			return 0, err
		}
		want(d)
	}
	// Ephemeral containers (kubectl debug): started once, in the pod's
	// network namespace, never restarted or probed.
	for i := range pod.Spec.EphemeralContainers {
		c := &pod.Spec.EphemeralContainers[i].Container
		cur, ok := latest[c.Name]
		if ok && cur.State != runtime.StateCreated {
			continue
		}
		d, err := w.step(ctx, pod, c, cur, ok, st, false)
		if err != nil {
			return 0, err
		}
		want(d)
	}
	return soonest, nil
}

// step takes the next action for one container and returns when to look again.
func (w *Worker) step(ctx context.Context, pod *api.Pod, c *api.Container, cur runtime.ContainerStatus, exists bool, st *podState, isInit bool) (time.Duration, error) {
	now := w.cfg.Now()
	switch {
	case !exists:
		return w.start(ctx, pod, c, 0, st)
	case cur.State == runtime.StateCreated:
		if err := w.cfg.Runtime.StartContainer(ctx, cur.ID); err != nil {
			return 0, fmt.Errorf("start container %s of pod %s: %w", c.Name, api.KeyOf(pod), err)
		}
		w.startedEvent(ctx, pod, c, cur.ID, st)
		return 0, nil
	case cur.State == runtime.StateRunning:
		w.startedEvent(ctx, pod, c, cur.ID, st)
		return 0, w.killIfUnhealthy(ctx, pod, c, cur)
	case cur.State == runtime.StateExited:
		if !shouldRestart(pod.Spec.RestartPolicy, cur.ExitCode, isInit) {
			return 0, nil
		}
		b := st.restart[c.Name]
		if b.forID != cur.ID {
			// A new failure: back off before the next attempt, doubling
			// the delay (kubelet: at once, then 10 s, 20 s, 40 s ... 5 min).
			n := b.failures + 1
			// A container that ran a long time starts over.
			if !cur.StartedAt.IsZero() && cur.FinishedAt.Sub(cur.StartedAt) > restartBackoffReset {
				n = 1
			}
			if attempt(cur) == 0 && b.forID == "" {
				// The first restart happens at once, as the kubelet does.
				n = 0
			}
			d := w.backoff.Delay(n)
			b = retryAfter{until: cur.FinishedAt.Add(d), failures: n, delay: d, forID: cur.ID}
			st.restart[c.Name] = b
		}
		if now.Before(b.until) {
			w.event(ctx, pod, api.EventWarning, "BackOff", "Back-off restarting failed container %s in pod %s_%s(%s)", c.Name, pod.Name, pod.Namespace, pod.UID)
			return b.until.Sub(now), nil
		}
		return w.start(ctx, pod, c, attempt(cur)+1, st)
	}
	return 0, nil
}

// restartBackoffReset is how long a container must run for its restart
// backoff to start over: the kubelet's, twice its 5 min cap.
const restartBackoffReset = 10 * time.Minute

func shouldRestart(policy string, exitCode int, isInit bool) bool {
	switch policy {
	case "Never":
		return false
	case "OnFailure":
		return exitCode != 0
	default: // Always
		if isInit {
			return exitCode != 0
		}
		return true
	}
}

// start pulls the image, creates and starts attempt n of a container.
// admit asks the device manager to admit the pod (DeviceAdmitter). A
// refusal (*AdmissionError) makes the pod Failed with reason
// UnexpectedAdmissionError and a Warning event of the same reason, and
// failed is true; any other error is returned, to retry.
func (w *Worker) admit(ctx context.Context, pod *api.Pod) (failed bool, err error) {
	a, ok := w.cfg.Devices.(DeviceAdmitter)
	if !ok || w.cfg.Devices == nil || !podNeedsDevices(pod) {
		return false, nil
	}
	err = a.Admit(ctx, pod)
	var ae *AdmissionError
	if !errors.As(err, &ae) {
		return false, err
	}
	w.event(ctx, pod, api.EventWarning, ReasonUnexpectedAdmissionError, "%s", ae.Message)
	p := api.Clone(pod)
	p.Status.Phase = api.PodFailed
	p.Status.Reason, p.Status.Message = ReasonUnexpectedAdmissionError, ae.Message
	if _, err := w.writeStatus(ctx, pod, p); err != nil {
		return true, err
	}
	return true, nil
}

func podNeedsDevices(pod *api.Pod) bool {
	for i := range pod.Spec.InitContainers {
		if needsDevices(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	for i := range pod.Spec.Containers {
		if needsDevices(&pod.Spec.Containers[i]) {
			return true
		}
	}
	return false
}

func (w *Worker) start(ctx context.Context, pod *api.Pod, c *api.Container, n int, st *podState) (time.Duration, error) {
	now := w.cfg.Now()
	if pf, ok := st.pull[c.Name]; ok && now.Before(pf.until) {
		if !pf.config {
			w.event(ctx, pod, api.EventNormal, "BackOff", "Back-off pulling image %q", c.Image)
		}
		return pf.until.Sub(now), nil
	}
	t0 := now
	w.event(ctx, pod, api.EventNormal, "Pulling", "Pulling image %q", c.Image)
	img, err := w.cfg.Runtime.EnsureImage(ctx, c.Image, runtime.PullPolicy(pullPolicy(c)), nil)
	if err != nil {
		// Pull failures in a row double the wait (kubelet: 10 s ... 5 min);
		// a pull that works forgets them.
		n := st.pull[c.Name].failures + 1
		d := w.backoff.Delay(n)
		msg := err.Error()
		st.pull[c.Name] = pullFailure{retryAfter: retryAfter{until: now.Add(d), failures: n, delay: d}, message: msg}
		w.event(ctx, pod, api.EventWarning, "Failed", "Failed to pull image %q: %s", c.Image, msg)
		w.event(ctx, pod, api.EventWarning, "Failed", "Error: ErrImagePull")
		w.trace(st, "pull", t0, "failed: "+msg, nil)
		// Look again soon so the status moves on to ImagePullBackOff
		// while the backoff runs.
		return min(d, time.Second), nil
	}
	delete(st.pull, c.Name) // a pull that works ends the backoff
	w.event(ctx, pod, api.EventNormal, "Pulled", "Successfully pulled image %q in %s", c.Image, w.cfg.Now().Sub(t0).Round(time.Millisecond))
	w.trace(st, "pull", t0, img.Name, nil)

	t1 := w.cfg.Now()
	spec, err := w.containerSpec(ctx, pod, c, img, n, st)
	if err != nil {
		w.event(ctx, pod, api.EventWarning, "Failed", "Error: %v", err)
		// The config may be fixed any moment (a ConfigMap created): look
		// again after the first delay, without growing it.
		d := w.backoff.Delay(1)
		st.pull[c.Name] = pullFailure{retryAfter: retryAfter{until: now.Add(d), failures: 1, delay: d}, message: err.Error(), config: true}
		return d, nil
	}
	id, err := w.cfg.Runtime.CreateContainer(ctx, spec)
	if errors.Is(err, runtime.ErrAlreadyExists) {
		id = spec.ID
	} else if err != nil {
		w.event(ctx, pod, api.EventWarning, "Failed", "Error: %v", err)
		return 0, fmt.Errorf("create container %s of pod %s: %w", c.Name, api.KeyOf(pod), err)
	}
	details := map[string]any{"containerID": id, "image": img.Name}
	if t := st.allocTrace[c.Name]; len(t) > 0 {
		details["allocate"] = t
	}
	if st.claims != nil && len(st.claims.CDIDevices[c.Name]) > 0 {
		details["claimCDIDevices"] = st.claims.CDIDevices[c.Name]
	}
	if len(spec.CDIDevices) > 0 {
		if cs, err := w.cfg.Runtime.ContainerStatus(ctx, id); err == nil && cs.CDIEdits != nil {
			details["cdi"] = cs.CDIEdits
		}
	}
	w.event(ctx, pod, api.EventNormal, "Created", "Created container %s", c.Name)
	msg := "container " + c.Name
	if len(spec.CDIDevices) > 0 {
		msg += ", CDI devices " + strings.Join(spec.CDIDevices, ",")
	}
	w.trace(st, "create", t1, msg, details)
	t2 := w.cfg.Now()
	if err := w.cfg.Runtime.StartContainer(ctx, id); err != nil {
		w.event(ctx, pod, api.EventWarning, "Failed", "Error: %v", err)
		return 0, fmt.Errorf("start container %s of pod %s: %w", c.Name, api.KeyOf(pod), err)
	}
	w.startedEvent(ctx, pod, c, id, st)
	w.trace(st, "start", t2, "container "+c.Name, nil)
	// Keep only the previous attempt (for logs --previous).
	w.prune(ctx, pod.UID, c.Name, n)
	return 0, nil
}

func (w *Worker) startedEvent(ctx context.Context, pod *api.Pod, c *api.Container, id string, st *podState) {
	if st.started[id] {
		return
	}
	st.started[id] = true
	w.event(ctx, pod, api.EventNormal, "Started", "Started container %s", c.Name)
}

// prune removes attempts older than the one before n; attempts count from
// 0, so the first two have none.
func (w *Worker) prune(ctx context.Context, uid, name string, n int) {
	if n < 2 {
		return
	}
	cs, err := w.cfg.Runtime.ListContainers(ctx, map[string]string{runtime.LabelPodUID: uid, runtime.LabelContainerName: name})
	if err != nil {
		return
	}
	for _, c := range cs {
		if attempt(c) < n-1 {
			_ = w.cfg.Runtime.RemoveContainer(ctx, c.ID)
		}
	}
}

func pullPolicy(c *api.Container) string {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	if strings.HasSuffix(c.Image, ":latest") || !strings.Contains(lastSegment(c.Image), ":") {
		return "Always"
	}
	return "IfNotPresent"
}

func lastSegment(s string) string {
	if i := strings.LastIndex(s, "/"); i >= 0 {
		return s[i+1:]
	}
	return s
}

func (w *Worker) grace(pod *api.Pod) time.Duration {
	if pod.DeletionGracePeriodSeconds != nil {
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// terminate stops a deleting pod's containers, frees what it held, and
// removes the pod from the API.
func (w *Worker) terminate(ctx context.Context, pod *api.Pod) error {
	cs, err := w.cfg.Runtime.ListContainers(ctx, map[string]string{runtime.LabelPodUID: pod.UID})
	if err != nil {
		return fmt.Errorf("list containers of pod %s: %w", api.KeyOf(pod), err)
	}
	grace := w.grace(pod)
	var wg sync.WaitGroup
	for _, c := range cs {
		if c.State == runtime.StateRunning {
			w.event(ctx, pod, api.EventNormal, "Killing", "Stopping container %s", c.Labels[runtime.LabelContainerName])
			wg.Add(1)
			go func(id string) {
				defer wg.Done()
				_ = w.cfg.Runtime.StopContainer(ctx, id, grace)
			}(c.ID)
		}
	}
	wg.Wait()
	if err := w.release(ctx, pod.Namespace, pod.Name, pod.UID); err != nil {
		return err
	}
	uid := pod.UID
	zero := int64(0)
	err = w.cfg.Client.Delete(ctx, api.MustKindOf(pod), pod.Namespace, pod.Name, api.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &api.Preconditions{UID: &uid}})
	if err != nil && !api.IsNotFound(err) && !api.IsConflict(err) {
		return fmt.Errorf("remove pod %s: %w", api.KeyOf(pod), err)
	}
	return nil
}

// release removes a pod's containers, network, devices and volumes.
func (w *Worker) release(ctx context.Context, namespace, name, uid string) error {
	cs, err := w.cfg.Runtime.ListContainers(ctx, map[string]string{runtime.LabelPodUID: uid})
	if err != nil {
		return fmt.Errorf("list containers of pod %s/%s: %w", namespace, name, err)
	}
	for _, c := range cs {
		if err := w.cfg.Runtime.RemoveContainer(ctx, c.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return fmt.Errorf("remove container %s: %w", c.ID, err)
		}
	}
	if w.cfg.Network != nil {
		if err := w.cfg.Network.TearDown(ctx, namespace, name, uid); err != nil {
			return fmt.Errorf("tear down network of pod %s/%s: %w", namespace, name, err)
		}
	}
	if w.cfg.Devices != nil {
		if err := w.cfg.Devices.Release(ctx, uid); err != nil {
			return fmt.Errorf("release devices of pod %s/%s: %w", namespace, name, err)
		}
	}
	if w.cfg.Claims != nil {
		if err := w.cfg.Claims.UnprepareResources(ctx, uid); err != nil {
			return fmt.Errorf("unprepare resource claims of pod %s/%s: %w", namespace, name, err)
		}
	}
	if err := w.removeVolumes(uid); err != nil {
		return err
	}
	w.forget(uid)
	return nil
}

// CleanupPod removes what is left of one pod the API no longer has (a
// force delete): its containers, network, devices and volumes, found by the
// pod's namespace and name. A pod this node stopped itself has nothing left,
// and costs one container listing.
func (w *Worker) CleanupPod(ctx context.Context, namespace, name string) error {
	cs, err := w.cfg.Runtime.ListContainers(ctx, map[string]string{
		LabelNode: w.cfg.NodeName, runtime.LabelPodNamespace: namespace, runtime.LabelPodName: name})
	if err != nil {
		return fmt.Errorf("list containers of pod %s/%s: %w", namespace, name, err)
	}
	done := map[string]bool{}
	var errs []error
	for _, c := range cs {
		uid := c.Labels[runtime.LabelPodUID]
		if uid == "" || done[uid] {
			continue
		}
		done[uid] = true
		errs = append(errs, w.release(ctx, namespace, name, uid))
	}
	if w.cfg.Devices != nil {
		// Devices picked at admission, before any container was made,
		// have no container to be found by: free them by name.
		errs = append(errs, w.cfg.Devices.ReleaseGone(namespace, name))
	}
	return errors.Join(errs...)
}

// Cleanup removes everything of pods of this node that the API no longer
// has (force-deleted, or deleted while the agent was down). live holds the
// uids of the pods the API still binds to this node.
func (w *Worker) Cleanup(ctx context.Context, live map[string]bool) error {
	cs, err := w.cfg.Runtime.ListContainers(ctx, map[string]string{LabelNode: w.cfg.NodeName})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	done := map[string]bool{}
	var errs []error
	for _, c := range cs {
		uid := c.Labels[runtime.LabelPodUID]
		if uid == "" || live[uid] || done[uid] {
			continue
		}
		done[uid] = true
		w.log.Info("removing containers of a pod the API no longer has", "pod", c.Labels[runtime.LabelPodNamespace]+"/"+c.Labels[runtime.LabelPodName], "uid", uid)
		if err := w.release(ctx, c.Labels[runtime.LabelPodNamespace], c.Labels[runtime.LabelPodName], uid); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, w.cleanupVolumes(live))
	return errors.Join(errs...)
}

func attempt(c runtime.ContainerStatus) int {
	n, _ := strconv.Atoi(c.Labels[runtime.LabelAttempt])
	return n
}

// latestByName returns, per container name, the container with the highest attempt.
func latestByName(cs []runtime.ContainerStatus) map[string]runtime.ContainerStatus {
	out := map[string]runtime.ContainerStatus{}
	for _, c := range cs {
		name := c.Labels[runtime.LabelContainerName]
		if prev, ok := out[name]; !ok || attempt(c) > attempt(prev) {
			out[name] = c
		}
	}
	return out
}

// previousByName returns, per name, the attempt before the latest.
func previousByName(cs []runtime.ContainerStatus) map[string]runtime.ContainerStatus {
	sort.Slice(cs, func(i, j int) bool { return attempt(cs[i]) > attempt(cs[j]) })
	latest := map[string]bool{}
	out := map[string]runtime.ContainerStatus{}
	for _, c := range cs {
		name := c.Labels[runtime.LabelContainerName]
		if !latest[name] {
			latest[name] = true
			continue
		}
		if _, ok := out[name]; !ok {
			out[name] = c
		}
	}
	return out
}

func (w *Worker) event(ctx context.Context, pod *api.Pod, typ, reason, format string, args ...any) {
	if w.cfg.Recorder == nil {
		return
	}
	w.cfg.Recorder.Eventf(ctx, pod, typ, reason, format, args...)
}

// trace records a span of the pod's trace; flushTrace posts it.
func (w *Worker) trace(st *podState, step string, start time.Time, msg string, details map[string]any) {
	st.spans = append(st.spans, api.TraceSpan{Component: "agent", Step: step, Start: api.MicroTime{Time: start}, End: api.MicroTime{Time: w.cfg.Now()}, Node: w.cfg.NodeName, Message: msg, Details: details})
}

// flushTrace posts the spans the Sync took, in one request: before the
// pod's status is written, so a pod shown Running has its start's spans,
// and when the Sync ends early. A pull, create and start cost one round
// trip to the API server, not three.
func (w *Worker) flushTrace(ctx context.Context, pod *api.Pod, st *podState) {
	if len(st.spans) == 0 {
		return
	}
	spans := st.spans
	st.spans = nil
	if err := w.cfg.Client.AddTrace(ctx, pod.Namespace, pod.Name, spans...); err != nil && !api.IsNotFound(err) {
		w.log.Debug("add trace spans", "pod", api.KeyOf(pod), "err", err)
	}
}

// syncProbes starts probes of running containers and stops those of
// containers that are gone.
func (w *Worker) syncProbes(pod *api.Pod, latest map[string]runtime.ContainerStatus, st *podState) {
	// The pod IP is known here even before the status carrying it is written.
	podIP := w.cfg.NodeIP
	if st.network != nil && !pod.Spec.HostNetwork {
		podIP = st.network.IP
	}
	live := map[string]bool{}
	for _, list := range [][]api.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			if cur, ok := latest[c.Name]; ok && cur.State == runtime.StateRunning {
				live[cur.ID] = true
				w.probes.ensure(pod, c, cur, podIP)
			}
		}
	}
	w.probes.forget(pod.UID, live)
}

// killIfUnhealthy stops a container whose liveness or startup probe has
// failed; the restart policy then decides what happens next.
func (w *Worker) killIfUnhealthy(ctx context.Context, pod *api.Pod, c *api.Container, cur runtime.ContainerStatus) error {
	for _, k := range []probeKind{probeStartup, probeLiveness} {
		r, _, ok := w.probes.result(cur.ID, k)
		if !ok || r != resultFailure {
			continue
		}
		w.event(ctx, pod, api.EventNormal, "Killing", "Container %s failed %s probe, will be restarted", c.Name, k)
		grace := w.grace(pod)
		if p := probeOf(c, k); p != nil && p.TerminationGracePeriodSeconds != nil {
			grace = time.Duration(*p.TerminationGracePeriodSeconds) * time.Second
		}
		w.probes.forgetContainer(cur.ID)
		if err := w.cfg.Runtime.StopContainer(ctx, cur.ID, grace); err != nil {
			return fmt.Errorf("stop unhealthy container %s of pod %s: %w", c.Name, api.KeyOf(pod), err)
		}
		return nil
	}
	return nil
}
