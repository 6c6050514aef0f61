// Package gpuplugin is skiff's built-in NVIDIA GPU device plugin: a gRPC
// server on a unix socket (nvidia-gpu.sock) that speaks the device plugin
// API v1beta1 for nvidia.com/gpu, over the GPUs of an agent/gpu Source
// (real NVML or simulated).
//
// It plays the part of NVIDIA's k8s-device-plugin, and registers with the
// device manager's kubelet.sock exactly as that plugin (or any external
// one) would, even when it runs in the agent's process:
//
//   - ListAndWatch advertises every GPU by UUID with its health, and sends
//     the list again after every health event of the Source (re-reading
//     Source.Devices: events are hints). Unlike NVIDIA's plugin, a GPU that
//     turns healthy again is offered again.
//   - GetPreferredAllocation picks the best-connected set (gputopology.PreferredSet).
//   - Allocate answers with CDI device names (nvidia.com/gpu=<index>, the
//     names both `nvidia-ctk cdi generate` and skiff's simulated spec
//     define) and NVIDIA_VISIBLE_DEVICES=<uuids>.
//   - PreStartContainer is not needed and does nothing.
//
// When the manager goes away (its stream to ListAndWatch ends), Run
// registers again, so a standalone plugin survives an agent restart.
package gpuplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/cdi"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/client/backoff"
)

const (
	// ResourceName is what the plugin advertises.
	ResourceName = "nvidia.com/gpu"
	// SocketName is the plugin's socket in the plugin directory.
	SocketName = "nvidia-gpu.sock"
	// EnvVisibleDevices lists the allocated GPUs' UUIDs, as NVIDIA's plugin sets it.
	EnvVisibleDevices = "NVIDIA_VISIBLE_DEVICES"
)

// Config of a Plugin.
type Config struct {
	// Source of the GPUs; required.
	Source gpu.Source
	// Dir is the plugin directory, where the manager's kubelet.sock is.
	Dir string
	// Socket is the plugin's socket name in Dir (default SocketFor(Resource)).
	Socket string
	// Resource is the extended resource it serves (default nvidia.com/gpu).
	Resource string
	// Devices are the devices it advertises (the node's layout for
	// Resource, gpuplugin.Layout); nil: every GPU of Source, whole.
	Devices []gpu.SubDevice
	// FailRequestsGreaterThanOne refuses a container more than one shared
	// device (the sharing config's flag).
	FailRequestsGreaterThanOne bool
	// AllocationPolicy for replicas: AllocationDistributed (default) or
	// AllocationPacked.
	AllocationPolicy string
	// HAMi: the devices are HAMi's slots (HAMiSlots) and Allocate hands
	// out what HAMiDecision says the scheduler decided for the container.
	HAMi          bool
	HAMiSettings  api.HAMiNodeSettings
	HAMiDecision  HAMiDecision
	HAMiAllocated HAMiAllocated
	// Log, or discard.
	Log *slog.Logger
}

// SocketFor is the socket name of a resource's plugin, as NVIDIA's plugin
// names them: nvidia-gpu.sock, nvidia-gpu.shared.sock, nvidia-mig-1g.5gb.sock.
func SocketFor(resource string) string {
	return "nvidia-" + strings.TrimPrefix(resource, "nvidia.com/") + ".sock"
}

// Plugin is the GPU device plugin server.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	srv    *grpc.Server
	ended  chan struct{} // closed and replaced when a ListAndWatch stream ends
	done   chan struct{} // closed by Stop
	closed bool
	wg     sync.WaitGroup
}

var _ pluginapi.DevicePluginServer = (*Plugin)(nil)

// New builds a Plugin; Start or Run serves it.
func New(cfg Config) (*Plugin, error) {
	if cfg.Source == nil {
		return nil, errors.New("gpu device plugin: a GPU source is required")
	}
	if cfg.Dir == "" {
		return nil, errors.New("gpu device plugin: the plugin directory is required")
	}
	if cfg.Resource == "" {
		cfg.Resource = ResourceName
	}
	if cfg.Socket == "" {
		cfg.Socket = SocketFor(cfg.Resource)
	}
	lg := cfg.Log
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &Plugin{cfg: cfg, log: lg.With("component", "gpu-device-plugin"), ended: make(chan struct{}), done: make(chan struct{})}, nil
}

