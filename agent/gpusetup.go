package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"skiff.dev/skiff/agent/devices"
	"skiff.dev/skiff/agent/devices/gpuplugin"
	"skiff.dev/skiff/agent/dra"
	"skiff.dev/skiff/agent/dra/gpudriver"
	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/cdi"
	"skiff.dev/skiff/agent/gpu/usage"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/client"
)

// GPUConfig says how a node finds its GPUs (SetUpGPUs).
type GPUConfig struct {
	// Spec is the --gpus flag: auto, nvml, none, sim:NAME, sim:FILE.yaml.
	Spec string
	// NodeName seeds simulated UUIDs and names the CDI spec.
	NodeName string
	// DataDir is the node's data directory: the device plugin directory
	// (DataDir/device-plugins, with the allocation checkpoint) and, for
	// simulated GPUs, the CDI spec (DataDir/cdi) and its files
	// (DataDir/gpu) go there.
	DataDir string
	// PluginDir overrides DataDir/device-plugins.
	PluginDir string
	// DevicePlugin is DevicePluginBuiltin ("" too) or
	// DevicePluginExternal (the --device-plugin flag).
	DevicePlugin string
	// Client is the node's API client, for DRA: the GPU driver publishes
	// the node's ResourceSlice and reads claims with it, and the DRA
	// manager reads the pods' claims. nil: no DRA on this node.
	Client client.Interface
	// DevicePluginConfig is the ConfigMap of device plugin configs, NAME
	// (in kube-system) or NAMESPACE/NAME; "" is
	// kube-system/nvidia-device-plugin-config (api.NVIDIADevicePluginConfigMap).
	// It is read with Client.
	DevicePluginConfig string
	// Labels are the node's labels (the GPU driver reads the NVLink clique).
	Labels map[string]string
	// DynamicMIG: the DRA driver's partitionable MIG devices
	// (gpudriver.Config.DynamicMIG).
	DynamicMIG bool
	// Log, or discard.
	Log *slog.Logger
}

// Values of GPUConfig.DevicePlugin, the agent's --device-plugin flag.
const (
	// DevicePluginBuiltin: the agent runs skiff's GPU device plugins
	// (agent/devices/gpuplugin, under the sharing config in force) in its
	// own process; they register through kubelet.sock like any plugin.
	DevicePluginBuiltin = "builtin"
	// DevicePluginExternal: the agent runs none. The device manager
	// listens as always and the node's nvidia.com/gpu comes from whatever
	// plugin registers through kubelet.sock, as on a kubelet: `skiff
	// device-plugin` in a DaemonSet pod
	// (examples/workloads/skiff-device-plugin-daemonset.yaml), whose
	// hostPath /var/lib/kubelet/device-plugins is this node's
	// DATA-DIR/device-plugins (podworker.NodePath). The capacity is there
	// while that plugin is, and drops to 0 when it ends. The GPUs' CDI
	// spec, labels, topology, DRA driver and meter stay the agent's; the
	// sharing and MIG configs (the ConfigMap) are the external plugin's
	// to follow, and this node does not.
	DevicePluginExternal = "external"
)

// ValidateDevicePlugin checks a --device-plugin value.
func ValidateDevicePlugin(v string) error {
	switch v {
	case "", DevicePluginBuiltin, DevicePluginExternal:
		return nil
	}
	return fmt.Errorf("--device-plugin %q: want %s (the agent runs skiff's GPU device plugin) or %s (a device plugin pod registers through kubelet.sock)", v, DevicePluginBuiltin, DevicePluginExternal)
}

