// Package gpudriver is skiff's built-in DRA driver for NVIDIA GPUs,
// gpu.nvidia.com, in the shape of NVIDIA's k8s-dra-driver-gpu, over the
// GPUs of an agent/gpu Source (real NVML or simulated): the same one GPU
// inventory the device plugin (agent/devices/gpuplugin) serves.
//
// What it does, in the order a GPU goes through:
//
//  1. Publish: one ResourceSlice per node (pool named after the node,
//     nodeName set), devices gpu-MINOR with NVIDIA's attributes (type,
//     uuid, index, minor, productName, brand, architecture,
//     cudaComputeCapability, driverVersion, cudaDriverVersion,
//     resource.kubernetes.io/pciBusID, resource.kubernetes.io/pcieRoot,
//     addressingMode) and capacity memory, plus skiff's
//     skiff.dev/nvlinkDomain (the GPUs joined by NVLink or NVSwitch share
//     one; NVIDIA's driver has none, k8s-dra-driver-gpu#214) and
//     skiff.dev/gpuClique (the node's nvidia.com/gpu.clique label, when it
//     has one). A GPU that is unhealthy (skiff gpu fault) or that the
//     device plugin handed out through nvidia.com/gpu is left out of the
//     slice; it comes back when it recovers or is released. Each change
//     bumps the pool's generation.
//  2. Prepare (NodePrepareResources, server.go): for each claim the
//     kubelet names, read its allocation from the API, check that its
//     gpu.nvidia.com devices are on this node, healthy and not held by
//     the device plugin, record them in the checkpoint (replaced
//     atomically before answering), write the claim's CDI spec
//     (agent/gpu/cdi) and answer with the CDI device IDs: the GPU's own
//     nvidia.com/gpu=INDEX and the claim's k8s.gpu.nvidia.com/claim=UID-gpu-N.
//     Each device's sharing comes from the allocation's opaque configs
//     for gpu.nvidia.com, NVIDIA's GpuConfig (gpuconfig.go, sharing.go):
//     time-slicing with an interval, or MPS, whose client variables
//     (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT)
//     go into the claim device's CDI edits. A config NVIDIA's driver
//     refuses fails the prepare with its words, before anything changed.
//     A claim shared by several pods is prepared once: the kubelet side
//     (agent/dra) asks again only after the last pod unprepared it.
//  3. Unprepare (NodeUnprepareResources): destroy the claim's MIG devices,
//     forget the claim, remove its spec.
//
// With DynamicMIG (the agent's --dra-dynamic-mig, NVIDIA's
// featureGates.DynamicMIG=true; mig.go) every MIG-capable GPU is
// published as partitionable devices (KEP-4815): a counter set per GPU
// (its memory slices, multiprocessors and engines) in the pool's counter
// slice, and in a slice per GPU the whole GPU, consuming all of it, and
// one device per possible MIG placement (gpu-0-mig-1g5gb-19-0, type mig,
// attributes profile and parentUUID, for the DeviceClass mig.nvidia.com)
// consuming its share, so Kubernetes' allocator never hands out two that
// overlap. Prepare creates the MIG device (simulated GPUs; real ones are
// refused at start) and gives the container a CDI device showing exactly
// it; Unprepare destroys it; a restarted driver re-creates the ones its
// checkpoint holds.
//
// # Invariants
//
//   - One GPU inventory: a GPU is held by at most one of a prepared claim
//     and a device plugin allocation (a claim's MIG device holds its whole
//     GPU for the device plugin and the MIG manager; claims share a GPU
//     only through MIG devices whose memory slices do not overlap). Prepare marks its GPUs pending, then
//     asks the device manager (HeldByDevicePlugin) and gives up when one is
//     held; the device manager asks Held, under its own lock, before it
//     records GPUs. Either order, only one of the two wins a GPU. Held also
//     lists the GPUs the scheduler allocated to claims in this pool (a
//     claims informer, and the latest Refresh until the informer has
//     caught up with it), so the device plugin does not take a claim's GPU
//     in the time between its allocation and its pod's prepare.
//   - No claim is allocated a GPU the device plugin is handing out, and
//     none waits for one: the two writes are ordered through the API
//     server. The device manager picks GPUs, then Withdraw takes them out
//     of the slice (a write) and reads the claims afresh (Refresh); the
//     pick is recorded only when Held, asked again, still leaves them free
//     (else it picks again). The scheduler writes an allocation, then
//     reads the node's slices again and takes the allocation back when a
//     device left them (controlplane/scheduler/plugins DynamicResources
//     PreBind; the pod is tried again). Whichever write came first, the
//     other side's read after its own write sees it: a claim allocated
//     before the withdrawal is seen by the device manager, which leaves
//     its GPU; one allocated after it is taken back by the scheduler
//     before its pod is bound. (Both may step back: each tries again.)
//     A withdrawal lives in memory until the pick is recorded in the
//     device manager's checkpoint, which keeps the GPU out of the slice
//     from then on: an agent killed -9 in between lost the pick (the pod
//     is admitted again) and publishes the GPU again when it restarts.
//   - Prepare and Unprepare are idempotent per claim UID: a prepared claim
//     is answered from the checkpoint; unpreparing an unknown claim is done.
//   - The checkpoint survives agent restarts; a damaged one is refused
//     (dra.CheckpointError says how to recover).
package gpudriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/agent/dra"
	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/cdi"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/backoff"
)

