package devices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/runtime"
)

const (
	// DefaultDir is where skiff's manager listens and plugins put their
	// sockets (the kubelet uses /var/lib/kubelet/device-plugins).
	DefaultDir = "/var/lib/skiff/device-plugins"
	// SocketName is the manager's Registration socket in the directory.
	SocketName = "kubelet.sock"
	// CheckpointName is the file of allocations in the directory.
	CheckpointName = "skiff_checkpoint.json"
)

// Errors callers can branch on with errors.Is.
var (
	// ErrInsufficient: not enough free healthy devices for a container.
	ErrInsufficient = errors.New("insufficient devices")
	// ErrNoPlugin: the resource's plugin is not registered (now).
	ErrNoPlugin = errors.New("no device plugin registered")
)

// Config of a Manager.
type Config struct {
	// Dir holds kubelet.sock, the plugins' sockets and the checkpoint.
	// Unix socket paths are limited to 107 bytes, so keep it short.
	Dir string
	// Log, or discard.
	Log *slog.Logger
	// DialTimeout bounds dialing a plugin and each call that is not a
	// stream (5 s: plugins are local; a slow one should fail, not hang a pod).
	DialTimeout time.Duration
	// RetainGrace keeps allocations younger than this from Retain: a pod
	// the caller listed just before it was created and allocated is not
	// freed by a resync that raced with it (30 s: far longer than that race).
	RetainGrace time.Duration
	// Unavailable returns, for a resource, the devices (by ID) that a
	// holding elsewhere rules out, to who holds it: the GPUs that DRA
	// claims prepared (agent/dra/gpudriver Driver.Held), a device of
	// another resource on the same GPU (a whole GPU against its
	// replicas), so one GPU inventory serves every API and sharing mode.
	// held is the manager's own allocations. They are never picked, and
	// not allocatable. It is called under the manager's lock: it must not
	// call back into the manager. nil: none.
	Unavailable func(resource string, held []Holding) map[string]string
	// Confirm makes a pick safe before it is recorded: reserve calls it
	// with the devices it picked for a container, without the manager's
	// lock (one pick at a time), then asks Unavailable again under the
	// lock, records the devices only when they are all still free, and
	// picks again otherwise. It must bring Unavailable up to date with
	// every holder that may have taken the devices meanwhile (agent/dra/
	// gpudriver Driver.Withdraw: the GPUs leave the node's ResourceSlice,
	// then the claims are read afresh). release is called once the pick
	// is recorded or given up. An error fails that Allocate (retried with
	// the pod). nil: a pick is recorded at once.
	Confirm func(ctx context.Context, resource string, ids []string) (release func(), err error)
}

// maxPicks bounds how often reserve picks again when Confirm brought news
// of other holders (each time, a device it picked was taken).
const maxPicks = 8