// GPUs is a node's GPU stack: the Source, the device manager (the kubelet
// side of the device plugin API) and the built-in GPU device plugin, which
// registers with the manager over their unix sockets like any plugin.
type GPUs struct {
	// Source of the GPUs (gpu.None() without any).
	Source gpu.Source
	// Message is the one line for the node's output ("GPUs: 8x ...").
	Message string
	// Manager is the device manager; nil when it could not start on a node
	// without GPUs (a warning, not an error).
	Manager *devices.Manager
	// CDISpecDir is where the simulated GPUs' CDI spec and the DRA
	// claims' specs are (DataDir/cdi); real GPUs' own spec is nvidia-ctk's
	// (/etc/cdi, /var/run/cdi). "" without GPUs.
	CDISpecDir string
	// DRA is the DRA manager (the kubelet side, agent/dra); nil without a
	// Client, or when it could not start (a warning).
	DRA *dra.Manager
	// Driver is the built-in gpu.nvidia.com DRA driver; nil without GPUs
	// or without DRA.
	Driver *gpudriver.Driver
	// Plugins are the NVIDIA device plugins under the sharing config in
	// force (one per resource); nil without GPUs.
	Plugins *gpuplugin.Set
	// Meter samples what the GPUs do (agent/gpu/usage): the driver's
	// sensors on real GPUs, the simulator's model over the containers'
	// gpu-load on simulated ones; nil without GPUs.
	Meter *usage.Meter

	labels  map[string]string
	plugin  string       // DevicePluginBuiltin or DevicePluginExternal
	devs    []gpu.Device // the GPUs at setup (identity does not change)
	cdi     *cdi.Config  // the simulated driver's spec (nil on real GPUs)
	dataDir string
	// shortDirs are the socket directories socketDir made outside the
	// data directory (/tmp/skiff-sock-HASH/...), removed by Close when
	// the plugins have taken their sockets away.
	shortDirs []string
	log       *slog.Logger
	sharing   sharingState          // where the config in force came from
	loadRoot  string                // the simulated loads' directories ("" on real GPUs)
	topo      *gputopology.Topology // of the GPUs at setup, for the annotations
	cancel    context.CancelFunc
	draCancel context.CancelFunc
	wg        sync.WaitGroup
	once      sync.Once
	// meterCancel stops the sweeper of simulated loads; cfgCancel the
	// config watch.
	meterCancel context.CancelFunc
	cfgCancel   context.CancelFunc
	mig         *migManager // the MIG manager
	smu         sync.Mutex  // sharing, and Plugins while setting up
	client      client.Interface
}

