package dra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/util/validation"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

const (
	// StateName is the manager's checkpoint in Config.StateDir.
	StateName    = "dra_manager_state.json"
	stateVersion = 1
)

// ErrNotRegistered: a claim's driver has not registered (yet).
var ErrNotRegistered = errors.New("DRA driver is not registered")

// Config of a Manager.
type Config struct {
	// RegistryDir is watched for drivers' registration sockets.
	RegistryDir string
	// StateDir holds the checkpoint.
	StateDir string
	// Client reads ResourceClaims (nil: set SetClaimGetter).
	Client client.Interface
	// DialTimeout bounds GetInfo and each Prepare/Unprepare call (10 s:
	// drivers are local, and a stuck one should fail the pod's sync, not
	// hang it; the kubelet's is 45 s).
	DialTimeout time.Duration
	// RetainGrace keeps claims used less than this long ago from Retain,
	// which races with a pod being prepared (30 s, like the device manager).
	RetainGrace time.Duration
	// Log, or discard.
	Log *slog.Logger
}

// DefaultConfig has the defaults; the directories are the caller's.
func DefaultConfig() Config {
	return Config{DialTimeout: 10 * time.Second, RetainGrace: 30 * time.Second}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.RegistryDir == "" {
		errs = append(errs, errors.New("plugin registry directory is required"))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("state directory is required"))
	}
	if c.DialTimeout <= 0 {
		errs = append(errs, errors.New("dial timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Manager is the DRA manager. Safe for concurrent use.
type Manager struct {
	cfg      Config
	log      *slog.Logger
	getClaim func(ctx context.Context, namespace, name string) (*api.ResourceClaim, error)

	mu       sync.Mutex
	drivers  map[string]*driverConn // by driver name
	bySocket map[string]string      // registration socket → driver name
	ck       state
	locks    map[string]*sync.Mutex // per claim UID: one Prepare or Unprepare at a time
	changed  chan struct{}
	started  time.Time // uses older than this came from the checkpoint (Retain)
	stopped  bool

	watcher *fsnotify.Watcher
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

var _ podworker.ClaimPreparer = (*Manager)(nil)

type driverConn struct {
	name     string
	endpoint string
	conn     *grpc.ClientConn
	client   drapb.DRAPluginClient
}

// state is the checkpoint.
type state struct {
	Version int                   `json:"version"`
	Claims  map[string]claimEntry `json:"claims"` // by claim UID
}

type claimEntry struct {
	Namespace string        `json:"namespace"`
	Name      string        `json:"name"`
	Pods      []string      `json:"pods"` // UIDs of the pods on this node using it
	Devices   []deviceEntry `json:"devices"`
	// Used is when a pod last started using the claim (RetainGrace).
	Used time.Time `json:"used"`
}

type deviceEntry struct {
	Driver       string   `json:"driver"`
	Requests     []string `json:"requests"`
	Pool         string   `json:"pool"`
	Device       string   `json:"device"`
	CDIDeviceIDs []string `json:"cdiDeviceIDs"`
}

// New builds a Manager and reads its checkpoint; Start watches for drivers.
func New(cfg Config) (*Manager, error) {
	d := DefaultConfig()
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = d.DialTimeout
	}
	if cfg.RetainGrace == 0 {
		cfg.RetainGrace = d.RetainGrace
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("DRA manager config: %w", err)
	}
	lg := cfg.Log
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	for _, dir := range []string{cfg.RegistryDir, cfg.StateDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("DRA manager: %w", err)
		}
	}
	st := state{Version: stateVersion, Claims: map[string]claimEntry{}}
	if err := ReadCheckpoint(filepath.Join(cfg.StateDir, StateName), stateVersion, &st); err != nil {
		return nil, err
	}
	if st.Claims == nil {
		st.Claims = map[string]claimEntry{}
	}
	m := &Manager{cfg: cfg, log: lg.With("component", "dramanager"), drivers: map[string]*driverConn{},
		bySocket: map[string]string{}, ck: st, locks: map[string]*sync.Mutex{}, changed: make(chan struct{}),
		started: time.Now()}
	if cfg.Client != nil {
		m.getClaim = func(ctx context.Context, ns, name string) (*api.ResourceClaim, error) {
			return client.Get[*api.ResourceClaim](ctx, cfg.Client, ns, name)
		}
	}
	return m, nil
}

// SetClaimGetter replaces where claims are read from (tests).
func (m *Manager) SetClaimGetter(g func(ctx context.Context, namespace, name string) (*api.ResourceClaim, error)) {
	m.getClaim = g
}

// Start watches the registry directory and registers the drivers whose
// sockets are there already or appear later, until Stop.
func (m *Manager) Start(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", m.cfg.RegistryDir, err)
	}
	if err := w.Add(m.cfg.RegistryDir); err != nil {
		w.Close()
		return fmt.Errorf("watch %s: %w", m.cfg.RegistryDir, err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	m.watcher, m.cancel = w, cancel
	// After the watch is set: a socket made meanwhile is seen twice
	// (register is idempotent), never missed.
	entries, err := os.ReadDir(m.cfg.RegistryDir)
	if err != nil {
		m.Stop()
		return fmt.Errorf("read %s: %w", m.cfg.RegistryDir, err)
	}
	for _, e := range entries {
		m.registerAsync(rctx, filepath.Join(m.cfg.RegistryDir, e.Name()))
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			select {
			case <-rctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				switch {
				case ev.Has(fsnotify.Create):
					m.registerAsync(rctx, ev.Name)
				case ev.Has(fsnotify.Remove), ev.Has(fsnotify.Rename):
					m.unregister(ev.Name)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				m.log.Warn("watch plugin registry", "dir", m.cfg.RegistryDir, "err", err)
			}
		}
	}()
	m.log.Info("DRA manager watching for drivers", "dir", m.cfg.RegistryDir)
	return ctx.Err()
}

// Stop stops watching and closes the driver connections. Safe twice.
func (m *Manager) Stop() {
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	m.stopped = true
	m.mu.Unlock()
	if m.cancel != nil {
		m.cancel()
	}
	if m.watcher != nil {
		m.watcher.Close()
	}
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range m.drivers {
		d.conn.Close()
	}
	m.drivers = map[string]*driverConn{}
}

func (m *Manager) registerAsync(ctx context.Context, sock string) {
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return // not a socket (yet): fsnotify reports its create
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := m.Register(ctx, sock); err != nil && ctx.Err() == nil {
			m.log.Warn("DRA driver registration failed", "socket", sock, "err", err)
		}
	}()
}

// Register runs the registration of the plugin whose registration socket
// is sock: GetInfo, checks, a connection to its DRA socket, and
// NotifyRegistrationStatus with the outcome.
func (m *Manager) Register(ctx context.Context, sock string) error {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial %s: %w", sock, err)
	}
	defer conn.Close()
	reg := registerapi.NewRegistrationClient(conn)
	cctx, cancel := context.WithTimeout(ctx, m.cfg.DialTimeout)
	defer cancel()
	info, err := reg.GetInfo(cctx, &registerapi.InfoRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("GetInfo on %s: %w", sock, err)
	}
	d, verr := m.connect(info)
	if verr != nil {
		_, _ = reg.NotifyRegistrationStatus(cctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: verr.Error()})
		return fmt.Errorf("register %s: %w", info.GetName(), verr)
	}
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		d.conn.Close()
		return errors.New("DRA manager is stopping")
	}
	if old := m.drivers[d.name]; old != nil {
		old.conn.Close()
	}
	m.drivers[d.name] = d
	m.bySocket[sock] = d.name
	m.notifyLocked()
	m.mu.Unlock()
	if _, err := reg.NotifyRegistrationStatus(cctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		m.log.Warn("NotifyRegistrationStatus", "driver", d.name, "err", err)
	}
	m.log.Info("DRA driver registered", "driver", d.name, "endpoint", d.endpoint)
	return nil
}