// DefaultConfig listens in DefaultDir.
func DefaultConfig() Config {
	return Config{Dir: DefaultDir, DialTimeout: 5 * time.Second, RetainGrace: 30 * time.Second}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("device plugin directory is required"))
	}
	if n := len(filepath.Join(c.Dir, SocketName)); n > 107 {
		errs = append(errs, fmt.Errorf("device plugin directory %q is too long for a unix socket path (%d > 107 bytes)", c.Dir, n))
	}
	if c.DialTimeout <= 0 {
		errs = append(errs, errors.New("dial timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Manager is the device manager: the Registration server, one client per
// plugin, and the allocations. Safe for concurrent use.
type Manager struct {
	pluginapi.UnimplementedRegistrationServer

	cfg Config
	log *slog.Logger

	reserveMu sync.Mutex // reserve: one at a time
	mu        sync.Mutex
	resources map[string]*plugin // by resource name; kept after the plugin goes
	ck        checkpoint
	responses map[respKey]podworker.Allocation // plugin answers, not checkpointed
	changed   chan struct{}                    // closed and replaced on every change
	started   time.Time                        // entries older than this came from the checkpoint (Retain)
	stopped   bool
	callLog   *callLog // the gRPC calls, for the dashboard (calllog.go)

	srv    *grpc.Server
	ctx    context.Context // the manager's own, cancelled by Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var (
	_ podworker.DeviceAllocator = (*Manager)(nil)
	_ podworker.DeviceAdmitter  = (*Manager)(nil)
)

type respKey struct{ uid, container string }

// plugin is one registered resource.
type plugin struct {
	resource string
	endpoint string // socket path
	gen      int    // bumps on every registration
	conn     *grpc.ClientConn
	client   pluginapi.DevicePluginClient
	opts     *pluginapi.DevicePluginOptions
	devices  map[string]*pluginapi.Device // by ID; nil when the plugin is gone
}

// New builds a Manager and reads its checkpoint; Start serves.
func New(cfg Config) (*Manager, error) {
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultConfig().DialTimeout
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("device manager config: %w", err)
	}
	lg := cfg.Log
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("device plugin directory: %w", err)
	}
	ck, err := readCheckpoint(filepath.Join(cfg.Dir, CheckpointName))
	if err != nil {
		return nil, err
	}
	return &Manager{
		cfg: cfg, log: lg.With("component", "devicemanager"),
		resources: map[string]*plugin{},
		ck:        ck,
		responses: map[respKey]podworker.Allocation{},
		changed:   make(chan struct{}),
		callLog:   newCallLog(),
		started:   time.Now(),
	}, nil
}

// Dir is the plugin directory.
func (m *Manager) Dir() string { return m.cfg.Dir }

// SocketPath is the Registration socket plugins call.
func (m *Manager) SocketPath() string { return filepath.Join(m.cfg.Dir, SocketName) }

// Start listens on kubelet.sock and serves Registration until Stop. A
// stale socket from an earlier run is replaced. The plugins' streams run
// under the manager's own context, not ctx (which only bounds starting).
func (m *Manager) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	sock := m.SocketPath()
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", sock, err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", sock, err)
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.srv = grpc.NewServer()
	pluginapi.RegisterRegistrationServer(m.srv, m)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := m.srv.Serve(ln); err != nil {
			m.log.Warn("registration server stopped", "err", err)
		}
	}()
	m.log.Info("device manager listening", "socket", sock)
	return nil
}

// Stop stops serving, closes the plugin connections and waits for the
// streams to end. Safe to call twice.
func (m *Manager) Stop() {
	m.mu.Lock()
	if m.stopped || m.srv == nil {
		m.stopped = true
		m.mu.Unlock()
		return
	}
	m.stopped = true
	m.mu.Unlock()
	m.srv.Stop()
	m.cancel()
	m.mu.Lock()
	for _, p := range m.resources {
		if p.conn != nil {
			p.conn.Close()
		}
	}
	m.mu.Unlock()
	m.wg.Wait()
	os.Remove(m.SocketPath())
}

// Register is the Registration service: a plugin says it is there.
func (m *Manager) Register(ctx context.Context, req *pluginapi.RegisterRequest) (_ *pluginapi.Empty, err error) {
	regStart := time.Now()
	defer func() {
		m.record(req.GetResourceName(), "Register", FromPlugin, "", regStart,
			map[string]any{"version": req.GetVersion(), "endpoint": req.GetEndpoint(), "resourceName": req.GetResourceName()}, nil, err)
	}()
	if err := validateRegister(req, m.cfg.Dir); err != nil {
		m.log.Warn("device plugin registration rejected", "resource", req.GetResourceName(), "err", err)
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	endpoint := filepath.Join(m.cfg.Dir, req.Endpoint)
	conn, err := grpc.NewClient("unix://"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "dial plugin %s: %v", endpoint, err)
	}
	client := pluginapi.NewDevicePluginClient(conn)
	cctx, cancel := context.WithTimeout(ctx, m.cfg.DialTimeout)
	optStart := time.Now()
	opts, err := client.GetDevicePluginOptions(cctx, &pluginapi.Empty{}, grpc.WaitForReady(true))
	cancel()
	m.record(req.ResourceName, "GetDevicePluginOptions", FromManager, "", optStart, nil,
		map[string]any{"getPreferredAllocationAvailable": opts.GetGetPreferredAllocationAvailable(), "preStartRequired": opts.GetPreStartRequired()}, err)
	if err != nil {
		conn.Close()
		return nil, status.Errorf(codes.Unavailable, "register %s: plugin at %s does not answer GetDevicePluginOptions: %v", req.ResourceName, endpoint, err)
	}

	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		conn.Close()
		return nil, status.Error(codes.Unavailable, "device manager is stopping")
	}
	p := m.resources[req.ResourceName]
	if p == nil {
		p = &plugin{resource: req.ResourceName}
		m.resources[req.ResourceName] = p
	}
	if p.conn != nil {
		p.conn.Close() // the old registration's stream ends; gen tells it apart
	}
	p.gen++
	p.endpoint, p.conn, p.client, p.opts, p.devices = endpoint, conn, client, opts, map[string]*pluginapi.Device{}
	gen := p.gen
	m.notifyLocked()
	m.wg.Add(1)
	m.mu.Unlock()

	m.log.Info("device plugin registered", "resource", req.ResourceName, "endpoint", endpoint,
		"preferredAllocation", opts.GetGetPreferredAllocationAvailable(), "preStart", opts.GetPreStartRequired())
	go func() {
		defer m.wg.Done()
		m.listAndWatch(req.ResourceName, gen, client)
	}()
	return &pluginapi.Empty{}, nil
}