// Names, as NVIDIA's driver spells them (the skiff.dev ones are skiff's).
const (
	// DriverName is the driver, and the domain of its attributes
	// (api.NVIDIAGPUDriver; its DeviceClass is api.NVIDIAGPUDeviceClass).
	DriverName = api.NVIDIAGPUDriver
	// AttrNVLinkDomain: GPUs with the same value are joined by NVLink
	// (directly or through NVSwitches). Not NVIDIA's: skiff's, so a claim
	// can ask for well-connected GPUs with matchAttribute.
	AttrNVLinkDomain = "skiff.dev/nvlinkDomain"
	// AttrClique is the node's cross-node NVLink clique (CliqueLabel).
	AttrClique = "skiff.dev/gpuClique"
	// CliqueLabel is the node label of a multi-node NVLink clique, as
	// GPU feature discovery writes it.
	CliqueLabel = "nvidia.com/gpu.clique"
	// AttrPCIBusID and AttrPCIeRoot are Kubernetes' standard attributes.
	AttrPCIBusID = "resource.kubernetes.io/pciBusID"
	AttrPCIeRoot = "resource.kubernetes.io/pcieRoot"

	// SocketName is the DRA service's socket in Config.Dir.
	SocketName = "dra.sock"
	// RegistrationSocketName is the registration socket in Config.RegistryDir.
	RegistrationSocketName = DriverName + "-reg.sock"
	// CheckpointName is the file of prepared claims in Config.Dir.
	CheckpointName = "checkpoint.json"
)

// Config of a Driver.
type Config struct {
	// Source of the GPUs; required.
	Source gpu.Source
	// NodeName names the pool and the slice; required.
	NodeName string
	// Client reads ResourceClaims and writes the node's ResourceSlice;
	// nil: no slice is published and Prepare cannot read claims (tests
	// set ClaimGetter).
	Client client.Interface
	// Dir holds dra.sock and the checkpoint (kubelet:
	// /var/lib/kubelet/plugins/gpu.nvidia.com); required.
	Dir string
	// RegistryDir is where the registration socket goes, which the
	// kubelet side watches (kubelet: /var/lib/kubelet/plugins_registry).
	RegistryDir string
	// CDISpecDir is where the claims' CDI specs go (a directory the
	// runtime reads); required.
	CDISpecDir string
	// HeldByDevicePlugin returns the GPUs (by UUID) that the device
	// plugin handed out, to the pod holding each; nil: none. It may take
	// the device manager's lock: the driver never holds its own lock
	// while calling it.
	HeldByDevicePlugin func() map[string]string
	// DevicePluginChanged returns a channel that closes at the next change
	// of the device plugin's allocations (devices.Manager.Changed); nil: none.
	DevicePluginChanged func() <-chan struct{}
	// OnChange is called (without the driver's lock) after claims were
	// prepared or unprepared, so the node's allocatable nvidia.com/gpu is
	// written at once; nil: nothing.
	OnChange func()
	// Labels are the node's labels (for CliqueLabel).
	Labels map[string]string
	// DynamicMIG publishes every MIG-capable GPU as partitionable devices
	// and creates a MIG device when a claim for it is prepared (mig.go),
	// as NVIDIA's driver does with featureGates.DynamicMIG=true. It needs
	// a Source that can create MIG devices (gpu.MIGPartitioner: simulated
	// GPUs) and SimCDI.
	DynamicMIG bool
	// SimCDI is the simulated GPUs' CDI config (agent/gpu/cdi), for the
	// CDI devices of the MIG devices the driver creates; nil on real GPUs.
	SimCDI *cdi.Config
	// Log, or discard.
	Log *slog.Logger
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Source == nil {
		errs = append(errs, errors.New("a GPU source is required"))
	}
	if c.NodeName == "" {
		errs = append(errs, errors.New("node name is required"))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("plugin directory is required"))
	} else if n := len(filepath.Join(c.Dir, SocketName)); n > 107 {
		errs = append(errs, fmt.Errorf("plugin directory %q is too long for a unix socket path (%d > 107 bytes)", c.Dir, n))
	}
	if c.RegistryDir != "" {
		if n := len(filepath.Join(c.RegistryDir, RegistrationSocketName)); n > 107 {
			errs = append(errs, fmt.Errorf("registry directory %q is too long for a unix socket path (%d > 107 bytes)", c.RegistryDir, n))
		}
	}
	if c.CDISpecDir == "" {
		errs = append(errs, errors.New("CDI spec directory is required"))
	}
	if c.DynamicMIG && c.Source != nil {
		if _, ok := c.Source.(gpu.MIGPartitioner); !ok || c.SimCDI == nil {
			errs = append(errs, fmt.Errorf("DynamicMIG: skiff cannot create MIG devices on the GPUs of %s (it does on simulated GPUs only; on real GPUs create them with nvidia-mig-parted, the nvidia.com/mig.config label, and use the device plugin)", c.Source.Name()))
		}
	}
	return errors.Join(errs...)
}