// connect checks a PluginInfo as the kubelet does and dials the endpoint.
func (m *Manager) connect(info *registerapi.PluginInfo) (*driverConn, error) {
	var errs []error
	if info.GetType() != registerapi.DRAPlugin {
		errs = append(errs, fmt.Errorf("plugin type %q is not %s", info.GetType(), registerapi.DRAPlugin))
	}
	if msgs := validation.IsDNS1123Subdomain(info.GetName()); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("driver name %q: %s", info.GetName(), strings.Join(msgs, "; ")))
	}
	if !slices.Contains(info.GetSupportedVersions(), drapb.DRAPluginService) {
		errs = append(errs, fmt.Errorf("none of the versions supported %q is %s", info.GetSupportedVersions(), drapb.DRAPluginService))
	}
	ep := info.GetEndpoint()
	if !filepath.IsAbs(ep) {
		errs = append(errs, fmt.Errorf("endpoint %q must be an absolute socket path", ep))
	} else if fi, err := os.Stat(ep); err != nil {
		errs = append(errs, fmt.Errorf("endpoint %q: %w", ep, err))
	} else if fi.Mode()&os.ModeSocket == 0 {
		errs = append(errs, fmt.Errorf("endpoint %q is not a unix socket", ep))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient("unix://"+ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", ep, err)
	}
	return &driverConn{name: info.GetName(), endpoint: ep, conn: conn, client: drapb.NewDRAPluginClient(conn)}, nil
}

