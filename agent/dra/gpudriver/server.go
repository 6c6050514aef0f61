package gpudriver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// servers are the driver's two gRPC servers, each on its own unix socket,
// as a kubelet plugin has them even when it runs in the agent's process:
// the DRA service (dra.sock) and the plugin registration service
// (gpu.nvidia.com-reg.sock in the registry directory the kubelet side
// watches).
type servers struct {
	dra, reg *grpc.Server
	wg       sync.WaitGroup
	paths    []string
}

// draService is the DRAPlugin gRPC service over a Driver.
type draService struct {
	drapb.UnimplementedDRAPluginServer
	d *Driver
}

// registration is the Registration gRPC service: GetInfo names the
// driver and its DRA socket; NotifyRegistrationStatus is the kubelet's
// answer.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	d *Driver
}

// SocketPath is where the DRA service listens.
func (d *Driver) SocketPath() string { return filepath.Join(d.cfg.Dir, SocketName) }

// RegistrationSocketPath is where the registration service listens ("" without a RegistryDir).
func (d *Driver) RegistrationSocketPath() string {
	if d.cfg.RegistryDir == "" {
		return ""
	}
	return filepath.Join(d.cfg.RegistryDir, RegistrationSocketName)
}

// Start listens on both sockets (replacing stale ones) and serves until
// Stop. The registration socket goes last: once it exists the kubelet
// side may dial the DRA socket.
func (d *Driver) Start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.srv != nil {
		return nil
	}
	s := &servers{dra: grpc.NewServer()}
	drapb.RegisterDRAPluginServer(s.dra, &draService{d: d})
	if err := s.serve(s.dra, d.SocketPath()); err != nil {
		s.stop()
		return err
	}
	if reg := d.RegistrationSocketPath(); reg != "" {
		s.reg = grpc.NewServer()
		registerapi.RegisterRegistrationServer(s.reg, &registration{d: d})
		if err := s.serve(s.reg, reg); err != nil {
			s.stop()
			return err
		}
	}
	d.srv = s
	d.log.Info("DRA driver listening", "socket", d.SocketPath(), "registration", d.RegistrationSocketPath())
	return nil
}

func (s *servers) serve(srv *grpc.Server, sock string) error {
	if err := os.MkdirAll(filepath.Dir(sock), 0o750); err != nil {
		return fmt.Errorf("gpu DRA driver: %w", err)
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("gpu DRA driver: remove stale %s: %w", sock, err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("gpu DRA driver: listen on %s: %w", sock, err)
	}
	s.paths = append(s.paths, sock)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = srv.Serve(ln) // returns when stopped
	}()
	return nil
}

func (s *servers) stop() {
	// The registration socket goes first: the kubelet side sees the
	// plugin leave before its DRA socket closes.
	if s.reg != nil {
		s.reg.Stop()
	}
	if s.dra != nil {
		s.dra.Stop()
	}
	s.wg.Wait()
	for i := len(s.paths) - 1; i >= 0; i-- {
		os.Remove(s.paths[i])
	}
}

// Stop stops both servers and removes their sockets. Safe to call twice.
func (d *Driver) Stop() {
	d.mu.Lock()
	s := d.srv
	d.srv = nil
	d.mu.Unlock()
	if s != nil {
		s.stop()
	}
}

// NodePrepareResources prepares each claim; a claim that fails has its
// error in its own answer (the others are still prepared), as the kubelet
// expects.
func (s *draService) NodePrepareResources(ctx context.Context, req *drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error) {
	resp := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{}}
	for _, c := range req.GetClaims() {
		devs, err := s.d.Prepare(ctx, ClaimRef{Namespace: c.GetNamespace(), Name: c.GetName(), UID: c.GetUid()})
		if err != nil {
			resp.Claims[c.GetUid()] = &drapb.NodePrepareResourceResponse{Error: err.Error()}
			continue
		}
		out := &drapb.NodePrepareResourceResponse{}
		for _, d := range devs {
			out.Devices = append(out.Devices, &drapb.Device{RequestNames: d.Requests, PoolName: d.Pool, DeviceName: d.Device, CdiDeviceIds: d.CDIDeviceIDs})
		}
		resp.Claims[c.GetUid()] = out
	}
	return resp, nil
}

// NodeUnprepareResources unprepares each claim.
func (s *draService) NodeUnprepareResources(ctx context.Context, req *drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
	resp := &drapb.NodeUnprepareResourcesResponse{Claims: map[string]*drapb.NodeUnprepareResourceResponse{}}
	for _, c := range req.GetClaims() {
		out := &drapb.NodeUnprepareResourceResponse{}
		if err := s.d.Unprepare(ctx, ClaimRef{Namespace: c.GetNamespace(), Name: c.GetName(), UID: c.GetUid()}); err != nil {
			out.Error = err.Error()
		}
		resp.Claims[c.GetUid()] = out
	}
	return resp, nil
}

// GetInfo names the driver, its DRA socket and the service versions.
func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.DRAPlugin,
		Name:              DriverName,
		Endpoint:          r.d.SocketPath(),
		SupportedVersions: []string{drapb.DRAPluginService},
	}, nil
}

// NotifyRegistrationStatus logs the kubelet's answer.
func (r *registration) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if st.GetPluginRegistered() {
		r.d.log.Info("registered with the kubelet")
	} else {
		r.d.log.Error("the kubelet refused the registration", "err", st.GetError())
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