// ClaimGetter reads a claim (the API, or a test's map).
type ClaimGetter func(ctx context.Context, namespace, name string) (*api.ResourceClaim, error)

// Driver is the GPU DRA driver. Safe for concurrent use.
type Driver struct {
	cfg      Config
	log      *slog.Logger
	getClaim ClaimGetter

	mu      sync.Mutex
	ck      checkpoint
	pending map[string]pendingDevice // by claim UID/device, while a Prepare checks the device plugin
	changed chan struct{}            // closed and replaced when prepared claims change
	// withdrawn: GPU UUID → picks in progress (withdraw.go): out of the
	// slice while the device manager confirms a pick of them.
	withdrawn map[string]int
	// pubMu: one Publish at a time (Run's and Withdraw's).
	pubMu sync.Mutex
	// republish wakes Run to publish again (a withdrawal released).
	republish chan struct{}

	srv *servers // server.go

	// claims is an informer of every ResourceClaim (nil without a
	// Client): the devices the scheduler allocated in this node's pool are
	// held from the moment of allocation, before their pod reaches the
	// node, so the device plugin never picks them meanwhile.
	claims *client.Informer
	// fresh: the allocations of the latest Refresh's list and its
	// resourceVersion, counted by Held until the informer has caught up
	// with that list (freshMu; never held while calling out).
	freshMu sync.Mutex
	fresh   map[string]string
	freshRV int64
	// listClaims lists every ResourceClaim from the API (nil without a
	// Client; tests replace it).
	listClaims func(ctx context.Context) ([]*api.ResourceClaim, string, error)
}

const checkpointVersion = 1

// checkpoint is the file of prepared claims.
type checkpoint struct {
	Version int                      `json:"version"`
	Claims  map[string]preparedClaim `json:"claims"` // by claim UID
}

type preparedClaim struct {
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	Devices   []preparedDevice `json:"devices"`
	Prepared  time.Time        `json:"prepared"`
}

type preparedDevice struct {
	Requests     []string `json:"requests"`
	Pool         string   `json:"pool"`
	Device       string   `json:"device"`
	UUID         string   `json:"uuid"`
	CDIDeviceIDs []string `json:"cdiDeviceIDs"`
	// Sharing: from the claim's GpuConfig (nil in checkpoints of older
	// versions: time-slicing at the Default interval).
	Sharing *deviceSharing `json:"sharing,omitempty"`
	// Parent and MIG, for a MIG device the driver created (DynamicMIG):
	// its GPU's UUID and its place there; UUID is the MIG device's.
	Parent string        `json:"parent,omitempty"`
	MIG    *migPlacement `json:"mig,omitempty"`
}

// pendingDevice is a device a Prepare in progress is about to take.
type pendingDevice struct {
	claim string // NAMESPACE/NAME
	dev   preparedDevice
}