func (m *Manager) unregister(sock string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name, ok := m.bySocket[sock]
	if !ok {
		return
	}
	delete(m.bySocket, sock)
	if d := m.drivers[name]; d != nil {
		d.conn.Close()
		delete(m.drivers, name)
	}
	m.notifyLocked()
	m.log.Info("DRA driver unregistered", "driver", name)
}

// Drivers lists the registered drivers, sorted.
func (m *Manager) Drivers() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.drivers))
	for n := range m.drivers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (m *Manager) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// Wait blocks until cond holds for the registered drivers and prepared
// claims (by claim UID, to the pods using each), or ctx ends.
func (m *Manager) Wait(ctx context.Context, cond func(drivers []string, claims map[string][]string) bool) error {
	for {
		m.mu.Lock()
		ch := m.changed
		m.mu.Unlock()
		if cond(m.Drivers(), m.Claims()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Claims returns the prepared claims (UID) with the pods using each.
func (m *Manager) Claims() map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]string{}
	for uid, e := range m.ck.Claims {
		out[uid] = slices.Clone(e.Pods)
	}
	return out
}

func (m *Manager) lockClaim(uid string) func() {
	m.mu.Lock()
	l := m.locks[uid]
	if l == nil {
		l = &sync.Mutex{}
		m.locks[uid] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (m *Manager) driver(name string) (*driverConn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.drivers[name]
	if d == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotRegistered, name)
	}
	return d, nil
}

// PrepareResources prepares every claim of pod and returns, per
// container, the CDI devices of the claims it lists.
func (m *Manager) PrepareResources(ctx context.Context, pod *api.Pod) (podworker.PreparedClaims, error) {
	out := podworker.PreparedClaims{CDIDevices: map[string][]string{}}
	if len(pod.Spec.ResourceClaims) == 0 {
		return out, nil
	}
	if m.getClaim == nil {
		return out, errors.New("prepare dynamic resources: no API client to read claims")
	}
	byEntry := map[string]claimEntry{}
	var trace []map[string]any
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, ok := api.ClaimName(pod, pc)
		if !ok {
			if pc.ResourceClaimTemplateName != nil && hasStatus(pod, pc.Name) {
				continue // the controller decided no claim is needed
			}
			return out, fmt.Errorf("pod %q: ResourceClaim not created yet", api.KeyOf(pod))
		}
		e, t, err := m.prepareClaim(ctx, pod, name)
		if err != nil {
			return out, err
		}
		t["podClaim"] = pc.Name
		trace = append(trace, t)
		out.Summary = append(out.Summary, summary(name, e, t))
		byEntry[pc.Name] = e
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		for _, cc := range c.Resources.Claims {
			e, ok := byEntry[cc.Name]
			if !ok {
				continue
			}
			for _, d := range e.Devices {
				if cc.Request != "" && !servesRequest(d.Requests, cc.Request) {
					continue
				}
				for _, id := range d.CDIDeviceIDs {
					if !slices.Contains(out.CDIDevices[c.Name], id) {
						out.CDIDevices[c.Name] = append(out.CDIDevices[c.Name], id)
					}
				}
			}
		}
	}
	out.Trace = map[string]any{"claims": trace}
	return out, nil
}

// summary is "claim C: gpu.nvidia.com/n1/gpu-3 → nvidia.com/gpu=3,k8s.gpu.nvidia.com/claim=UID-gpu-3".
func summary(claim string, e claimEntry, t map[string]any) string {
	var devs, ids []string
	for _, d := range e.Devices {
		devs = append(devs, d.Driver+"/"+d.Pool+"/"+d.Device)
		ids = append(ids, d.CDIDeviceIDs...)
	}
	s := fmt.Sprintf("claim %s: %s -> CDI %s", claim, strings.Join(devs, ","), strings.Join(ids, ","))
	if _, cached := t["nodePrepareResources"].(string); cached {
		s += " (prepared already)"
	}
	return s
}