// SetUpGPUs opens the GPUs of --gpus, writes the CDI spec of simulated
// ones, starts the device manager and, when there are GPUs and
// cfg.DevicePlugin is not DevicePluginExternal, the built-in plugin.
// Without GPUs nothing but the manager runs (external plugins can still
// register). Close stops everything.
func SetUpGPUs(ctx context.Context, cfg GPUConfig) (*GPUs, error) {
	if err := ValidateDevicePlugin(cfg.DevicePlugin); err != nil {
		return nil, err
	}
	lg := cfg.Log
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	src, msg, err := gpu.Open(cfg.Spec, gpu.Options{NodeName: cfg.NodeName, Logger: lg})
	if err != nil {
		return nil, err
	}
	g := &GPUs{Source: src, Message: msg, labels: map[string]string{}, plugin: DevicePluginBuiltin, dataDir: cfg.DataDir, log: lg}
	if cfg.DevicePlugin != "" {
		g.plugin = cfg.DevicePlugin
	}
	devs, err := src.Devices(ctx)
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("list GPUs: %w", err)
	}
	g.labels = gpu.Labels(devs, src.Simulated())
	g.devs = devs
	if len(devs) > 0 {
		if g.topo, err = src.Topology(ctx); err != nil {
			lg.Warn("GPU topology unknown: the scheduler cannot rank this node's GPU sets", "err", err)
			g.topo = nil
		}
	}
	if src.Simulated() && len(devs) > 0 {
		topo, err := src.Topology(ctx)
		if err != nil {
			src.Close()
			return nil, fmt.Errorf("GPU topology: %w", err)
		}
		ccfg := cdi.Config{NodeName: cfg.NodeName, SpecDir: filepath.Join(cfg.DataDir, "cdi"), DataDir: filepath.Join(cfg.DataDir, "gpu")}
		if err := os.MkdirAll(ccfg.SpecDir, 0o755); err != nil {
			src.Close()
			return nil, fmt.Errorf("CDI spec dir: %w", err)
		}
		if _, err := cdi.WriteSimSpec(ccfg, devs, nil, topo); err != nil {
			src.Close()
			return nil, err
		}
		g.CDISpecDir = ccfg.SpecDir
		g.loadRoot = ccfg.LoadRoot()
		g.cdi = &ccfg
	} else if len(devs) > 0 {
		if err := cdi.RealCDIAvailable(); err != nil {
			lg.Warn("GPU containers will not start until a CDI spec exists", "err", err)
			g.Message += "\n" + err.Error()
		}
	}

	dcfg := devices.DefaultConfig()
	dcfg.Dir = cfg.PluginDir
	if dcfg.Dir == "" {
		dcfg.Dir = filepath.Join(cfg.DataDir, "device-plugins")
	}
	dcfg.Log = lg
	// One GPU inventory: the GPUs DRA claims hold are not the device
	// plugin's to hand out (the driver is made below, before any pod).
	dcfg.Unavailable = func(resource string, held []devices.Holding) map[string]string {
		if len(devs) == 0 {
			return nil
		}
		return g.unavailable(resource, held)
	}
	// Before a pick is recorded: its GPUs leave the node's ResourceSlice,
	// then the claims' allocations are read afresh, so a claim allocated
	// from a slice that still listed them is seen (Driver.Withdraw).
	dcfg.Confirm = func(ctx context.Context, resource string, ids []string) (func(), error) {
		if len(devs) == 0 || g.Driver == nil {
			return func() {}, nil
		}
		return g.Driver.Withdraw(ctx, g.parentGPUs(ids))
	}
	m, err := devices.New(dcfg)
	if err == nil {
		err = m.Start(ctx)
	}
	if err != nil {
		if len(devs) == 0 {
			lg.Warn("device manager not started: no device plugin can register", "err", err)
			return g, nil
		}
		src.Close()
		return nil, fmt.Errorf("device manager: %w", err)
	}
	g.Manager = m
	g.client = cfg.Client
	if cfg.Client != nil {
		if err := g.setUpDRA(ctx, cfg, len(devs) > 0, lg); err != nil {
			g.Close()
			return nil, err
		}
	}
	if len(devs) == 0 {
		return g, nil
	}
	if err := g.startMeter(); err != nil {
		g.Close()
		return nil, err
	}
	if g.plugin == DevicePluginExternal {
		g.Message += fmt.Sprintf("\nbuilt-in GPU device plugin off (--device-plugin=%s): nvidia.com/gpu comes from a device plugin registering at %s "+
			"(a pod's hostPath /var/lib/kubelet/device-plugins is that directory)", DevicePluginExternal, m.SocketPath())
		return g, nil
	}
	if err := g.startPlugins(ctx, dcfg.Dir, lg); err != nil {
		g.Close()
		return nil, err
	}
	if cfg.Client != nil {
		wctx, cancel := context.WithCancel(context.Background())
		g.cfgCancel = cancel
		g.watchConfig(wctx, cfg.Client, cfg.NodeName, cfg.DevicePluginConfig, lg)
	}
	return g, nil
}

// startMeter makes the node's Meter and, on simulated GPUs, the sweeper
// that removes the loads of killed containers: at every device change (a
// pod's devices were released) and every second (a gpu-load killed inside
// a running container).
func (g *GPUs) startMeter() error {
	m, err := usage.New(usage.Config{Source: g.Source, Root: g.loadRoot, Holders: g.holders, Layout: g.layoutNow})
	if err != nil {
		return err
	}
	g.Meter = m
	if g.loadRoot == "" {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.meterCancel = cancel
	g.wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			changed := g.Manager.Changed()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-changed:
			}
			_ = m.Sweep(ctx) // a failed sweep is retried next round
		}
	})
	return nil
}

// holders maps every allocated device to who holds it: the device
// manager's containers, and the DRA claims' GPUs.
func (g *GPUs) holders() map[string]usage.Holder {
	out := map[string]usage.Holder{}
	if g.Driver != nil {
		for uuid, claim := range g.Driver.Held() {
			ns, name, _ := strings.Cut(strings.TrimPrefix(claim, "claim "), "/")
			out[uuid] = usage.Holder{Namespace: ns, Claim: name}
		}
	}
	if g.Manager != nil {
		for _, h := range g.Manager.Holdings() {
			for _, id := range h.DeviceIDs {
				out[id] = usage.Holder{Namespace: h.Namespace, Pod: h.Pod, Container: h.Container}
			}
		}
	}
	return out
}