// New builds a Driver and reads its checkpoint; Start serves it.
func New(cfg Config) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gpu DRA driver config: %w", err)
	}
	lg := cfg.Log
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("gpu DRA driver: %w", err)
	}
	ck := checkpoint{Version: checkpointVersion, Claims: map[string]preparedClaim{}}
	if err := dra.ReadCheckpoint(filepath.Join(cfg.Dir, CheckpointName), checkpointVersion, &ck); err != nil {
		return nil, err
	}
	if ck.Claims == nil {
		ck.Claims = map[string]preparedClaim{}
	}
	d := &Driver{cfg: cfg, log: lg.With("component", "gpu-dra-driver", "driver", DriverName), ck: ck,
		pending: map[string]pendingDevice{}, changed: make(chan struct{}),
		withdrawn: map[string]int{}, republish: make(chan struct{}, 1)}
	d.restoreMIG()
	if cfg.Client != nil {
		claimKind := api.MustKindOf(&api.ResourceClaim{})
		d.claims = client.NewInformer(cfg.Client, claimKind, "", api.ListOptions{}, lg)
		if cfg.OnChange != nil {
			// An allocation changes Held: a signal, no work in the handler.
			signal := func(api.Object) { cfg.OnChange() }
			d.claims.AddHandler(client.Handler{OnAdd: signal, OnUpdate: func(_, o api.Object) { signal(o) }, OnDelete: signal})
		}
		d.getClaim = func(ctx context.Context, ns, name string) (*api.ResourceClaim, error) {
			return client.Get[*api.ResourceClaim](ctx, cfg.Client, ns, name)
		}
		d.listClaims = func(ctx context.Context) ([]*api.ResourceClaim, string, error) {
			return client.List[*api.ResourceClaim](ctx, cfg.Client, "", api.ListOptions{})
		}
	}
	return d, nil
}

// SetClaimGetter replaces where claims are read from (tests).
func (d *Driver) SetClaimGetter(g ClaimGetter) { d.getClaim = g }

// DeviceName is the DRA name of a GPU: gpu-MINOR.
func DeviceName(g gpu.Device) string { return "gpu-" + strconv.Itoa(g.MinorNumber) }

// SliceName is the name of the node's ResourceSlice. (Kubernetes'
// publisher uses generateName NODE-DRIVER-; a fixed name lets a restarted
// agent find its slice without a list.)
func SliceName(node string) string { return node + "-" + DriverName }

// Held returns the GPUs (by UUID; a MIG device's GPU for it) that claims hold, to "claim
// NAMESPACE/NAME": prepared ones, those a Prepare in progress is about to
// take, and those the scheduler allocated in this node's pool (from the
// claims informer, once Run started it). The device manager excludes
// them (devices.Config.Unavailable).
func (d *Driver) Held() map[string]string {
	var allocated map[string]string
	if d.claims != nil && d.claims.HasSynced() {
		allocated = d.allocated(d.claimList())
	}
	for uuid, claim := range d.freshAllocations() {
		if allocated == nil {
			allocated = map[string]string{}
		}
		allocated[uuid] = claim
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.heldLocked()
	for uuid, claim := range allocated {
		if _, ok := out[uuid]; !ok {
			out[uuid] = claim
		}
	}
	return out
}

// claimList is the informer's claims.
func (d *Driver) claimList() []*api.ResourceClaim {
	objs := d.claims.List()
	out := make([]*api.ResourceClaim, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*api.ResourceClaim))
	}
	return out
}

// Refresh reads the ResourceClaims afresh from the API (one list, a
// quorum read) so that Held counts every allocation written before it
// was called, however far the claims informer lags: Withdraw calls it
// after the GPUs the device manager picked left the slice. The
// list's allocations are counted until the informer has seen that
// resourceVersion (skiff's are increasing integers), so an allocation
// released later is not held for longer than the informer's delay.
// Without a Client it does nothing.
func (d *Driver) Refresh(ctx context.Context) error {
	if d.listClaims == nil {
		return nil
	}
	claims, rv, err := d.listClaims(ctx)
	if err != nil {
		return fmt.Errorf("list ResourceClaims: %w", err)
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return fmt.Errorf("list ResourceClaims: resourceVersion %q: %w", rv, err)
	}
	allocated := d.allocated(claims)
	d.freshMu.Lock()
	defer d.freshMu.Unlock()
	if n >= d.freshRV {
		d.fresh, d.freshRV = allocated, n
	}
	return nil
}