// validateRegister checks a request, as the kubelet does.
func validateRegister(req *pluginapi.RegisterRequest, dir string) error {
	var errs []error
	if !slices.Contains(pluginapi.SupportedVersions[:], req.GetVersion()) {
		errs = append(errs, fmt.Errorf("unsupported device plugin API version %q (want %s)", req.GetVersion(), strings.Join(pluginapi.SupportedVersions[:], ", ")))
	}
	if err := ValidateResourceName(req.GetResourceName()); err != nil {
		errs = append(errs, err)
	}
	ep := req.GetEndpoint()
	switch {
	case ep == "":
		errs = append(errs, errors.New("endpoint is required (the name of the plugin's socket in the plugin directory)"))
	case filepath.Base(ep) != ep || ep == "." || ep == "..":
		errs = append(errs, fmt.Errorf("endpoint %q must be a socket name in %s, not a path", ep, dir))
	case ep == SocketName:
		errs = append(errs, fmt.Errorf("endpoint %q is the manager's own socket", ep))
	default:
		if fi, err := os.Stat(filepath.Join(dir, ep)); err != nil {
			errs = append(errs, fmt.Errorf("endpoint %q: %w", ep, err))
		} else if fi.Mode()&os.ModeSocket == 0 {
			errs = append(errs, fmt.Errorf("endpoint %q in %s is not a unix socket", ep, dir))
		}
	}
	return errors.Join(errs...)
}

// ValidateResourceName checks an extended resource name: "vendor.domain/name",
// a qualified name with a domain that is not Kubernetes' own.
func ValidateResourceName(name string) error {
	domain, _, ok := strings.Cut(name, "/")
	if !ok || domain == "" {
		return fmt.Errorf("resource name %q must be an extended resource name: domain/name, like nvidia.com/gpu", name)
	}
	if msgs := validation.IsQualifiedName(name); len(msgs) > 0 {
		return fmt.Errorf("resource name %q: %s", name, strings.Join(msgs, "; "))
	}
	if domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") || domain == "k8s.io" || strings.HasSuffix(domain, ".k8s.io") {
		return fmt.Errorf("resource name %q: domain %s is reserved for Kubernetes", name, domain)
	}
	if strings.HasPrefix(name, "requests.") {
		return fmt.Errorf("resource name %q: the prefix requests. is reserved for quotas", name)
	}
	return nil
}