// setUpDRA starts the DRA manager and, with GPUs, the gpu.nvidia.com
// driver, which registers with the manager over its registration socket
// like any kubelet plugin. Paths as the kubelet's, under DataDir:
// plugins_registry/ (registration sockets), plugins/gpu.nvidia.com/
// (dra.sock, the driver's checkpoint), dra/ (the manager's checkpoint);
// the two socket directories move to a short one (socketDir) when DataDir
// is too deep for unix socket paths.
func (g *GPUs) setUpDRA(ctx context.Context, cfg GPUConfig, withGPUs bool, lg *slog.Logger) error {
	mcfg := dra.DefaultConfig()
	regDir, err := socketDir(cfg.DataDir, "plugins_registry", gpudriver.RegistrationSocketName)
	if err != nil {
		return err
	}
	mcfg.RegistryDir = regDir
	g.noteSocketDir(cfg.DataDir, regDir)
	mcfg.StateDir = filepath.Join(cfg.DataDir, "dra")
	mcfg.Client, mcfg.Log = cfg.Client, lg
	dm, err := dra.New(mcfg)
	if err != nil {
		return err // a damaged checkpoint: refuse, as the device manager does
	}
	if err := dm.Start(ctx); err != nil {
		lg.Warn("DRA manager not started: pods with resource claims cannot start on this node", "err", err)
		return nil
	}
	g.DRA = dm
	if !withGPUs {
		return nil
	}
	specDir := filepath.Join(cfg.DataDir, "cdi")
	plugDir, err := socketDir(cfg.DataDir, filepath.Join("plugins", gpudriver.DriverName), gpudriver.SocketName)
	if err != nil {
		return err
	}
	g.noteSocketDir(cfg.DataDir, plugDir)
	drv, err := gpudriver.New(gpudriver.Config{
		Source: g.Source, NodeName: cfg.NodeName, Client: cfg.Client,
		Dir:                 plugDir,
		RegistryDir:         mcfg.RegistryDir,
		CDISpecDir:          specDir,
		HeldByDevicePlugin:  g.heldByDevicePlugin,
		DevicePluginChanged: g.Manager.Changed,
		OnChange:            g.Manager.Notify,
		Labels:              cfg.Labels,
		DynamicMIG:          cfg.DynamicMIG,
		SimCDI:              g.cdi,
		Log:                 lg,
	})
	if err != nil {
		return err
	}
	if err := drv.Start(); err != nil {
		return err
	}
	g.Driver = drv
	g.CDISpecDir = specDir
	dctx, cancel := context.WithCancel(context.Background())
	g.draCancel = cancel
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := drv.Run(dctx); err != nil {
			lg.Error("GPU DRA driver", "err", err)
		}
	}()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if !drv.WaitSynced(wctx) {
		lg.Warn("the GPU DRA driver has not listed the ResourceClaims yet: the device plugin may hand out a GPU allocated to a claim meanwhile")
	}
	if err := dm.Wait(wctx, func(drivers []string, _ map[string][]string) bool {
		return slices.Contains(drivers, gpudriver.DriverName)
	}); err != nil {
		lg.Warn("the GPU DRA driver has not registered yet", "err", err)
	}
	return nil
}

// Configure gives an agent config the node's devices: the allocator, the
// device plugins' resources, and the GPU labels.
func (g *GPUs) Configure(c *Config) {
	if g == nil {
		return
	}
	if g.DRA != nil {
		c.Claims = g.DRA
	}
	if g.Manager != nil {
		c.Devices = g.Manager
		c.ExtraResources = g.Manager.Resources
		c.DevicesChanged = g.Manager.Changed
		c.Annotations = g.Annotations
	}
	if fi, err := g.Faults(); err == nil {
		c.GPUFaults = fi
	}
	if g.Meter != nil {
		c.GPUMeter = g.Meter
	}
	if len(g.devs) > 0 {
		c.DeviceLabels = g.Labels // GFD's labels follow the config (devicestatus.go)
		c.OwnedLabel = func(key string) bool { return key == api.LabelSkiffDevicePlugin || gpuplugin.OwnedLabel(key) }
	}
}