// freshAllocations is the latest Refresh's allocations while the
// informer has not caught up with its list, else nil.
func (d *Driver) freshAllocations() map[string]string {
	d.freshMu.Lock()
	defer d.freshMu.Unlock()
	if d.fresh == nil {
		return nil
	}
	if d.claims != nil && d.claims.HasSynced() {
		if rv, err := strconv.ParseInt(d.claims.LastSyncResourceVersion(), 10, 64); err == nil && rv >= d.freshRV {
			d.fresh = nil
			return nil
		}
	}
	return d.fresh
}

// allocated maps the GPUs of this pool that claims are allocated to.
func (d *Driver) allocated(claims []*api.ResourceClaim) map[string]string {
	gpus, err := d.cfg.Source.Devices(context.Background())
	if err != nil {
		return nil
	}
	uuid := map[string]string{}
	for _, g := range gpus {
		uuid[DeviceName(g)] = g.UUID
	}
	out := map[string]string{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver != DriverName || r.Pool != d.cfg.NodeName {
				continue
			}
			dev, _, _ := strings.Cut(r.Device, "-mig-") // a MIG device: its GPU
			if uuid[dev] != "" {
				out[uuid[dev]] = "claim " + c.Namespace + "/" + c.Name
			}
		}
	}
	return out
}

// WaitSynced waits until the claims informer has listed (true), or ctx ends.
func (d *Driver) WaitSynced(ctx context.Context) bool {
	if d.claims == nil {
		return true
	}
	return d.claims.WaitForSync(ctx)
}

// Prepared lists the prepared claims' UIDs, sorted.
func (d *Driver) Prepared() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.ck.Claims))
	for uid := range d.ck.Claims {
		out = append(out, uid)
	}
	sort.Strings(out)
	return out
}

// Changed returns a channel that closes when prepared claims change.
func (d *Driver) Changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

func (d *Driver) notifyLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// ClaimRef names a claim the kubelet asks about.
type ClaimRef struct{ Namespace, Name, UID string }

// PreparedDevice is one device of a prepared claim, as the kubelet gets it.
type PreparedDevice struct {
	Requests     []string
	Pool, Device string
	CDIDeviceIDs []string
}

// Prepare prepares one claim (NodePrepareResources for it): the same
// answer again when it is prepared already.
func (d *Driver) Prepare(ctx context.Context, ref ClaimRef) ([]PreparedDevice, error) {
	d.mu.Lock()
	if pc, ok := d.ck.Claims[ref.UID]; ok {
		d.mu.Unlock()
		return pc.answer(), nil
	}
	d.mu.Unlock()
	if d.getClaim == nil {
		return nil, errors.New("no API client to read the claim")
	}
	claim, err := d.getClaim(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("get ResourceClaim %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if claim.UID != ref.UID {
		return nil, fmt.Errorf("ResourceClaim %s/%s has uid %s, not %s (deleted and created again?)", ref.Namespace, ref.Name, claim.UID, ref.UID)
	}
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("ResourceClaim %s/%s is not allocated", ref.Namespace, ref.Name)
	}
	devs, err := d.claimDevices(ctx, ref, claim)
	if err != nil {
		return nil, err
	}
	if err := d.resolveSharing(claim, devs); err != nil {
		// NVIDIA's words: error preparing devices for claim NS/NAME:UID.
		return nil, fmt.Errorf("error preparing devices for claim %s/%s:%s: prepare devices failed: %w", ref.Namespace, ref.Name, ref.UID, err)
	}
	key := ref.Namespace + "/" + ref.Name

	// One inventory: mark the GPUs, then ask the device plugin's side.
	d.mu.Lock()
	if pc, ok := d.ck.Claims[ref.UID]; ok { // a concurrent Prepare of the same claim won
		d.mu.Unlock()
		return pc.answer(), nil
	}
	for _, dev := range devs {
		if by, ok := d.conflictLocked(dev); ok {
			d.mu.Unlock()
			if dev.MIG != nil {
				return nil, fmt.Errorf("MIG device %s overlaps a device of GPU %s that is held by %s", dev.Device, dev.gpuUUID(), by)
			}
			return nil, fmt.Errorf("GPU %s (%s) is held by %s", dev.Device, dev.gpuUUID(), by)
		}
	}
	mark := func(devs []preparedDevice) {
		for _, dev := range devs {
			d.pending[ref.UID+"/"+dev.Device] = pendingDevice{claim: key, dev: dev}
		}
	}
	mark(devs)
	d.mu.Unlock()
	unmark := func() {
		d.mu.Lock()
		for _, dev := range devs {
			delete(d.pending, ref.UID+"/"+dev.Device)
		}
		d.mu.Unlock()
	}
	if d.cfg.HeldByDevicePlugin != nil {
		byPlugin := d.cfg.HeldByDevicePlugin()
		for _, dev := range devs {
			if pod, ok := byPlugin[dev.gpuUUID()]; ok {
				unmark()
				return nil, fmt.Errorf("GPU %s (%s) is held by pod %s through nvidia.com/gpu (the device plugin); it is free again when that pod ends", dev.Device, dev.gpuUUID(), pod)
			}
		}
	}
	migEdits, err := d.createMIG(ctx, devs)
	if err != nil {
		unmark()
		return nil, err
	}
	d.mu.Lock()
	mark(devs) // with the MIG devices' UUIDs
	d.mu.Unlock()
	cdiDevs := make([]cdi.ClaimDevice, 0, len(devs))
	for i, dev := range devs {
		cd := cdi.ClaimDevice{Name: dev.Device, UUID: dev.UUID, Sim: migEdits[i]}
		if dev.Sharing != nil {
			cd.Env = dev.Sharing.Env
		}
		cdiDevs = append(cdiDevs, cd)
	}
	if _, err := cdi.WriteClaimSpec(d.cfg.CDISpecDir, ref.Namespace, ref.Name, ref.UID, cdiDevs); err != nil {
		_ = d.destroyMIG(devs)
		unmark()
		return nil, err
	}
	d.mu.Lock()
	pc := preparedClaim{Namespace: ref.Namespace, Name: ref.Name, Devices: devs, Prepared: time.Now()}
	d.ck.Claims[ref.UID] = pc
	err = d.saveLocked()
	for _, dev := range devs {
		delete(d.pending, ref.UID+"/"+dev.Device)
	}
	if err != nil {
		delete(d.ck.Claims, ref.UID)
		d.mu.Unlock()
		_ = cdi.RemoveClaimSpec(d.cfg.CDISpecDir, ref.UID)
		_ = d.destroyMIG(devs)
		return nil, err
	}
	d.notifyLocked()
	d.mu.Unlock()
	d.log.Info("prepared claim", "claim", key, "uid", ref.UID, "devices", deviceNames(devs))
	if d.cfg.OnChange != nil {
		d.cfg.OnChange()
	}
	return pc.answer(), nil
}