// listAndWatch keeps the device list of one registration until its stream
// ends; then, unless a newer registration took over, the resource drops to
// no devices.
func (m *Manager) listAndWatch(resourceName string, gen int, client pluginapi.DevicePluginClient) {
	log := m.log.With("resource", resourceName)
	stream, err := client.ListAndWatch(m.ctx, &pluginapi.Empty{})
	if err == nil {
		for {
			var resp *pluginapi.ListAndWatchResponse
			resp, err = stream.Recv()
			if err != nil {
				break
			}
			m.record(resourceName, "ListAndWatch", FromPlugin, "", time.Now(), nil, deviceList(resp), nil)
			devs := make(map[string]*pluginapi.Device, len(resp.Devices))
			for _, d := range resp.Devices {
				devs[d.ID] = d
			}
			m.mu.Lock()
			p := m.resources[resourceName]
			if p == nil || p.gen != gen {
				m.mu.Unlock()
				return
			}
			p.devices = devs
			m.notifyLocked()
			m.mu.Unlock()
			log.Debug("device list", "devices", len(devs), "healthy", countHealthy(devs))
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.resources[resourceName]
	if p == nil || p.gen != gen {
		return
	}
	if m.ctx.Err() == nil {
		log.Warn("device plugin went away; its devices are gone until it registers again", "err", err)
	}
	p.devices = nil
	if p.conn != nil {
		p.conn.Close()
	}
	p.conn, p.client = nil, nil
	m.notifyLocked()
}

func countHealthy(devs map[string]*pluginapi.Device) int {
	n := 0
	for _, d := range devs {
		if d.Health == pluginapi.Healthy {
			n++
		}
	}
	return n
}

// notifyLocked wakes every Wait.
func (m *Manager) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// Changed returns a channel that closes at the next change of devices,
// health or allocations (then call Changed again).
func (m *Manager) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// Wait blocks until cond holds for the current state or ctx ends.
func (m *Manager) Wait(ctx context.Context, cond func(Snapshot) bool) error {
	for {
		ch := m.Changed()
		if cond(m.Snapshot()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// ResourceState is one resource in a Snapshot.
type ResourceState struct {
	// Registered is false once the plugin went away.
	Registered bool
	// Devices by ID, with health (pluginapi.Healthy or Unhealthy).
	Devices map[string]string
	// Allocated device IDs, to the pod holding them ("ns/name").
	Allocated map[string]string
}

// Snapshot is a copy of the manager's state.
type Snapshot map[string]ResourceState

// Snapshot returns a copy of the current state, by resource name.
func (m *Manager) Snapshot() Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := Snapshot{}
	for name, p := range m.resources {
		rs := ResourceState{Registered: p.devices != nil, Devices: map[string]string{}, Allocated: map[string]string{}}
		for id, d := range p.devices {
			rs.Devices[id] = d.Health
		}
		out[name] = rs
	}
	for _, e := range m.ck.Entries {
		rs, ok := out[e.Resource]
		if !ok {
			rs = ResourceState{Devices: map[string]string{}, Allocated: map[string]string{}}
			out[e.Resource] = rs
		}
		for _, id := range e.DeviceIDs {
			rs.Allocated[id] = e.Namespace + "/" + e.PodName
		}
	}
	return out
}

// Holding is one container's devices of one resource.
type Holding struct {
	Resource  string
	Namespace string
	Pod       string
	Container string
	DeviceIDs []string
}

// Holdings lists every allocation in the checkpoint: who holds which
// devices (the GPU views and the usage model's holders).
func (m *Manager) Holdings() []Holding {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.holdingsLocked()
}

func (m *Manager) holdingsLocked() []Holding {
	out := make([]Holding, 0, len(m.ck.Entries))
	for _, e := range m.ck.Entries {
		out = append(out, Holding{Resource: e.Resource, Namespace: e.Namespace, Pod: e.PodName,
			Container: e.Container, DeviceIDs: slices.Clone(e.DeviceIDs)})
	}
	return out
}

// Resources is the node's capacity and allocatable for the plugins'
// resources: every device, and the healthy ones. A resource whose plugin
// went away reports 0 (the scheduler stops placing pods there). It has the
// signature of agent.Config.ExtraResources.
func (m *Manager) Resources() (capacity, allocatable api.ResourceList) {
	m.mu.Lock()
	defer m.mu.Unlock()
	capacity, allocatable = api.ResourceList{}, api.ResourceList{}
	for name, p := range m.resources {
		capacity[name] = *resource.NewQuantity(int64(len(p.devices)), resource.DecimalSI)
		n := countHealthy(p.devices)
		for id := range m.unavailableLocked(name) {
			if d, ok := p.devices[id]; ok && d.Health == pluginapi.Healthy {
				n--
			}
		}
		allocatable[name] = *resource.NewQuantity(int64(n), resource.DecimalSI)
	}
	return capacity, allocatable
}

// requests are the device plugin resources a container asks for, whole units.
func (m *Manager) requests(c *api.Container) (map[string]int, error) {
	out := map[string]int{}
	for name, q := range c.Resources.Limits {
		if !strings.Contains(name, "/") || strings.HasPrefix(name, "kubernetes.io/") {
			continue
		}
		m.mu.Lock()
		_, known := m.resources[name]
		m.mu.Unlock()
		if !known {
			continue // not a device plugin resource on this node (the kubelet ignores those too)
		}
		// Amounts, not Value(): 1e400 devices are not 0 devices.
		n, inRange := api.ResourceAmount(name, q)
		if _, whole := q.AsScale(0); !whole || n < 0 {
			return nil, fmt.Errorf("%s: %s is not a whole number of devices", name, q.String())
		}
		if !inRange {
			return nil, fmt.Errorf("%s: %s devices is more than any node has", name, q.String())
		}
		if n > 0 {
			out[name] = int(n)
		}
	}
	return out, nil
}

// Allocate gives container c of pod its devices: the same ones as before
// when it has some already (idempotent per pod uid and container), or free
// healthy ones, reserved in the checkpoint before the plugin is called.
func (m *Manager) Allocate(ctx context.Context, pod *api.Pod, c *api.Container) (podworker.Allocation, error) {
	reqs, err := m.requests(c)
	if err != nil {
		return podworker.Allocation{}, fmt.Errorf("allocate for pod %s container %s: %w", api.KeyOf(pod), c.Name, err)
	}
	key := respKey{pod.UID, c.Name}
	names := make([]string, 0, len(reqs))
	for name := range reqs {
		names = append(names, name)
	}
	sort.Strings(names)

	out := podworker.Allocation{Env: map[string]string{}, Devices: map[string][]string{}, Trace: map[string]any{}}
	m.mu.Lock()
	if cached, ok := m.responses[key]; ok && m.ck.holds(pod.UID, c.Name, names) {
		m.mu.Unlock()
		return cached, nil
	}
	m.mu.Unlock()
	for _, name := range names {
		ids, fresh, err := m.reserve(ctx, pod, c.Name, name, reqs[name])
		if err != nil {
			return podworker.Allocation{}, fmt.Errorf("allocate %d %s for pod %s container %s: %w", reqs[name], name, api.KeyOf(pod), c.Name, err)
		}
		start := time.Now()
		resp, opts, err := m.callAllocate(ctx, name, ids, api.KeyOf(pod), c.Name)
		if err != nil {
			if fresh {
				m.unreserve(pod.UID, c.Name, name)
			}
			if refused(err) {
				// The kubelet's words (admission_failure_handler): the pod
				// fails with UnexpectedAdmissionError, never retried.
				return podworker.Allocation{}, &podworker.AdmissionError{
					Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", errors.Unwrap(err))}
			}
			return podworker.Allocation{}, fmt.Errorf("allocate %s for pod %s container %s: %w", name, api.KeyOf(pod), c.Name, err)
		}
		if opts.GetPreStartRequired() {
			if err := m.preStart(ctx, name, ids, api.KeyOf(pod)); err != nil {
				return podworker.Allocation{}, fmt.Errorf("pre-start %s for pod %s container %s: %w", name, api.KeyOf(pod), c.Name, err)
			}
		}
		merge(&out, name, ids, resp)
		out.Trace[name] = map[string]any{
			"request":     ids,
			"response":    summary(resp),
			"roundTripMs": float64(time.Since(start).Microseconds()) / 1000,
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ck.holds(pod.UID, c.Name, names) {
		return podworker.Allocation{}, fmt.Errorf("allocate for pod %s container %s: the pod's devices were released meanwhile", api.KeyOf(pod), c.Name)
	}
	m.responses[key] = out
	return out, nil
}

// refused reports whether a plugin's Allocate error is its answer (the
// request is wrong: codes Unknown, as a plain Go error comes back, and
// InvalidArgument) rather than a passing failure to reach it.
func refused(err error) bool {
	st, ok := status.FromError(errors.Unwrap(err))
	return ok && (st.Code() == codes.Unknown || st.Code() == codes.InvalidArgument)
}

// Admit allocates the devices of every container of pod (init containers
// first), as the kubelet's device manager does when it admits a pod. A
// plugin's refusal is a *podworker.AdmissionError: the pod fails. Each
// container's allocation is kept (Allocate is idempotent), so a second
// Admit, and the Allocate of each container later, answer the same.
func (m *Manager) Admit(ctx context.Context, pod *api.Pod) error {
	for _, cs := range [][]api.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			reqs, err := m.requests(&cs[i])
			if err != nil || len(reqs) == 0 {
				continue // nothing of this node's plugins: Allocate says why later
			}
			if _, err := m.Allocate(ctx, pod, &cs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// reserve returns the devices of (pod, container) for a resource: those in
// the checkpoint, or n new ones it records there. fresh is true for new ones.
// New ones are picked (choose), confirmed (Config.Confirm) and recorded only
// when still free then (recordPick); else picked again.
func (m *Manager) reserve(ctx context.Context, pod *api.Pod, container, name string, n int) (ids []string, fresh bool, err error) {
	// One reservation at a time, as the kubelet admits one pod at a time:
	// the plugin's preferred choice is made over what is really free (two
	// at once would both be told the same least-used GPU).
	m.reserveMu.Lock()
	defer m.reserveMu.Unlock()
	for range maxPicks {
		ids, recorded, err := m.choose(ctx, pod, container, name, n)
		if err != nil || recorded {
			return ids, false, err
		}
		release := func() {}
		if m.cfg.Confirm != nil {
			if release, err = m.cfg.Confirm(ctx, name, ids); err != nil {
				return nil, false, fmt.Errorf("confirm %s %v: %w", name, ids, err)
			}
		}
		ok, err := m.recordPick(pod, container, name, ids)
		release() // recorded (the checkpoint holds them now) or given up
		if err != nil {
			return nil, false, err
		}
		if ok {
			return ids, true, nil
		}
		m.log.Info("devices taken by another holder while being picked; picking again", "resource", name, "devices", ids, "pod", api.KeyOf(pod))
	}
	return nil, false, fmt.Errorf("%w: %s: the devices picked were taken by other holders %d times in a row", ErrInsufficient, name, maxPicks)
}

// choose picks n free devices for (pod, container) and resource, or
// returns those the checkpoint holds for them already (recorded).
func (m *Manager) choose(ctx context.Context, pod *api.Pod, container, name string, n int) (ids []string, recorded bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.ck.find(pod.UID, container, name); e != nil {
		return slices.Clone(e.DeviceIDs), true, nil
	}
	free, healthy, p, err := m.freeLocked(name)
	if err != nil {
		return nil, false, err
	}
	if len(free) < n {
		return nil, false, fmt.Errorf("%w: %s wants %d, %d free of %d healthy", ErrInsufficient, name, n, len(free), healthy)
	}
	var preferred []string
	if p.opts.GetGetPreferredAllocationAvailable() && n < len(free) {
		client := p.client
		m.mu.Unlock()
		preferred = m.preferred(ctx, name, client, free, n, api.KeyOf(pod))
		m.mu.Lock()
		if e := m.ck.find(pod.UID, container, name); e != nil { // a concurrent call for the same container won
			return slices.Clone(e.DeviceIDs), true, nil
		}
		if free, healthy, _, err = m.freeLocked(name); err != nil {
			return nil, false, err
		}
		if len(free) < n {
			return nil, false, fmt.Errorf("%w: %s wants %d, %d free of %d healthy", ErrInsufficient, name, n, len(free), healthy)
		}
	}
	return pick(free, preferred, n), false, nil
}

// recordPick writes the pick ids of (pod, container) to the checkpoint when
// every one of them is still free (false when not: pick again), with
// Unavailable asked afresh, under the same lock as the write.
func (m *Manager) recordPick(pod *api.Pod, container, name string, ids []string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	free, _, _, err := m.freeLocked(name)
	if err != nil {
		return false, err
	}
	for _, id := range ids {
		if !slices.Contains(free, id) {
			return false, nil
		}
	}
	m.ck.Entries = append(m.ck.Entries, entry{
		PodUID: pod.UID, Namespace: pod.Namespace, PodName: pod.Name,
		Container: container, Resource: name, DeviceIDs: ids, Created: time.Now(),
	})
	if err := m.saveLocked(); err != nil {
		m.ck.remove(func(e entry) bool { return e.PodUID == pod.UID && e.Container == container && e.Resource == name })
		return false, err
	}
	m.notifyLocked()
	return true, nil
}

// pick takes preferred when it is n distinct free devices, else the first n free.
func pick(free, preferred []string, n int) []string {
	if len(preferred) == n {
		ok := true
		seen := map[string]bool{}
		for _, id := range preferred {
			if seen[id] || !slices.Contains(free, id) {
				ok = false
				break
			}
			seen[id] = true
		}
		if ok {
			out := slices.Clone(preferred)
			sort.Strings(out)
			return out
		}
	}
	return slices.Clone(free[:n])
}

// freeLocked lists the healthy devices no pod holds, sorted.
func (m *Manager) freeLocked(name string) (free []string, healthy int, p *plugin, err error) {
	p = m.resources[name]
	if p == nil || p.devices == nil || p.client == nil {
		return nil, 0, nil, fmt.Errorf("%w for %s", ErrNoPlugin, name)
	}
	held := m.ck.held(name)
	elsewhere := m.unavailableLocked(name)
	for id, d := range p.devices {
		if d.Health != pluginapi.Healthy {
			continue
		}
		healthy++
		if _, taken := elsewhere[id]; !held[id] && !taken {
			free = append(free, id)
		}
	}
	sort.Strings(free)
	return free, healthy, p, nil
}

// unavailableLocked is Config.Unavailable for a resource (nil without one).
func (m *Manager) unavailableLocked(name string) map[string]string {
	if m.cfg.Unavailable == nil {
		return nil
	}
	return m.cfg.Unavailable(name, m.holdingsLocked())
}

// Notify wakes every Wait and Changed, as a change of the manager's own
// does: Config.Unavailable's answer changed (a claim was prepared).
func (m *Manager) Notify() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notifyLocked()
}

// preferred asks the plugin; nil when it has no answer.
func (m *Manager) preferred(ctx context.Context, name string, client pluginapi.DevicePluginClient, free []string, n int, pod string) []string {
	cctx, cancel := context.WithTimeout(ctx, m.cfg.DialTimeout)
	defer cancel()
	start := time.Now()
	resp, err := client.GetPreferredAllocation(cctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{AvailableDeviceIDs: free, AllocationSize: int32(n)}},
	})
	var got any
	if len(resp.GetContainerResponses()) == 1 {
		got = map[string]any{"deviceIDs": resp.ContainerResponses[0].DeviceIDs}
	}
	m.record(name, "GetPreferredAllocation", FromManager, pod, start,
		map[string]any{"availableDeviceIDs": free, "allocationSize": n}, got, err)
	if err != nil || len(resp.GetContainerResponses()) != 1 {
		m.log.Warn("GetPreferredAllocation failed; picking devices in order", "resource", name, "err", err)
		return nil
	}
	return resp.ContainerResponses[0].DeviceIDs
}

func (m *Manager) unreserve(uid, container, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ck.remove(func(e entry) bool { return e.PodUID == uid && e.Container == container && e.Resource == name }) {
		if err := m.saveLocked(); err != nil {
			m.log.Warn("write device checkpoint", "err", err)
		}
		m.notifyLocked()
	}
}

func (m *Manager) client(name string) (pluginapi.DevicePluginClient, *pluginapi.DevicePluginOptions, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.resources[name]
	if p == nil || p.client == nil {
		return nil, nil, fmt.Errorf("%w for %s", ErrNoPlugin, name)
	}
	return p.client, p.opts, nil
}

// The gRPC metadata of Allocate naming the pod ("namespace/name") and the
// container the devices are for. The kubelet sends none; skiff's does, so
// that a plugin deciding by the pod (HAMi's) need not guess it.
const (
	MetadataPod       = "skiff-pod"
	MetadataContainer = "skiff-container"
)

func (m *Manager) callAllocate(ctx context.Context, name string, ids []string, pod, container string) (*pluginapi.ContainerAllocateResponse, *pluginapi.DevicePluginOptions, error) {
	client, opts, err := m.client(name)
	if err != nil {
		return nil, nil, err
	}
	// Whose allocation it is, for a plugin that decides by the pod (HAMi's
	// reads the scheduler's decision on it); other plugins ignore it.
	ctx = metadata.AppendToOutgoingContext(ctx, MetadataPod, pod, MetadataContainer, container)
	cctx, cancel := context.WithTimeout(ctx, m.cfg.DialTimeout)
	defer cancel()
	start := time.Now()
	resp, err := client.Allocate(cctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}},
	})
	var got any
	if len(resp.GetContainerResponses()) == 1 {
		got = summary(resp.ContainerResponses[0])
	}
	m.record(name, "Allocate", FromManager, pod, start, map[string]any{"devicesIDs": ids}, got, err)
	if err != nil {
		return nil, nil, fmt.Errorf("plugin Allocate: %w", err)
	}
	if len(resp.GetContainerResponses()) != 1 {
		return nil, nil, fmt.Errorf("plugin Allocate: %d container responses for 1 request", len(resp.GetContainerResponses()))
	}
	return resp.ContainerResponses[0], opts, nil
}

func (m *Manager) preStart(ctx context.Context, name string, ids []string, pod string) error {
	client, _, err := m.client(name)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, pluginapi.KubeletPreStartContainerRPCTimeoutInSecs*time.Second)
	defer cancel()
	start := time.Now()
	_, err = client.PreStartContainer(cctx, &pluginapi.PreStartContainerRequest{DevicesIds: ids})
	m.record(name, "PreStartContainer", FromManager, pod, start, map[string]any{"devicesIDs": ids}, nil, err)
	return err
}

// merge adds one resource's answer to a container's Allocation. Device
// nodes become bind mounts (the runtime has no device-node field; CDI is
// the way plugins should hand out device nodes today).
func merge(out *podworker.Allocation, name string, ids []string, r *pluginapi.ContainerAllocateResponse) {
	out.Devices[name] = ids
	for k, v := range r.GetEnvs() {
		out.Env[k] = v
	}
	for _, mt := range r.GetMounts() {
		out.Mounts = append(out.Mounts, runtime.Mount{Type: runtime.MountBind, Source: mt.HostPath, Destination: mt.ContainerPath, ReadOnly: mt.ReadOnly})
	}
	for _, d := range r.GetDevices() {
		out.Mounts = append(out.Mounts, runtime.Mount{Type: runtime.MountBind, Source: d.HostPath, Destination: d.ContainerPath, ReadOnly: !strings.Contains(d.Permissions, "w")})
	}
	for _, d := range r.GetCdiDevices() {
		if !slices.Contains(out.CDIDevices, d.Name) {
			out.CDIDevices = append(out.CDIDevices, d.Name)
		}
	}
}

// summary is the plugin's answer for the pod trace.
func summary(r *pluginapi.ContainerAllocateResponse) map[string]any {
	s := map[string]any{}
	if len(r.GetEnvs()) > 0 {
		s["envs"] = r.GetEnvs()
	}
	var cdi []string
	for _, d := range r.GetCdiDevices() {
		cdi = append(cdi, d.Name)
	}
	if len(cdi) > 0 {
		s["cdiDevices"] = cdi
	}
	var mounts []string
	for _, mt := range r.GetMounts() {
		mounts = append(mounts, mt.HostPath+":"+mt.ContainerPath)
	}
	if len(mounts) > 0 {
		s["mounts"] = mounts
	}
	var devs []string
	for _, d := range r.GetDevices() {
		devs = append(devs, d.HostPath+":"+d.ContainerPath)
	}
	if len(devs) > 0 {
		s["devices"] = devs
	}
	return s
}

// Release frees every device of a pod. Releasing a pod without devices is
// not an error.
func (m *Manager) Release(_ context.Context, podUID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.responses {
		if k.uid == podUID {
			delete(m.responses, k)
		}
	}
	if !m.ck.remove(func(e entry) bool { return e.PodUID == podUID }) {
		return nil
	}
	m.notifyLocked()
	if err := m.saveLocked(); err != nil {
		return fmt.Errorf("release devices of pod %s: %w", podUID, err)
	}
	return nil
}

// Retain frees the devices of every pod whose uid is not in live: the
// agent's resync, for pods deleted while it was down or that ended.
// Allocations younger than Config.RetainGrace are kept, unless they were
// made before this manager started (read from the checkpoint): the
// caller's list, taken after it started, is newer than those, so there is
// no race to guard and a pod deleted while the agent was down frees its
// devices at the agent's first resync, not a grace period later.
func (m *Manager) Retain(live map[string]bool) error {
	cutoff := time.Now().Add(-m.cfg.RetainGrace)
	return m.releaseWhere(func(e entry) bool {
		return !live[e.PodUID] && (!e.Created.After(cutoff) || e.Created.Before(m.started))
	}, "release devices of ended pods")
}

// ReleaseGone frees the devices of every pod named namespace/name: the
// API has no such pod any more (podworker.DeviceAllocator).
func (m *Manager) ReleaseGone(namespace, name string) error {
	return m.releaseWhere(func(e entry) bool { return e.Namespace == namespace && e.PodName == name },
		"release devices of deleted pod "+namespace+"/"+name)
}

func (m *Manager) releaseWhere(gone func(entry) bool, what string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.ck.Entries {
		if gone(e) {
			delete(m.responses, respKey{e.PodUID, e.Container})
		}
	}
	if !m.ck.remove(gone) {
		return nil
	}
	m.notifyLocked()
	if err := m.saveLocked(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func (m *Manager) saveLocked() error {
	return writeCheckpoint(filepath.Join(m.cfg.Dir, CheckpointName), m.ck)
}