// Annotations are the node annotations about the GPUs (gputopology.AnnotationTopology
// and gputopology.AnnotationAllocations), from the Source's devices and the device
// manager's health and allocations. Without GPUs (or without a known
// topology) it returns none. It has the signature of agent.Config.Annotations.
func (g *GPUs) Annotations(ctx context.Context) (map[string]string, error) {
	if g == nil || g.Manager == nil || g.topo == nil {
		return nil, nil
	}
	devs, err := g.Source.Devices(ctx)
	if err != nil {
		return nil, fmt.Errorf("list GPUs: %w", err)
	}
	if len(devs) != g.topo.N() {
		return nil, fmt.Errorf("GPU annotations: %d GPUs, topology of %d", len(devs), g.topo.N())
	}
	snap := g.Manager.Snapshot()
	// The device manager's view of health is what allocation uses: a GPU
	// is healthy when its plugin said so last of one of its devices.
	healthyGPU := map[string]bool{}
	for _, sd := range g.layoutNow() {
		if snap[sd.Resource].Devices[sd.ID] == pluginapi.Healthy {
			healthyGPU[sd.ParentUUID] = true
		}
	}
	heldBy := g.heldByDevicePlugin() // any part of the GPU
	var claimed map[string]string
	if g.Driver != nil {
		claimed = g.Driver.Held() // "claim NS/NAME"
	}
	ng := gputopology.NodeGPUs{Topology: g.topo, Healthy: []int{}, Free: []int{}}
	allocs := map[string]string{}
	for _, d := range devs {
		healthy := healthyGPU[d.UUID]
		ng.Devices = append(ng.Devices, gputopology.NodeGPU{Index: d.Index, UUID: d.UUID, Name: d.Name, Healthy: healthy, LastXid: d.LastXid})
		pod, held := heldBy[d.UUID]
		if held {
			allocs[d.UUID] = pod
		} else if claim, ok := claimed[d.UUID]; ok {
			allocs[d.UUID], held = claim, true
		}
		if healthy {
			ng.Healthy = append(ng.Healthy, d.Index)
			if !held {
				ng.Free = append(ng.Free, d.Index)
			}
		}
	}
	topo, err := json.Marshal(ng)
	if err != nil {
		return nil, err
	}
	al, err := json.Marshal(allocs)
	if err != nil {
		return nil, err
	}
	dv, err := json.Marshal(g.nodeDevices())
	if err != nil {
		return nil, err
	}
	hami := "" // "": removed (agent.setAnnotations)
	if st := g.currentSharing(); st.HAMi {
		hami = gpuplugin.HAMiRegistration(devs, st.hamiSettings())
	}
	return map[string]string{gputopology.AnnotationTopology: string(topo), gputopology.AnnotationAllocations: string(al),
		gputopology.AnnotationDevices: string(dv), api.HAMiNodeRegister: hami}, nil
}

// Faults is the simulator's fault injector, or ErrNotSimulated.
func (g *GPUs) Faults() (gpu.FaultInjector, error) {
	if g == nil {
		return nil, ErrNotSimulated
	}
	fi, ok := g.Source.(gpu.FaultInjector)
	if !ok {
		return nil, ErrNotSimulated
	}
	return fi, nil
}

// ErrNotSimulated: faults can only be injected into simulated GPUs.
var ErrNotSimulated = errors.New("this node's GPUs are not simulated: faults can only be injected with --gpus sim:NAME")

// Close stops the plugin, the manager and the Source. Safe to call twice.
func (g *GPUs) Close() {
	if g == nil {
		return
	}
	g.once.Do(func() {
		if g.cancel != nil {
			g.cancel()
		}
		if g.draCancel != nil {
			g.draCancel()
		}
		if g.meterCancel != nil {
			g.meterCancel()
		}
		if g.cfgCancel != nil {
			g.cfgCancel()
		}
		g.wg.Wait()
		if g.Plugins != nil {
			g.Plugins.Stop()
		}
		if g.Driver != nil {
			g.Driver.Stop()
		}
		if g.DRA != nil {
			g.DRA.Stop()
		}
		if g.Manager != nil {
			g.Manager.Stop()
		}
		g.Source.Close()
		for _, d := range slices.Backward(g.shortDirs) {
			removeShortSocketDir(d)
		}
	})
}