// claimDevices lists the claim's GPUs of this driver, one entry per
// device with every request it serves; each must be on this node and
// healthy.
func (d *Driver) claimDevices(ctx context.Context, ref ClaimRef, claim *api.ResourceClaim) ([]preparedDevice, error) {
	gpus, err := d.cfg.Source.Devices(ctx)
	if err != nil {
		return nil, fmt.Errorf("list GPUs: %w", err)
	}
	byName := map[string]gpu.Device{}
	for _, g := range gpus {
		byName[DeviceName(g)] = g
	}
	// One entry per device, with every request it serves.
	var devs []preparedDevice
	at := map[string]int{}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != DriverName {
			continue
		}
		if r.Pool != d.cfg.NodeName {
			return nil, fmt.Errorf("request %s: device %s is in pool %s, not this node's (%s)", r.Request, r.Device, r.Pool, d.cfg.NodeName)
		}
		if i, ok := at[r.Device]; ok {
			devs[i].Requests = append(devs[i].Requests, r.Request)
			continue
		}
		g, ok := byName[r.Device]
		p, isMIG := partition{}, false
		if !ok {
			p, isMIG = d.findPartition(r.Device, gpus)
			g, ok = p.gpu, isMIG
		}
		if !ok {
			return nil, fmt.Errorf("request %s: no GPU %s on node %s", r.Request, r.Device, d.cfg.NodeName)
		}
		if !g.Healthy {
			return nil, fmt.Errorf("request %s: GPU %s (%s) is unhealthy (Xid %d: %s)", r.Request, r.Device, g.UUID, g.LastXid, gpu.XidReason(g.LastXid))
		}
		at[r.Device] = len(devs)
		if isMIG {
			devs = append(devs, migPrepared(ref, r.Request, r.Pool, p))
			continue
		}
		devs = append(devs, preparedDevice{
			Requests: []string{r.Request}, Pool: r.Pool, Device: r.Device, UUID: g.UUID,
			CDIDeviceIDs: []string{cdi.DeviceName(strconv.Itoa(g.Index)), cdi.ClaimDeviceName(ref.UID, r.Device)},
		})
	}
	return devs, nil
}