// SocketPath is where the plugin listens.
func (p *Plugin) SocketPath() string { return filepath.Join(p.cfg.Dir, p.cfg.Socket) }

// Serve listens on the plugin's socket (replacing a stale one) and serves
// until Stop. It does not register.
func (p *Plugin) Serve() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("gpu device plugin: stopped")
	}
	if p.srv != nil {
		return nil
	}
	sock := p.SocketPath()
	if err := os.MkdirAll(p.cfg.Dir, 0o750); err != nil {
		return fmt.Errorf("gpu device plugin: %w", err)
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("gpu device plugin: remove stale %s: %w", sock, err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("gpu device plugin: listen on %s: %w", sock, err)
	}
	p.srv = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.srv, p)
	srv := p.srv
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := srv.Serve(ln); err != nil {
			p.log.Warn("device plugin server stopped", "err", err)
		}
	}()
	return nil
}

// Register calls the manager's Registration service once.
func (p *Plugin) Register(ctx context.Context) error {
	kubelet := filepath.Join(p.cfg.Dir, "kubelet.sock")
	conn, err := grpc.NewClient("unix://"+kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("register with %s: %w", kubelet, err)
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     p.cfg.Socket,
		ResourceName: p.cfg.Resource,
		Options:      options(),
	})
	if err != nil {
		return fmt.Errorf("register %s with %s: %w", p.cfg.Resource, kubelet, err)
	}
	p.log.Info("registered with the device manager", "resource", p.cfg.Resource, "socket", p.SocketPath(), "devices", len(p.cfg.Devices))
	return nil
}

// Run serves, registers, and registers again whenever the manager's stream
// ends (an agent restart), with a backoff while it cannot; until ctx ends
// or Stop. It returns nil then.
func (p *Plugin) Run(ctx context.Context) error {
	if err := p.Serve(); err != nil {
		return err
	}
	defer p.Stop()
	// 100ms doubling to 5s: the manager is usually back within a second
	// (an agent restart), and a plugin without one is not busy.
	b := backoff.Backoff{Policy: backoff.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}}
	for {
		p.mu.Lock()
		ended := p.ended
		p.mu.Unlock()
		err := p.Register(ctx)
		if err == nil {
			since := time.Now()
			select {
			case <-ctx.Done():
				return nil
			case <-p.done:
				return nil
			case <-ended: // the manager went away: register again
			}
			if time.Since(since) > 30*time.Second {
				b.Reset() // it was a good registration
			}
			err = errors.New("the device manager's ListAndWatch stream ended")
		}
		if ctx.Err() != nil {
			return nil
		}
		delay := b.Next()
		p.log.Warn("register with the device manager (will retry)", "err", err, "retry", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-p.done:
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Stop stops the server and ends every stream. Safe to call twice.
func (p *Plugin) Stop() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.done)
	srv := p.srv
	p.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
	p.wg.Wait()
	if srv != nil {
		os.Remove(p.SocketPath())
	}
}

func options() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}
}

// GetDevicePluginOptions: preferred allocation yes, PreStartContainer no.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return options(), nil
}

// ListAndWatch sends the device list, then again after every health event.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	ctx := stream.Context()
	defer func() {
		p.mu.Lock()
		close(p.ended)
		p.ended = make(chan struct{})
		p.mu.Unlock()
	}()
	events := p.cfg.Source.Watch(ctx) // before the first list: no event is missed
	var last []*pluginapi.Device
	for {
		devs, err := p.devices(ctx)
		if err != nil {
			return status.Errorf(codes.Unavailable, "list GPUs: %v", err)
		}
		if last == nil || !sameDevices(last, devs) {
			if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
				return err
			}
			last = devs
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.done:
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil // the Source closed
			}
			p.log.Info("GPU health event", "index", ev.Index, "uuid", ev.UUID, "healthy", ev.Healthy, "reason", ev.Reason)
		}
	}
}

func sameDevices(a, b []*pluginapi.Device) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Health != b[i].Health {
			return false
		}
	}
	return true
}

