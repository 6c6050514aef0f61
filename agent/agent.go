// Package agent is skiff's node agent, the kubelet of a skiff cluster: it
// registers this machine as a Node, keeps the Node's Ready condition fresh
// (heartbeats), and runs the pods bound to it through a container runtime.
//
// The agent is a control loop like any other: an informer watches the pods
// whose spec.nodeName is this node, every change enqueues the pod's key,
// and a podworker reconciles that pod against the runtime's containers.
// Runtime events (a container exited) enqueue the pod too, and a periodic
// resync removes containers of pods that no longer exist. The agent never
// trusts its memory: a restarted agent finds its containers by label.
package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/usage"
	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/runtime"
)

// Version is the agent version reported in Node status.
const Version = api.Version + "-skiff"

// Config of an agent. Start from DefaultConfig.
type Config struct {
	// NodeName is the Node object name (default: the hostname).
	NodeName string
	// NodeIP is the address other nodes and the API server reach it at.
	NodeIP string
	// Labels added to the Node (beside kubernetes.io/hostname, os, arch).
	Labels map[string]string
	// Taints put on the Node at registration.
	Taints []api.Taint
	// Capacity overrides detected resources (cpu, memory, pods, ...).
	Capacity api.ResourceList
	// Simulated marks a node whose runtime is simulated: no processes.
	Simulated bool
	// DataDir holds pod volumes and agent state.
	DataDir string
	// HeartbeatInterval between Ready condition updates (kubelet: 10 s).
	HeartbeatInterval time.Duration
	// Resync enqueues every pod this often, and cleans orphan containers.
	Resync time.Duration
	// Workers sync different pods in parallel (an image pull blocks one).
	Workers int
	// BaseBackoff and MaxBackoff of container restarts and image pulls.
	BaseBackoff, MaxBackoff time.Duration
	// Network and Devices, or nil (see podworker.Config). The Node's label
	// skiff.dev/pod-network (api.LabelSkiffPodNetwork) says which: "cni"
	// with a Network, "none" without; on a "none" node pods share the
	// node's network, and the scheduler lets no two of them declare the
	// same containerPort there.
	Network podworker.Network
	Devices podworker.DeviceAllocator
	// Claims prepares the pods' ResourceClaims (DRA: agent/dra.Manager),
	// or nil: pods with resource claims cannot start.
	Claims ClaimManager
	// ExtraResources are merged into capacity/allocatable at each
	// heartbeat (device plugins' resources: nvidia.com/gpu).
	ExtraResources func() (capacity, allocatable api.ResourceList)
	// Log, or discard.
	Log *slog.Logger
	// Metrics for the loop, or nil.
	Metrics client.LoopMetrics
	// Listen is the address of the agent's HTTP server, which serves logs
	// and exec to the API server (server.go): "0.0.0.0:10250" on a lab
	// machine, "127.0.0.1:0" for an agent in the server's process; "" runs
	// no server. Its port goes into the Node's daemonEndpoints.
	Listen string
	// TLS is what the server serves with (server.go): the node's serving
	// certificate and the cluster CA as ClientCAs with a client
	// certificate required (pki.NodeCredentials.AgentServerTLS); the
	// handler lets in only the API server's (kube-apiserver-kubelet-client,
	// or group system:masters). Required with Listen.
	TLS *tls.Config
	// GPUMeter samples the node's GPUs (agent/gpu/usage: NVML's sensors,
	// or the simulator's model); nil without GPUs.
	GPUMeter usage.Sampler
	// DCGMExporterListen is the address of the DCGM-exporter-compatible
	// endpoint (dcgmexporter.go): ":9400" as dcgm-exporter's; "" none.
	// Without GPUMeter there is none either.
	DCGMExporterListen string
	// GPUFaults lets the server break and repair simulated GPUs
	// (POST /gpus/{index}/fault, `skiff gpu fault`); nil: no simulated GPUs.
	GPUFaults gpu.FaultInjector
	// DevicesChanged returns a channel that closes at the next change of
	// the node's devices (health, allocations); the agent then writes the
	// Node's annotations and status at once rather than at the next
	// heartbeat, so a failed GPU leaves allocatable within a second. nil:
	// heartbeats only (devices.Manager.Changed has this signature).
	DevicesChanged func() <-chan struct{}
	// Annotations are node annotations the agent owns (GPU topology and
	// allocations), written at registration and after every
	// DevicesChanged; keys it returns are set, others left alone. nil: none.
	Annotations func(ctx context.Context) (map[string]string, error)
	// DeviceLabels are the node labels the devices define now (GPU
	// feature discovery's, which follow the sharing config and MIG),
	// written with the annotations. Keys OwnedLabel accepts that it no
	// longer returns are removed; Labels (the user's) always win. nil: none.
	DeviceLabels func() map[string]string
	// OwnedLabel says which label keys DeviceLabels owns.
	OwnedLabel func(key string) bool
}