// Unprepare forgets a claim and removes its CDI spec. An unknown claim
// is done already.
func (d *Driver) Unprepare(_ context.Context, ref ClaimRef) error {
	d.mu.Lock()
	pc, ok := d.ck.Claims[ref.UID]
	if !ok {
		d.mu.Unlock()
		return cdi.RemoveClaimSpec(d.cfg.CDISpecDir, ref.UID)
	}
	// Its MIG devices go first: a failed save leaves the claim to be
	// unprepared again, and a device already destroyed is done.
	if err := d.destroyMIG(pc.Devices); err != nil {
		d.mu.Unlock()
		return err
	}
	delete(d.ck.Claims, ref.UID)
	if err := d.saveLocked(); err != nil {
		d.ck.Claims[ref.UID] = pc
		d.mu.Unlock()
		return err
	}
	d.notifyLocked()
	d.mu.Unlock()
	d.log.Info("unprepared claim", "claim", pc.Namespace+"/"+pc.Name, "uid", ref.UID, "devices", deviceNames(pc.Devices))
	if d.cfg.OnChange != nil {
		d.cfg.OnChange()
	}
	return cdi.RemoveClaimSpec(d.cfg.CDISpecDir, ref.UID)
}

func (d *Driver) heldLocked() map[string]string {
	out := map[string]string{}
	for _, c := range d.ck.Claims {
		for _, dev := range c.Devices {
			out[dev.gpuUUID()] = "claim " + c.Namespace + "/" + c.Name
		}
	}
	for _, p := range d.pending {
		out[p.dev.gpuUUID()] = "claim " + p.claim
	}
	return out
}

func (d *Driver) saveLocked() error {
	d.ck.Version = checkpointVersion
	return dra.WriteCheckpoint(filepath.Join(d.cfg.Dir, CheckpointName), d.ck)
}

func (pc preparedClaim) answer() []PreparedDevice {
	out := make([]PreparedDevice, 0, len(pc.Devices))
	for _, dev := range pc.Devices {
		out = append(out, PreparedDevice{Requests: slices.Clone(dev.Requests), Pool: dev.Pool, Device: dev.Device, CDIDeviceIDs: slices.Clone(dev.CDIDeviceIDs)})
	}
	return out
}

func deviceNames(devs []preparedDevice) []string {
	out := make([]string, 0, len(devs))
	for _, d := range devs {
		out = append(out, d.Device)
	}
	return out
}

// SliceDevices are the devices the node's slice lists now: every healthy
// GPU that the device plugin neither holds nor is picking (Withdraw),
// with its attributes.
func (d *Driver) SliceDevices(ctx context.Context) ([]api.Device, error) {
	gpus, err := d.cfg.Source.Devices(ctx)
	if err != nil {
		return nil, fmt.Errorf("list GPUs: %w", err)
	}
	topo, err := d.cfg.Source.Topology(ctx)
	if err != nil {
		return nil, fmt.Errorf("GPU topology: %w", err)
	}
	var byPlugin map[string]string
	if d.cfg.HeldByDevicePlugin != nil {
		byPlugin = d.cfg.HeldByDevicePlugin()
	}
	d.mu.Lock()
	withdrawn := maps.Clone(d.withdrawn)
	d.mu.Unlock()
	all := Devices(gpus, topo, d.cfg.Source.Simulated(), d.cfg.Labels[CliqueLabel])
	out := make([]api.Device, 0, len(all))
	for i, g := range gpus {
		if !g.Healthy {
			continue
		}
		if _, held := byPlugin[g.UUID]; held || withdrawn[g.UUID] > 0 {
			continue
		}
		out = append(out, all[i])
	}
	return out, nil
}