func hasStatus(pod *api.Pod, name string) bool {
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == name {
			return true
		}
	}
	return false
}

// servesRequest: a result's request is REQUEST or, for firstAvailable,
// REQUEST/SUBREQUEST.
func servesRequest(requests []string, want string) bool {
	for _, r := range requests {
		if r == want || strings.HasPrefix(r, want+"/") {
			return true
		}
	}
	return false
}

// prepareClaim prepares one claim for pod, or adds the pod to a claim
// prepared already; it returns the entry and the span details.
func (m *Manager) prepareClaim(ctx context.Context, pod *api.Pod, name string) (claimEntry, map[string]any, error) {
	claim, err := m.getClaim(ctx, pod.Namespace, name)
	if err != nil {
		return claimEntry{}, nil, fmt.Errorf("get ResourceClaim %s/%s: %w", pod.Namespace, name, err)
	}
	if claim.Status.Allocation == nil {
		return claimEntry{}, nil, fmt.Errorf("ResourceClaim %s/%s is not allocated", pod.Namespace, name)
	}
	if !claim.IsReservedFor(pod.UID) {
		return claimEntry{}, nil, fmt.Errorf("pod %s(%s) is not allowed to use resource claim %s", pod.Name, pod.UID, name)
	}
	unlock := m.lockClaim(claim.UID)
	defer unlock()
	t := map[string]any{"claim": name, "uid": claim.UID}
	m.mu.Lock()
	e, ok := m.ck.Claims[claim.UID]
	m.mu.Unlock()
	if !ok {
		e = claimEntry{Namespace: pod.Namespace, Name: name}
		drivers := []string{}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if !slices.Contains(drivers, r.Driver) {
				drivers = append(drivers, r.Driver)
			}
		}
		var calls []map[string]any
		for _, dn := range drivers {
			devs, ms, err := m.callPrepare(ctx, dn, claim)
			if err != nil {
				return claimEntry{}, nil, err
			}
			e.Devices = append(e.Devices, devs...)
			calls = append(calls, map[string]any{"driver": dn, "call": "NodePrepareResources", "roundTripMs": ms})
		}
		t["nodePrepareResources"] = calls
	} else {
		t["nodePrepareResources"] = "prepared already (checkpoint)"
	}
	if !slices.Contains(e.Pods, pod.UID) {
		e.Pods = append(e.Pods, pod.UID)
	}
	e.Used = time.Now()
	m.mu.Lock()
	old, had := m.ck.Claims[claim.UID]
	m.ck.Claims[claim.UID] = e
	if err := m.saveLocked(); err != nil {
		if had {
			m.ck.Claims[claim.UID] = old
		} else {
			delete(m.ck.Claims, claim.UID)
		}
		m.mu.Unlock()
		return claimEntry{}, nil, err
	}
	m.notifyLocked()
	m.mu.Unlock()
	var devices, cdi []string
	for _, d := range e.Devices {
		devices = append(devices, d.Driver+"/"+d.Pool+"/"+d.Device)
		cdi = append(cdi, d.CDIDeviceIDs...)
	}
	t["devices"], t["cdiDevices"] = devices, cdi
	return e, t, nil
}

func (m *Manager) callPrepare(ctx context.Context, driver string, claim *api.ResourceClaim) ([]deviceEntry, float64, error) {
	d, err := m.driver(driver)
	if err != nil {
		return nil, 0, fmt.Errorf("prepare ResourceClaim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	cctx, cancel := context.WithTimeout(ctx, m.cfg.DialTimeout)
	defer cancel()
	start := time.Now()
	resp, err := d.client.NodePrepareResources(cctx, &drapb.NodePrepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: claim.Namespace, Name: claim.Name, Uid: claim.UID}},
	})
	ms := float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		return nil, ms, fmt.Errorf("NodePrepareResources of ResourceClaim %s/%s by %s: %w", claim.Namespace, claim.Name, driver, err)
	}
	r, ok := resp.GetClaims()[claim.UID]
	if !ok {
		return nil, ms, fmt.Errorf("NodePrepareResources of ResourceClaim %s/%s by %s: no answer for the claim", claim.Namespace, claim.Name, driver)
	}
	if r.GetError() != "" {
		return nil, ms, fmt.Errorf("NodePrepareResources of ResourceClaim %s/%s by %s: %s", claim.Namespace, claim.Name, driver, r.GetError())
	}
	var out []deviceEntry
	for _, dev := range r.GetDevices() {
		out = append(out, deviceEntry{Driver: driver, Requests: dev.GetRequestNames(), Pool: dev.GetPoolName(), Device: dev.GetDeviceName(), CDIDeviceIDs: dev.GetCdiDeviceIds()})
	}
	return out, ms, nil
}

