// Package testplugin is a small external device plugin for tests and
// demos: it advertises N devices of any resource (example.com/widget) over
// its own unix socket, speaking the device plugin API v1beta1 exactly as a
// vendor's plugin would. Tests flip device health with SetHealth and read
// the calls the manager made with Calls.
package testplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Config of a Plugin.
type Config struct {
	// Dir is the plugin directory (where kubelet.sock is).
	Dir string
	// Socket name in Dir, e.g. "widget.sock".
	Socket string
	// Resource, e.g. "example.com/widget".
	Resource string
	// Devices are the device IDs, all healthy at first.
	Devices []string
	// Preferred, when set, answers GetPreferredAllocation: it gets the
	// available IDs and the size and returns the choice.
	Preferred func(available []string, size int) []string
	// PreStart makes the plugin ask for PreStartContainer.
	PreStart bool
}

// Plugin is a running test plugin.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	cfg Config

	mu      sync.Mutex
	health  map[string]string
	changed chan struct{}
	calls   []string
	srv     *grpc.Server
	wg      sync.WaitGroup
}

// Start serves the plugin on Dir/Socket. It does not register.
func Start(cfg Config) (*Plugin, error) {
	p := &Plugin{cfg: cfg, health: map[string]string{}, changed: make(chan struct{})}
	for _, id := range cfg.Devices {
		p.health[id] = pluginapi.Healthy
	}
	sock := filepath.Join(cfg.Dir, cfg.Socket)
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("test plugin: %w", err)
	}
	p.srv = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.srv, p)
	p.wg.Add(1)
	go func() { defer p.wg.Done(); _ = p.srv.Serve(ln) }()
	return p, nil
}

// Register sends req to Dir/kubelet.sock; nil fields of req are filled
// from the plugin's config (pass &RegisterRequest{} for a good one).
func (p *Plugin) Register(ctx context.Context, req *pluginapi.RegisterRequest) error {
	if req.Version == "" {
		req.Version = pluginapi.Version
	}
	if req.Endpoint == "" {
		req.Endpoint = p.cfg.Socket
	}
	if req.ResourceName == "" {
		req.ResourceName = p.cfg.Resource
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(p.cfg.Dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, req)
	return err
}

// Stop stops serving: the manager's stream ends.
func (p *Plugin) Stop() {
	p.srv.Stop()
	p.wg.Wait()
}

// SetHealth changes a device's health (pluginapi.Healthy or Unhealthy)
// and sends the new list on every stream.
func (p *Plugin) SetHealth(id, health string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.health[id] = health
	close(p.changed)
	p.changed = make(chan struct{})
}

// Calls lists the calls the manager made, e.g. "Allocate w1,w2".
func (p *Plugin) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

func (p *Plugin) record(call string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, call)
}

// GetDevicePluginOptions says what the config asks.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{PreStartRequired: p.cfg.PreStart, GetPreferredAllocationAvailable: p.cfg.Preferred != nil}, nil
}

// ListAndWatch sends the list now and after every SetHealth.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		p.mu.Lock()
		var devs []*pluginapi.Device
		for _, id := range p.cfg.Devices {
			devs = append(devs, &pluginapi.Device{ID: id, Health: p.health[id]})
		}
		ch := p.changed
		p.mu.Unlock()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-ch:
		}
	}
}

// GetPreferredAllocation calls Config.Preferred.
func (p *Plugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.ContainerRequests {
		p.record("GetPreferredAllocation " + strings.Join(cr.AvailableDeviceIDs, ","))
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{
			DeviceIDs: p.cfg.Preferred(cr.AvailableDeviceIDs, int(cr.AllocationSize)),
		})
	}
	return resp, nil
}

// Allocate answers with env WIDGETS=<ids>, a mount, and CDI names.
func (p *Plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		ids := append([]string(nil), cr.DevicesIds...)
		sort.Strings(ids)
		p.record("Allocate " + strings.Join(ids, ","))
		car := &pluginapi.ContainerAllocateResponse{
			Envs:   map[string]string{"WIDGETS": strings.Join(ids, ",")},
			Mounts: []*pluginapi.Mount{{ContainerPath: "/run/widgets", HostPath: "/tmp/widgets", ReadOnly: true}},
		}
		for _, id := range ids {
			car.CdiDevices = append(car.CdiDevices, &pluginapi.CDIDevice{Name: "example.com/widget=" + id})
		}
		resp.ContainerResponses = append(resp.ContainerResponses, car)
	}
	return resp, nil
}

// PreStartContainer records the call.
func (p *Plugin) PreStartContainer(_ context.Context, req *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	p.record("PreStartContainer " + strings.Join(req.DevicesIds, ","))
	return &pluginapi.PreStartContainerResponse{}, nil
}