func (p *Plugin) devices(ctx context.Context) ([]*pluginapi.Device, error) {
	gpus, err := p.cfg.Source.Devices(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*pluginapi.Device, 0, len(p.cfg.Devices))
	for _, sd := range p.layout(gpus) {
		if sd.ParentIndex < 0 || sd.ParentIndex >= len(gpus) {
			continue
		}
		d := gpus[sd.ParentIndex]
		health := pluginapi.Healthy
		if !d.Healthy {
			health = pluginapi.Unhealthy // every device of a broken GPU
		}
		pd := &pluginapi.Device{ID: sd.ID, Health: health}
		if d.NUMANode >= 0 {
			pd.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(d.NUMANode)}}}
		}
		out = append(out, pd)
	}
	return out, nil
}

// layout is Config.Devices, or every GPU whole.
func (p *Plugin) layout(gpus []gpu.Device) []gpu.SubDevice {
	if p.cfg.Devices != nil {
		return p.cfg.Devices
	}
	return gpu.WholeGPUs(gpus, p.cfg.Resource)
}

// known maps the plugin's device IDs to their devices, with the GPUs.
func (p *Plugin) known(ctx context.Context) (map[string]gpu.SubDevice, []gpu.Device, error) {
	gpus, err := p.cfg.Source.Devices(ctx)
	if err != nil {
		return nil, nil, status.Errorf(codes.Unavailable, "list GPUs: %v", err)
	}
	out := map[string]gpu.SubDevice{}
	for _, sd := range p.layout(gpus) {
		out[sd.ID] = sd
	}
	return out, gpus, nil
}

