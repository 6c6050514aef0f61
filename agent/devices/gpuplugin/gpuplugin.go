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
	// Socket is the plugin's socket name in Dir (default nvidia-gpu.sock).
	Socket string
	// Log, or discard.
	Log *slog.Logger
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
	if cfg.Socket == "" {
		cfg.Socket = SocketName
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
		ResourceName: ResourceName,
		Options:      options(),
	})
	if err != nil {
		return fmt.Errorf("register %s with %s: %w", ResourceName, kubelet, err)
	}
	p.log.Info("registered with the device manager", "resource", ResourceName, "socket", p.SocketPath())
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
	devs, err := p.cfg.Source.Devices(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*pluginapi.Device, 0, len(devs))
	for _, d := range devs {
		health := pluginapi.Healthy
		if !d.Healthy {
			health = pluginapi.Unhealthy
		}
		pd := &pluginapi.Device{ID: d.UUID, Health: health}
		if d.NUMANode >= 0 {
			pd.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(d.NUMANode)}}}
		}
		out = append(out, pd)
	}
	return out, nil
}

// byUUID maps the Source's UUIDs to devices.
func (p *Plugin) byUUID(ctx context.Context) (map[string]gpu.Device, error) {
	devs, err := p.cfg.Source.Devices(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "list GPUs: %v", err)
	}
	out := make(map[string]gpu.Device, len(devs))
	for _, d := range devs {
		out[d.UUID] = d
	}
	return out, nil
}

func indexes(ids []string, devs map[string]gpu.Device) ([]int, error) {
	out := make([]int, 0, len(ids))
	for _, id := range ids {
		d, ok := devs[id]
		if !ok {
			return nil, status.Errorf(codes.InvalidArgument, "unknown GPU %q", id)
		}
		out = append(out, d.Index)
	}
	return out, nil
}

// GetPreferredAllocation picks the best-connected set of the available GPUs.
func (p *Plugin) GetPreferredAllocation(ctx context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	devs, err := p.byUUID(ctx)
	if err != nil {
		return nil, err
	}
	topo, err := p.cfg.Source.Topology(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "GPU topology: %v", err)
	}
	uuidOf := map[int]string{}
	for _, d := range devs {
		uuidOf[d.Index] = d.UUID
	}
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.ContainerRequests {
		avail, err := indexes(cr.AvailableDeviceIDs, devs)
		if err != nil {
			return nil, err
		}
		must, err := indexes(cr.MustIncludeDeviceIDs, devs)
		if err != nil {
			return nil, err
		}
		set := gputopology.PreferredSet(topo, avail, must, int(cr.AllocationSize))
		ids := make([]string, 0, len(set))
		for _, i := range set {
			ids = append(ids, uuidOf[i])
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// Allocate answers with CDI names and NVIDIA_VISIBLE_DEVICES. An unhealthy
// GPU is refused: the manager should not have picked it.
func (p *Plugin) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	devs, err := p.byUUID(ctx)
	if err != nil {
		return nil, err
	}
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		car := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{}}
		for _, id := range cr.DevicesIds {
			d, ok := devs[id]
			if !ok {
				return nil, status.Errorf(codes.InvalidArgument, "unknown GPU %q", id)
			}
			if !d.Healthy {
				return nil, status.Errorf(codes.FailedPrecondition, "GPU %d (%s) is unhealthy (Xid %d)", d.Index, id, d.LastXid)
			}
			car.CdiDevices = append(car.CdiDevices, &pluginapi.CDIDevice{Name: cdi.DeviceName(strconv.Itoa(d.Index))})
		}
		car.Envs[EnvVisibleDevices] = strings.Join(cr.DevicesIds, ",")
		resp.ContainerResponses = append(resp.ContainerResponses, car)
	}
	return resp, nil
}

// PreStartContainer is not required (see GetDevicePluginOptions).
func (p *Plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