// ClaimManager is the kubelet side of DRA (agent/dra.Manager): the
// podworker's ClaimPreparer, and Retain for the resync, which ends the use
// of claims by pods not in active and unprepares claims no pod uses (it
// may block on the drivers).
type ClaimManager interface {
	podworker.ClaimPreparer
	Retain(ctx context.Context, active map[string]bool) error
}

// DefaultConfig fills what can be detected from this machine.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		NodeName:          host,
		NodeIP:            detectIP(),
		HeartbeatInterval: 10 * time.Second, // the kubelet's default nodeStatusUpdateFrequency
		Resync:            time.Minute,
		Workers:           4,
		BaseBackoff:       10 * time.Second,
		MaxBackoff:        5 * time.Minute,
	}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("node name is required"))
	}
	if c.HeartbeatInterval <= 0 {
		errs = append(errs, errors.New("heartbeat interval must be positive"))
	}
	if c.Workers <= 0 {
		errs = append(errs, errors.New("workers must be positive"))
	}
	if c.Listen != "" && (c.TLS == nil || c.TLS.ClientCAs == nil || len(c.TLS.Certificates) == 0) {
		errs = append(errs, errors.New("a TLS serving certificate and client CA are required to serve logs and exec (Config.TLS)"))
	}
	return errors.Join(errs...)
}

// Agent runs one node.
type Agent struct {
	cfg    Config
	c      client.Interface
	rt     runtime.Runtime
	log    *slog.Logger
	worker *podworker.Worker
	pods   *client.Informer
	loop   *client.Loop
	rec    *client.Recorder

	mu sync.Mutex
	// ended holds the uids of ended pods whose devices and network were
	// released (releaseEnded); entries go when the pod leaves the API.
	ended map[string]bool

	srvMu    sync.Mutex
	ln       net.Listener
	dcgmAddr string // the DCGM exporter's address (dcgmexporter.go)

	stats statsSampler // resource usage samples (stats.go)
}

// New builds an agent talking to the API through c and running pods on rt.
func New(cfg Config, c client.Interface, rt runtime.Runtime) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	lg := cfg.Log
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("node", cfg.NodeName)
	a := &Agent{cfg: cfg, c: c, rt: rt, log: lg, ended: map[string]bool{}}
	a.rec = client.NewRecorder(c, "kubelet", cfg.NodeName, lg)
	var claims podworker.ClaimPreparer
	if cfg.Claims != nil {
		claims = cfg.Claims
	}
	a.worker = podworker.New(podworker.Config{
		NodeName: cfg.NodeName, NodeIP: cfg.NodeIP, Client: c, Runtime: rt, Recorder: a.rec, Simulated: cfg.Simulated,
		Network: cfg.Network, Devices: cfg.Devices, Claims: claims,
		VolumeDir: volumeDir(cfg.DataDir), SeccompDir: seccompDir(cfg.DataDir), RootDir: cfg.DataDir,
		BaseBackoff: cfg.BaseBackoff, MaxBackoff: cfg.MaxBackoff, Log: lg,
		Enqueue: func(ns, name string) { a.loop.Enqueue(api.Key(ns, name)) },
	})
	podKind := api.MustKindOf(&api.Pod{})
	a.pods = client.NewInformer(c, podKind, "", api.ListOptions{FieldSelector: "spec.nodeName=" + cfg.NodeName}, lg)
	opts := client.DefaultLoopOptions("agent")
	opts.Workers, opts.Resync, opts.Log, opts.Metrics = cfg.Workers, cfg.Resync, lg, cfg.Metrics
	a.loop = client.NewLoop(client.ReconcilerFunc(a.reconcile), opts)
	a.loop.SetResyncFunc(a.pods.Keys)
	enqueue := func(o api.Object) { a.loop.Enqueue(api.KeyOf(o)) }
	a.pods.AddHandler(client.Handler{
		OnAdd:    enqueue,
		OnUpdate: func(_, o api.Object) { enqueue(o) },
		OnDelete: enqueue,
	})
	return a, nil
}