// noteSocketDir remembers dir for Close when socketDir put it outside
// dataDir.
func (g *GPUs) noteSocketDir(dataDir, dir string) {
	if !strings.HasPrefix(dir, dataDir+string(filepath.Separator)) {
		g.shortDirs = append(g.shortDirs, dir)
	}
}

// removeShortSocketDir removes dir, a socket directory under
// /tmp/skiff-sock-HASH, and the directories above it up to that one, each
// only when empty: a socket still there (a plugin that runs on) keeps its
// directories, and the next agent on the data directory makes them again.
func removeShortSocketDir(dir string) {
	for d := dir; os.Remove(d) == nil; d = filepath.Dir(d) {
		if strings.HasPrefix(filepath.Base(d), shortSocketPrefix) {
			return
		}
	}
}

// shortSocketPrefix starts the name of socketDir's short directories.
const shortSocketPrefix = "skiff-sock-"

// agentsDir reports whether st is a directory an agent may use as its
// short socket directory (and remove): mode 0700, this user's. One
// someone else prepared in /tmp is neither used nor removed.
func agentsDir(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return st.IsDir() && st.Mode().Perm() == 0o700 && ok && int(sys.Uid) == os.Getuid()
}

// RemoveShortSocketDir removes dataDir's short socket directory
// (ShortSocketDir) and the sockets a killed agent left in it, when it is
// there and an agent's (agentsDir); it returns the directory it removed,
// "" for none. skiff reset calls it for each node, never while the node
// runs.
func RemoveShortSocketDir(dataDir string) (string, error) {
	dir := ShortSocketDir(dataDir)
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("socket directory: %w", err)
	}
	if !agentsDir(st) {
		return "", nil // not an agent's: not ours to remove
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("remove socket directory: %w", err)
	}
	return dir, nil
}

// ShortSocketDir is where an agent on dataDir keeps its plugin sockets
// when dataDir is too deep for unix socket paths (socketDir): a directory
// of the temporary directory named by a hash of dataDir. An agent killed
// leaves it; skiff reset removes it (node.Reset).
func ShortSocketDir(dataDir string) string {
	sum := sha256.Sum256([]byte(dataDir))
	return filepath.Join(os.TempDir(), shortSocketPrefix+hex.EncodeToString(sum[:6]))
}

// maxSocketPath is the longest unix socket path Linux takes (sun_path is
// 108 bytes with its terminating NUL).
const maxSocketPath = 107

// socketDir is DATA-DIR/sub, where the kubelet keeps its plugin sockets,
// unless a socket named longest there would pass the unix socket path
// limit (a data directory deep in a home or a test's temporary
// directory): then it is sub under a short directory of its own,
// /tmp/skiff-sock-HASH (HASH names the data directory, so every node of
// one machine keeps its own and a restarted agent finds the same one).
// That directory is made 0700 and must be a real directory owned by this
// user: a directory someone else prepared in /tmp is refused, never used.
func socketDir(dataDir, sub, longest string) (string, error) {
	dir := filepath.Join(dataDir, sub)
	if len(filepath.Join(dir, longest)) <= maxSocketPath {
		return dir, nil
	}
	base := ShortSocketDir(dataDir)
	if err := os.Mkdir(base, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("socket directory for %s: %w", dataDir, err)
	}
	st, err := os.Lstat(base)
	if err != nil {
		return "", fmt.Errorf("socket directory for %s: %w", dataDir, err)
	}
	if !agentsDir(st) {
		return "", fmt.Errorf("socket directory %s (the data directory %s is too deep for unix sockets): not a directory of mode 0700 owned by this user; remove it or use a shorter --data-dir", base, dataDir)
	}
	out := filepath.Join(base, sub)
	if len(filepath.Join(out, longest)) > maxSocketPath {
		return "", fmt.Errorf("socket directory %s: too long for a unix socket path; set TMPDIR shorter or use a shorter --data-dir", out)
	}
	return out, nil
}