// Devices describes GPUs as DRA devices, in their order. topo (the host's
// matrix, in the same order) gives the NVLink domains and, for simulated
// GPUs, the PCIe roots; clique, when not empty, is the node's NVLink clique.
func Devices(gpus []gpu.Device, topo *gputopology.Topology, simulated bool, clique string) []api.Device {
	domains := nvlinkDomains(topo)
	roots := pcieRoots(gpus, topo, simulated)
	out := make([]api.Device, 0, len(gpus))
	for i, g := range gpus {
		attrs := map[string]api.DeviceAttribute{
			"type":                  str("gpu"),
			"uuid":                  str(g.UUID),
			"index":                 integer(int64(g.Index)),
			"minor":                 integer(int64(g.MinorNumber)),
			"productName":           str(g.Name),
			"brand":                 str("Nvidia"),
			"architecture":          str(architecture(g.Family)),
			"cudaComputeCapability": version(fmt.Sprintf("%d.%d", g.ComputeMajor, g.ComputeMinor)),
		}
		if v := version(g.DriverVersion); v.VersionValue != nil {
			attrs["driverVersion"] = v
		}
		if v := version(g.CUDAVersion); v.VersionValue != nil {
			attrs["cudaDriverVersion"] = v
		}
		if bus := pciBusID(g.PCIBusID); bus != "" {
			attrs[AttrPCIBusID] = str(bus)
		}
		if i < len(roots) && roots[i] != "" {
			attrs[AttrPCIeRoot] = str(roots[i])
		}
		if simulated {
			// NVML's addressing mode (None, HMM, ATS); skiff's simulated
			// GPUs have none. Real GPUs: skiff does not read it yet.
			attrs["addressingMode"] = str("None")
		}
		if i < len(domains) && domains[i] >= 0 {
			attrs[AttrNVLinkDomain] = integer(int64(domains[i]))
		}
		if clique != "" {
			attrs[AttrClique] = str(clique)
		}
		out = append(out, api.Device{
			Name:       DeviceName(g),
			Attributes: attrs,
			Capacity:   map[string]api.DeviceCapacity{"memory": {Value: *resource.NewQuantity(int64(g.MemoryMiB)<<20, resource.BinarySI)}},
		})
	}
	return out
}

func str(s string) api.DeviceAttribute     { return api.DeviceAttribute{StringValue: &s} }
func integer(n int64) api.DeviceAttribute  { return api.DeviceAttribute{IntValue: &n} }
func version(s string) api.DeviceAttribute { v, ok := semver(s); return versionAttr(v, ok) }

func versionAttr(v string, ok bool) api.DeviceAttribute {
	if !ok {
		return api.DeviceAttribute{}
	}
	return api.DeviceAttribute{VersionValue: &v}
}

// semver turns "12.4" into 12.4.0 and "535.104.05" into 535.104.5 (a
// semantic version has three numbers without leading zeros).
func semver(s string) (string, bool) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if s == "" || len(parts) > 3 {
		return "", false
	}
	nums := make([]string, 3)
	for i := range nums {
		nums[i] = "0"
		if i < len(parts) {
			n, err := strconv.ParseUint(parts[i], 10, 32)
			if err != nil {
				return "", false
			}
			nums[i] = strconv.FormatUint(n, 10)
		}
	}
	return strings.Join(nums, "."), true
}

// architecture is NVIDIA's word (Ampere) for GFD's family (ampere).
func architecture(family string) string {
	if family == "" {
		return "Unknown"
	}
	return strings.ToUpper(family[:1]) + family[1:]
}

// pciBusID turns NVML's 00000000:07:00.0 into Kubernetes' 0000:07:00.0.
func pciBusID(nvml string) string {
	id := strings.ToLower(strings.TrimSpace(nvml))
	dom, rest, ok := strings.Cut(id, ":")
	if !ok {
		return ""
	}
	if len(dom) > 4 {
		dom = dom[len(dom)-4:]
	}
	return dom + ":" + rest
}

// Run publishes the node's ResourceSlice, then again after every GPU
// health event, device plugin allocation change or fault, until ctx ends.
// Failed writes are retried with a backoff.
func (d *Driver) Run(ctx context.Context) error {
	if d.cfg.Client == nil {
		return errors.New("gpu DRA driver: no API client to publish the ResourceSlice")
	}
	events := d.cfg.Source.Watch(ctx)
	if d.claims != nil {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); d.claims.Run(ctx) }()
		defer wg.Wait()
	}
	b := backoff.Backoff{Policy: backoff.Policy{Initial: 200 * time.Millisecond, Max: 10 * time.Second}}
	retry := time.NewTimer(0)
	defer retry.Stop()
	<-retry.C
	for {
		var plugin <-chan struct{}
		if d.cfg.DevicePluginChanged != nil {
			plugin = d.cfg.DevicePluginChanged()
		}
		if err := d.Publish(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			delay := b.Next()
			d.log.Warn("publish ResourceSlice (will retry)", "err", err, "retry", delay)
			retry.Reset(delay)
		} else {
			b.Reset()
		}
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-events:
			if !ok {
				return nil
			}
		case <-plugin:
		case <-d.republish:
		case <-retry.C:
		}
	}
}