// seccompDir is where the node's seccomp profiles are (DATA-DIR/seccomp,
// the kubelet's /var/lib/kubelet/seccomp): a pod's seccompProfile of type
// Localhost names a file below it.
func seccompDir(dataDir string) string {
	if dataDir == "" {
		return ""
	}
	return dataDir + "/seccomp"
}

func volumeDir(dataDir string) string {
	if dataDir == "" {
		return ""
	}
	return dataDir + "/pods"
}

// Runtime is the container runtime the agent runs pods on.
func (a *Agent) Runtime() runtime.Runtime { return a.rt }

// Run registers the node and runs until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.Listen(); err != nil {
		return err
	}
	if err := a.register(ctx); err != nil {
		a.closeListener()
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return nil // stopped while registering: a clean stop
		}
		return err
	}
	var wg sync.WaitGroup
	run := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	run(func() { a.pods.Run(ctx) })
	run(func() { a.rec.Run(ctx) })
	run(func() { a.heartbeat(ctx) })
	run(func() { a.leaseLoop(ctx) }) // lease.go
	run(func() { a.statsLoop(ctx) }) // stats.go
	run(func() { a.deviceUpdates(ctx) })
	run(func() { a.runtimeEvents(ctx) })
	run(func() { a.serve(ctx) })
	run(func() { a.serveDCGM(ctx) }) // dcgmexporter.go
	if !a.pods.WaitForSync(ctx) {
		wg.Wait()
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil // stopped before the first list of pods: a clean stop
		}
		return ctx.Err()
	}
	// Adopt: remove leftovers of pods deleted while we were away; the
	// informer's initial list has enqueued every live pod already.
	if err := a.cleanup(ctx); err != nil {
		a.log.Warn("clean up containers of deleted pods", "err", err)
	}
	run(func() { a.cleanupLoop(ctx) })
	a.log.Info("node agent running", "simulated", a.cfg.Simulated)
	err := a.loop.Run(ctx)
	a.worker.Close()
	wg.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (a *Agent) reconcile(ctx context.Context, key string) error {
	ns, name := client.SplitKey(key)
	o, ok := a.pods.Get(ns, name)
	if !ok {
		// Gone from the API. After a normal delete the node stopped it and
		// nothing is left; after a force delete, remove what is. (A pod of
		// the same name created since has its own key event and uid.)
		return a.worker.CleanupPod(ctx, ns, name)
	}
	pod := o.(*api.Pod)
	after, err := a.worker.Sync(ctx, pod)
	if err != nil {
		return err
	}
	if pod.Status.Phase == api.PodSucceeded || pod.Status.Phase == api.PodFailed {
		if err := a.releaseEnded(ctx, pod); err != nil {
			return err
		}
	}
	if after > 0 {
		return client.RequeueAfter(after)
	}
	return nil
}

// releaseEnded frees what a pod that ended (Succeeded or Failed) held: it
// never runs again, so its devices (GPUs) are free for the next pod at once,
// as the scheduler already counts them, and its pod IP goes back to the
// node's range, as the kubelet tears down a finished pod's sandbox. Done
// once per pod; the containers stay for `skiff logs`.
func (a *Agent) releaseEnded(ctx context.Context, pod *api.Pod) error {
	a.mu.Lock()
	done := a.ended[pod.UID]
	a.mu.Unlock()
	if done {
		return nil
	}
	if a.cfg.Devices != nil {
		if err := a.cfg.Devices.Release(ctx, pod.UID); err != nil {
			return err
		}
	}
	if a.cfg.Claims != nil {
		if err := a.cfg.Claims.UnprepareResources(ctx, pod.UID); err != nil {
			return fmt.Errorf("unprepare resource claims of ended pod %s: %w", api.KeyOf(pod), err)
		}
	}
	if a.cfg.Network != nil && !pod.Spec.HostNetwork {
		if err := a.cfg.Network.TearDown(ctx, pod.Namespace, pod.Name, pod.UID); err != nil {
			return fmt.Errorf("tear down network of ended pod %s: %w", api.KeyOf(pod), err)
		}
	}
	a.mu.Lock()
	a.ended[pod.UID] = true
	a.mu.Unlock()
	return nil
}