// UnprepareResources ends pod's use of its claims on this node; a claim
// no other pod here uses is unprepared by its drivers.
func (m *Manager) UnprepareResources(ctx context.Context, podUID string) error {
	m.mu.Lock()
	var uids []string
	for uid, e := range m.ck.Claims {
		if slices.Contains(e.Pods, podUID) {
			uids = append(uids, uid)
		}
	}
	m.mu.Unlock()
	sort.Strings(uids)
	var errs []error
	for _, uid := range uids {
		errs = append(errs, m.release(ctx, uid, func(p string) bool { return p == podUID }, false))
	}
	return errors.Join(errs...)
}

// Retain ends the use of claims by pods not in active (deleted or ended
// while the agent was down), except for claims used within RetainGrace by
// this process (a use read from the checkpoint is older than the caller's
// list, so it gets no grace), and unprepares claims that no pod uses.
func (m *Manager) Retain(ctx context.Context, active map[string]bool) error {
	m.mu.Lock()
	var uids []string
	for uid := range m.ck.Claims {
		uids = append(uids, uid)
	}
	m.mu.Unlock()
	sort.Strings(uids)
	var errs []error
	for _, uid := range uids {
		errs = append(errs, m.release(ctx, uid, func(p string) bool { return !active[p] }, true))
	}
	return errors.Join(errs...)
}

// release removes the pods that gone says are gone from a claim, and
// unprepares the claim when none is left.
func (m *Manager) release(ctx context.Context, uid string, gone func(pod string) bool, grace bool) error {
	unlock := m.lockClaim(uid)
	defer unlock()
	m.mu.Lock()
	e, ok := m.ck.Claims[uid]
	if !ok || grace && time.Since(e.Used) < m.cfg.RetainGrace && !e.Used.Before(m.started) {
		m.mu.Unlock()
		return nil
	}
	pods := slices.DeleteFunc(slices.Clone(e.Pods), gone)
	if len(pods) != len(e.Pods) {
		e.Pods = pods
		m.ck.Claims[uid] = e
		if err := m.saveLocked(); err != nil {
			m.mu.Unlock()
			return err
		}
		m.notifyLocked()
	}
	m.mu.Unlock()
	if len(pods) > 0 {
		return nil
	}
	var drivers []string
	for _, d := range e.Devices {
		if !slices.Contains(drivers, d.Driver) {
			drivers = append(drivers, d.Driver)
		}
	}
	for _, dn := range drivers {
		if err := m.callUnprepare(ctx, dn, uid, e); err != nil {
			return err // kept: the next resync tries again
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.ck.Claims, uid)
	if err := m.saveLocked(); err != nil {
		return err
	}
	m.notifyLocked()
	m.log.Info("unprepared claim", "claim", e.Namespace+"/"+e.Name, "uid", uid)
	return nil
}

func (m *Manager) callUnprepare(ctx context.Context, driver, uid string, e claimEntry) error {
	d, err := m.driver(driver)
	if err != nil {
		return fmt.Errorf("unprepare ResourceClaim %s/%s: %w", e.Namespace, e.Name, err)
	}
	cctx, cancel := context.WithTimeout(ctx, m.cfg.DialTimeout)
	defer cancel()
	resp, err := d.client.NodeUnprepareResources(cctx, &drapb.NodeUnprepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: e.Namespace, Name: e.Name, Uid: uid}},
	})
	if err != nil {
		return fmt.Errorf("NodeUnprepareResources of ResourceClaim %s/%s by %s: %w", e.Namespace, e.Name, driver, err)
	}
	if r, ok := resp.GetClaims()[uid]; !ok {
		return fmt.Errorf("NodeUnprepareResources of ResourceClaim %s/%s by %s: no answer for the claim", e.Namespace, e.Name, driver)
	} else if r.GetError() != "" {
		return fmt.Errorf("NodeUnprepareResources of ResourceClaim %s/%s by %s: %s", e.Namespace, e.Name, driver, r.GetError())
	}
	return nil
}

func (m *Manager) saveLocked() error {
	m.ck.Version = stateVersion
	return WriteCheckpoint(filepath.Join(m.cfg.StateDir, StateName), m.ck)
}