// GetPreferredAllocation picks, for whole GPUs, the best-connected set of
// the available ones; for replicas, NVIDIA's policy: one at a time from
// the GPU with the fewest replicas allocated (distributed; packed: the
// most), ties to the GPU picked from least in this request, then by
// index; for MIG devices, in order.
func (p *Plugin) GetPreferredAllocation(ctx context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	known, gpus, err := p.known(ctx)
	if err != nil {
		return nil, err
	}
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.ContainerRequests {
		for _, id := range append(slices.Clone(cr.AvailableDeviceIDs), cr.MustIncludeDeviceIDs...) {
			if _, ok := known[id]; !ok {
				return nil, status.Errorf(codes.InvalidArgument, "unknown device %q", id)
			}
		}
		var ids []string
		switch {
		case p.replicated():
			ids = pickReplicas(p.layout(gpus), cr.AvailableDeviceIDs, cr.MustIncludeDeviceIDs, int(cr.AllocationSize), p.cfg.AllocationPolicy == AllocationPacked)
		case p.cfg.Devices != nil && len(known) > 0 && anyMIG(known):
			ids = pickInOrder(cr.AvailableDeviceIDs, cr.MustIncludeDeviceIDs, int(cr.AllocationSize))
		default:
			if ids, err = p.preferredWhole(ctx, known, cr); err != nil {
				return nil, err
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

func anyMIG(known map[string]gpu.SubDevice) bool {
	for _, sd := range known {
		if sd.MIG != nil {
			return true
		}
	}
	return false
}

// replicated: the plugin's devices are replicas (time-slicing or MPS).
func (p *Plugin) replicated() bool {
	for _, sd := range p.cfg.Devices {
		if sd.Sharing == gpu.SharingTimeSlicing || sd.Sharing == gpu.SharingMPS {
			return true
		}
	}
	return false
}

// preferredWhole is the best-connected set of whole GPUs.
func (p *Plugin) preferredWhole(ctx context.Context, known map[string]gpu.SubDevice, cr *pluginapi.ContainerPreferredAllocationRequest) ([]string, error) {
	topo, err := p.cfg.Source.Topology(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "GPU topology: %v", err)
	}
	idOf := map[int]string{}
	index := func(ids []string) []int {
		out := make([]int, 0, len(ids))
		for _, id := range ids {
			out = append(out, known[id].ParentIndex)
			idOf[known[id].ParentIndex] = id
		}
		return out
	}
	avail, must := index(cr.AvailableDeviceIDs), index(cr.MustIncludeDeviceIDs)
	set := gputopology.PreferredSet(topo, avail, must, int(cr.AllocationSize))
	ids := make([]string, 0, len(set))
	for _, i := range set {
		ids = append(ids, idOf[i])
	}
	return ids, nil
}

// Allocate answers with CDI names and NVIDIA_VISIBLE_DEVICES (and, for
// MPS, the share's limits). An unhealthy GPU is refused: the manager
// should not have picked it. More than one shared device for a container
// is refused, in NVIDIA's words, when FailRequestsGreaterThanOne is set.
func (p *Plugin) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	known, gpus, err := p.known(ctx)
	if err != nil {
		return nil, err
	}
	resp := &pluginapi.AllocateResponse{}
	if p.cfg.HAMi {
		return p.allocateHAMi(ctx, req, gpus)
	}
	for _, cr := range req.ContainerRequests {
		var sds []gpu.SubDevice
		for _, id := range cr.DevicesIds {
			sd, ok := known[id]
			if !ok {
				return nil, fmt.Errorf("invalid allocation request for %q: invalid request: unknown device: %s", p.cfg.Resource, id)
			}
			if d := gpus[sd.ParentIndex]; !d.Healthy {
				return nil, status.Errorf(codes.FailedPrecondition, "GPU %d (%s) is unhealthy (Xid %d)", d.Index, d.UUID, d.LastXid)
			}
			sds = append(sds, sd)
		}
		if p.replicated() && p.cfg.FailRequestsGreaterThanOne && len(sds) > 1 {
			// NVIDIA's resource manager (internal/rm ValidateRequest), wrapped by its Allocate.
			return nil, fmt.Errorf("invalid allocation request for %q: invalid request: maximum request size for shared resources is 1; found %d", p.cfg.Resource, len(sds))
		}
		resp.ContainerResponses = append(resp.ContainerResponses, p.containerResponse(sds))
	}
	return resp, nil
}

// MPSPipeDirectory is where NVIDIA's plugin tells MPS clients the control
// daemon's pipe is, per resource: /mps/<resource>/pipe.
func MPSPipeDirectory(resource string) string { return "/mps/" + resource + "/pipe" }

// containerResponse is one container's answer: CDI devices (the
// simulated driver defines one per device; nvidia-ctk's real spec one per
// GPU and per MIG device, so a replica gets its GPU's), the visible
// devices, and for MPS the limits the control daemon would set.
func (p *Plugin) containerResponse(sds []gpu.SubDevice) *pluginapi.ContainerAllocateResponse {
	car := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{}}
	var visible, limits []string
	seen := map[string]bool{}
	add := func(name string) {
		if !seen["cdi:"+name] {
			seen["cdi:"+name] = true
			car.CdiDevices = append(car.CdiDevices, &pluginapi.CDIDevice{Name: name})
		}
	}
	sim := p.cfg.Source.Simulated()
	for i, sd := range sds {
		switch {
		case sd.Sharing == gpu.SharingNone:
			add(cdi.DeviceName(strconv.Itoa(sd.ParentIndex)))
		case sim:
			add(cdi.DeviceName(sd.ID))
		case sd.MIG != nil:
			add(cdi.DeviceName(cdi.MIGDeviceName(sd)))
		default:
			add(cdi.DeviceName(strconv.Itoa(sd.ParentIndex)))
		}
		v := sd.ParentUUID
		if sd.MIG != nil {
			v = sd.MIG.UUID
		}
		if !seen[v] {
			seen[v] = true
			visible = append(visible, v)
		}
		if sd.Sharing == gpu.SharingMPS {
			limits = append(limits, fmt.Sprintf("%d=%dM", i, sd.MemoryMiB))
			car.Envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = strconv.Itoa(sd.SMPercent)
		}
	}
	car.Envs[EnvVisibleDevices] = strings.Join(visible, ",")
	if len(limits) > 0 {
		car.Envs["CUDA_MPS_PIPE_DIRECTORY"] = MPSPipeDirectory(p.cfg.Resource)
		car.Envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = strings.Join(limits, ",")
	}
	return car
}

// PreStartContainer is not required (see GetDevicePluginOptions).
func (p *Plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