func (a *Agent) cleanup(ctx context.Context) error {
	live := map[string]bool{}
	active := map[string]bool{} // live and not ended: may hold devices
	for _, o := range a.pods.List() {
		live[o.GetObjectMeta().UID] = true
		if p := o.(*api.Pod); p.Status.Phase != api.PodSucceeded && p.Status.Phase != api.PodFailed {
			active[p.UID] = true
		}
	}
	a.mu.Lock()
	for uid := range a.ended {
		if !live[uid] {
			delete(a.ended, uid)
		}
	}
	a.mu.Unlock()
	err := a.worker.Cleanup(ctx, live)
	if a.cfg.Devices != nil {
		err = errors.Join(err, a.cfg.Devices.Retain(active))
	}
	if a.cfg.Claims != nil {
		err = errors.Join(err, a.cfg.Claims.Retain(ctx, active))
	}
	if a.cfg.Network != nil {
		// Pod networks whose containers are gone already (or never came):
		// the informer is read again, after the network's record, so that
		// a pod added meanwhile stays.
		err = errors.Join(err, a.cfg.Network.Retain(ctx, func() map[string]bool {
			for _, o := range a.pods.List() {
				live[o.GetObjectMeta().UID] = true
			}
			return live
		}))
	}
	return err
}

func (a *Agent) cleanupLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.cleanup(ctx); err != nil {
				a.log.Warn("clean up containers of deleted pods", "err", err)
			}
		}
	}
}

// runtimeEvents enqueues the pod of every container event.
func (a *Agent) runtimeEvents(ctx context.Context) {
	for ev := range a.rt.Events(ctx) {
		if ev.Type == runtime.EventResync {
			for _, k := range a.pods.Keys() {
				a.loop.Enqueue(k)
			}
			continue
		}
		ns, name := ev.Labels[runtime.LabelPodNamespace], ev.Labels[runtime.LabelPodName]
		if name != "" {
			a.loop.Enqueue(api.Key(ns, name))
		}
		if ev.Type == runtime.EventStarted {
			a.stats.kick(ev.ID) // stats.go: its first samples now, not at the next tick
		}
	}
}

// register creates or updates this node's Node object.
func (a *Agent) register(ctx context.Context) error {
	nodeKind := api.MustKindOf(&api.Node{})
	for {
		cur, err := a.c.Get(ctx, nodeKind, "", a.cfg.NodeName)
		switch {
		case api.IsNotFound(err):
			n := &api.Node{}
			n.Name = a.cfg.NodeName
			n.Labels = a.labels()
			a.setAnnotations(ctx, n)
			n.Spec.Taints = a.cfg.Taints
			n.Status = a.status(ctx, nil)
			_, err = a.c.Create(ctx, n)
			if api.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("register node %s: %w", a.cfg.NodeName, err)
			}
			a.log.Info("registered node")
			return nil
		case err != nil:
			return fmt.Errorf("register node %s: %w", a.cfg.NodeName, err)
		}
		n := api.Clone(cur.(*api.Node))
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for k, v := range a.labels() {
			n.Labels[k] = v
		}
		a.setAnnotations(ctx, n)
		up, err := a.c.Update(ctx, n)
		if api.IsConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("update node %s: %w", a.cfg.NodeName, err)
		}
		return a.writeStatus(ctx, up.(*api.Node))
	}
}

func (a *Agent) labels() map[string]string {
	l := map[string]string{
		api.LabelHostname: a.cfg.NodeName,
		api.LabelOS:       goruntime.GOOS,
		api.LabelArch:     goruntime.GOARCH,
	}
	if a.cfg.Simulated {
		l[api.LabelSkiffSimulated] = "true"
	}
	// The scheduler reads it: without a pod network a containerPort is a
	// port of the node (api.LabelSkiffPodNetwork).
	l[api.LabelSkiffPodNetwork] = api.PodNetworkCNI
	if a.cfg.Network == nil {
		l[api.LabelSkiffPodNetwork] = api.PodNetworkNone
	}
	for k, v := range a.cfg.Labels {
		l[k] = v
	}
	return l
}

// heartbeat refreshes the Ready condition and resources.
func (a *Agent) heartbeat(ctx context.Context) {
	t := time.NewTicker(a.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		o, err := a.c.Get(ctx, api.MustKindOf(&api.Node{}), "", a.cfg.NodeName)
		if api.IsNotFound(err) {
			// Someone deleted our Node: register again, as the kubelet does.
			if err := a.register(ctx); err != nil {
				a.log.Warn("re-register node", "err", err)
			}
			continue
		}
		if err != nil {
			a.log.Warn("heartbeat", "err", err)
			continue
		}
		if err := a.writeStatus(ctx, o.(*api.Node)); err != nil && ctx.Err() == nil {
			a.log.Warn("heartbeat", "err", err)
		}
	}
}

func (a *Agent) writeStatus(ctx context.Context, cur *api.Node) error {
	n := api.Clone(cur)
	n.Status = a.status(ctx, &cur.Status)
	_, err := a.c.UpdateStatus(ctx, n)
	return err
}

// status computes the Node status: resources, Ready, addresses, versions.
func (a *Agent) status(ctx context.Context, prev *api.NodeStatus) api.NodeStatus {
	now := api.NewTime(time.Now())
	capacity := api.ResourceList{
		api.ResourceCPU:    *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI),
		api.ResourceMemory: *resource.NewQuantity(memTotal(), resource.BinarySI),
		api.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
	for k, v := range a.cfg.Capacity {
		capacity[k] = v
	}
	alloc := api.ResourceList{}
	for k, v := range capacity {
		alloc[k] = v
	}
	if a.cfg.ExtraResources != nil {
		c, al := a.cfg.ExtraResources()
		for k, v := range c {
			capacity[k] = v
		}
		for k, v := range al {
			alloc[k] = v
		}
	}
	rtName, rtVersion := "unknown", ""
	if v, err := a.rt.Version(ctx); err == nil {
		rtName, rtVersion = v.Name, v.Version
	}
	msg := "skiff agent is posting ready status"
	if a.cfg.Simulated {
		msg += " (simulated node: pods run on the fake runtime, no processes)"
	}
	ready := api.NodeCondition{Type: api.NodeReady, Status: api.ConditionTrue, Reason: "KubeletReady", Message: msg,
		LastHeartbeatTime: now, LastTransitionTime: now}
	if prev != nil {
		for _, c := range prev.Conditions {
			if c.Type == api.NodeReady && c.Status == api.ConditionTrue {
				ready.LastTransitionTime = c.LastTransitionTime
			}
		}
	}
	host, _ := os.Hostname()
	return api.NodeStatus{
		Capacity: capacity, Allocatable: alloc,
		Conditions:      []api.NodeCondition{ready},
		Addresses:       []api.NodeAddress{{Type: "InternalIP", Address: a.cfg.NodeIP}, {Type: "Hostname", Address: host}},
		DaemonEndpoints: api.NodeDaemonEndpoints{KubeletEndpoint: api.DaemonEndpoint{Port: a.port()}},
		NodeInfo: api.NodeSystemInfo{
			OperatingSystem: goruntime.GOOS, Architecture: goruntime.GOARCH,
			KernelVersion: kernelVersion(), OSImage: osImage(),
			ContainerRuntimeVersion: rtName + "://" + rtVersion, KubeletVersion: Version,
			// The machine's identity, as the kubelet reports it.
			MachineID:  readID("/etc/machine-id"),
			SystemUUID: readID("/sys/class/dmi/id/product_uuid"),
			BootID:     readID("/proc/sys/kernel/random/boot_id"),
		},
	}
}

// detectIP picks the address of the default route's interface, or loopback.
func detectIP() string {
	conn, err := net.Dial("udp", "192.0.2.1:9") // no packet is sent: UDP connect only picks a route
	if err != nil {
		return "127.0.0.1"
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP.String()
}

func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kb int64
	for _, line := range splitLines(string(b)) {
		if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
			return kb * 1024
		}
	}
	return 0
}

// readID reads a machine identity file (machine-id, the DMI product UUID,
// the boot id) in lower case, as the kubelet reports them; "" when it is
// unreadable (the product UUID needs root).
func readID(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.ToLower(string(trimNL(b)))
}

func kernelVersion() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return string(trimNL(b))
}

func osImage() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return goruntime.GOOS
	}
	for _, line := range splitLines(string(b)) {
		if len(line) > 12 && line[:12] == "PRETTY_NAME=" {
			if s, err := strconv.Unquote(line[12:]); err == nil {
				return s
			}
			return line[12:]
		}
	}
	return goruntime.GOOS
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
