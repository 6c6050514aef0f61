package dra_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"skiff.dev/skiff/agent/dra"
	"skiff.dev/skiff/agent/dra/gpudriver"
	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/cdi"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

const node = "n1"

type fixture struct {
	dir string
	c   *fake.Client
	src gpu.Source
	d   *gpudriver.Driver
	m   *dra.Manager
}

// setUp runs the GPU driver's two gRPC servers over a simulated DGX A100
// and a manager watching the registry directory, over real unix sockets,
// and waits for the registration.
func setUp(t testing.TB, objs ...api.Object) *fixture {
	t.Helper()
	dir, err := os.MkdirTemp("", "dra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	src, _, err := gpu.Open("sim:dgxa100", gpu.Options{NodeName: node})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	f := &fixture{dir: dir, c: fake.New(objs...), src: src}
	f.d, err = gpudriver.New(gpudriver.Config{Source: src, NodeName: node, Client: f.c,
		Dir: filepath.Join(dir, "p"), RegistryDir: filepath.Join(dir, "r"), CDISpecDir: filepath.Join(dir, "cdi")})
	if err != nil {
		t.Fatal(err)
	}
	f.m = f.startManager(t)
	if err := f.d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.d.Stop)
	f.waitDrivers(t, f.m, []string{gpudriver.DriverName})
	return f
}

func (f *fixture) startManager(t testing.TB) *dra.Manager {
	t.Helper()
	cfg := dra.DefaultConfig()
	cfg.RegistryDir, cfg.StateDir, cfg.Client = filepath.Join(f.dir, "r"), filepath.Join(f.dir, "s"), f.c
	m, err := dra.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

func (f *fixture) waitDrivers(t testing.TB, m *dra.Manager, want []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Wait(ctx, func(d []string, _ map[string][]string) bool { return slices.Equal(d, want) }); err != nil {
		t.Fatalf("drivers %v, want %v: %v", m.Drivers(), want, err)
	}
}

func allocated(name, uid string, reservedFor []string, results ...api.DeviceRequestAllocationResult) *api.ResourceClaim {
	c := &api.ResourceClaim{
		TypeMeta:   api.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"},
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default", UID: uid},
		Status:     api.ResourceClaimStatus{Allocation: &api.AllocationResult{Devices: api.DeviceAllocationResult{Results: results}}},
	}
	for _, p := range reservedFor {
		c.Status.ReservedFor = append(c.Status.ReservedFor, api.ResourceClaimConsumerReference{Resource: "pods", Name: p, UID: "uid-" + p})
	}
	return c
}

func result(request, device string) api.DeviceRequestAllocationResult {
	return api.DeviceRequestAllocationResult{Request: request, Driver: gpudriver.DriverName, Pool: node, Device: device}
}

func ptr[T any](v T) *T { return &v }

// pod uses the claim "shared" in two containers (one per request) and a
// container without claims.
func pod(name string) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default", UID: "uid-" + name}}
	p.Spec.NodeName = node
	p.Spec.ResourceClaims = []api.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr("shared")}}
	p.Spec.Containers = []api.Container{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	p.Spec.Containers[0].Resources.Claims = []api.ContainerResourceClaim{{Name: "gpus", Request: "first"}}
	p.Spec.Containers[1].Resources.Claims = []api.ContainerResourceClaim{{Name: "gpus"}}
	return p
}

func TestPrepareSharedClaimThroughTheSockets(t *testing.T) {
	shared := allocated("shared", "claim-1", []string{"p1", "p2"}, result("first", "gpu-0"), result("second/fast", "gpu-1"))
	f := setUp(t, shared)
	ctx := context.Background()
	// Count the driver's NodePrepareResources work: it reads the claim
	// once per prepare it does (not for one answered from its checkpoint).
	var mu sync.Mutex
	reads := 0
	f.d.SetClaimGetter(func(ctx context.Context, ns, name string) (*api.ResourceClaim, error) {
		mu.Lock()
		reads++
		mu.Unlock()
		return client.Get[*api.ResourceClaim](ctx, f.c, ns, name)
	})
	driverReads := func() int { mu.Lock(); defer mu.Unlock(); return reads }
	p1, p2 := pod("p1"), pod("p2")
	got, err := f.m.PrepareResources(ctx, p1)
	if err != nil {
		t.Fatal(err)
	}
	a := []string{cdi.DeviceName("0"), cdi.ClaimDeviceName("claim-1", "gpu-0")}
	ab := append(slices.Clone(a), cdi.DeviceName("1"), cdi.ClaimDeviceName("claim-1", "gpu-1"))
	if !slices.Equal(got.CDIDevices["a"], a) || !slices.Equal(got.CDIDevices["b"], ab) || len(got.CDIDevices["c"]) != 0 {
		t.Errorf("CDI devices %v, want a=%v b=%v c=none", got.CDIDevices, a, ab)
	}
	if _, err := f.m.PrepareResources(ctx, p2); err != nil {
		t.Fatal(err)
	}
	if c := f.m.Claims(); !slices.Equal(c["claim-1"], []string{"uid-p1", "uid-p2"}) {
		t.Errorf("claims %v", c)
	}
	if n := driverReads(); n != 1 {
		t.Errorf("the shared claim was prepared by the driver %d times for two pods, want once", n)
	}
	// p1 ends: p2 still uses the claim, so it stays prepared.
	if err := f.m.UnprepareResources(ctx, p1.UID); err != nil {
		t.Fatal(err)
	}
	if got := f.d.Prepared(); !slices.Equal(got, []string{"claim-1"}) {
		t.Fatalf("driver prepared %v after the first pod ended, want [claim-1]", got)
	}
	// An agent restart: a new manager reads the checkpoint and unprepares
	// when the last pod ends.
	f.m.Stop()
	m2 := f.startManager(t)
	f.waitDrivers(t, m2, []string{gpudriver.DriverName})
	if c := m2.Claims(); !slices.Equal(c["claim-1"], []string{"uid-p2"}) {
		t.Fatalf("after restart claims %v", c)
	}
	if err := m2.UnprepareResources(ctx, p2.UID); err != nil {
		t.Fatal(err)
	}
	if got := f.d.Prepared(); len(got) != 0 {
		t.Errorf("driver still prepared %v after the last pod ended", got)
	}
	if c := m2.Claims(); len(c) != 0 {
		t.Errorf("manager still has %v", c)
	}
}

func TestPrepareRefuses(t *testing.T) {
	notReserved := allocated("shared", "claim-1", []string{"other"}, result("first", "gpu-0"))
	f := setUp(t, notReserved, allocated("foreign", "claim-f", []string{"p1"},
		api.DeviceRequestAllocationResult{Request: "nic", Driver: "nic.example.com", Pool: node, Device: "nic-0"}))
	ctx := context.Background()
	fromTemplate := pod("p1")
	fromTemplate.Spec.ResourceClaims = []api.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr("single-gpu")}}
	foreign := pod("p1")
	foreign.Spec.ResourceClaims[0].ResourceClaimName = ptr("foreign")
	for _, tc := range []struct {
		name string
		pod  *api.Pod
		want string
	}{
		{"not reserved for the pod", pod("p1"), "pod p1(uid-p1) is not allowed to use resource claim shared"},
		{"template claim not made yet", fromTemplate, `pod "default/p1": ResourceClaim not created yet`},
		{"driver not registered", foreign, "DRA driver is not registered: nic.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.m.PrepareResources(ctx, tc.pod)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if c := f.m.Claims(); len(c) != 0 {
				t.Errorf("claims %v after a refused prepare", c)
			}
		})
	}
}

func TestDriverGRPCWithARealClient(t *testing.T) {
	f := setUp(t, allocated("one", "claim-1", []string{"p1"}, result("gpu", "gpu-7")))
	conn, err := grpc.NewClient("unix://"+f.d.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := drapb.NewDRAPluginClient(conn)
	ctx := context.Background()
	resp, err := c.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{
		{Namespace: "default", Name: "one", Uid: "claim-1"},
		{Namespace: "default", Name: "ghost", Uid: "claim-g"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	one := resp.Claims["claim-1"]
	if one.GetError() != "" || len(one.GetDevices()) != 1 {
		t.Fatalf("claim-1: %v", one)
	}
	d := one.GetDevices()[0]
	if d.GetDeviceName() != "gpu-7" || d.GetPoolName() != node || !slices.Equal(d.GetRequestNames(), []string{"gpu"}) ||
		!slices.Equal(d.GetCdiDeviceIds(), []string{cdi.DeviceName("7"), cdi.ClaimDeviceName("claim-1", "gpu-7")}) {
		t.Errorf("device %v", d)
	}
	if e := resp.Claims["claim-g"].GetError(); !strings.Contains(e, "get ResourceClaim default/ghost") {
		t.Errorf("ghost claim error %q", e)
	}
	un, err := c.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{{Namespace: "default", Name: "one", Uid: "claim-1"}}})
	if err != nil || un.Claims["claim-1"].GetError() != "" {
		t.Fatalf("unprepare: %v %v", un, err)
	}
	if got := f.d.Prepared(); len(got) != 0 {
		t.Errorf("prepared %v", got)
	}
	// The driver leaves: its registration socket goes, the manager forgets it.
	f.d.Stop()
	f.waitDrivers(t, f.m, []string{})
}

// badPlugin is a Registration server with a wrong PluginInfo.
type badPlugin struct {
	registerapi.UnimplementedRegistrationServer
	info   *registerapi.PluginInfo
	status chan *registerapi.RegistrationStatus
}

func (b *badPlugin) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return b.info, nil
}

func (b *badPlugin) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	b.status <- s
	return &registerapi.RegistrationStatusResponse{}, nil
}

func TestRegistrationRejectsBadPluginInfo(t *testing.T) {
	f := setUp(t)
	for _, tc := range []struct {
		name string
		info *registerapi.PluginInfo
		want string
	}{
		{"device plugin type", &registerapi.PluginInfo{Type: registerapi.DevicePlugin, Name: "x.example.com", Endpoint: f.d.SocketPath(), SupportedVersions: []string{drapb.DRAPluginService}}, `plugin type "DevicePlugin" is not DRAPlugin`},
		{"old version only", &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: "x.example.com", Endpoint: f.d.SocketPath(), SupportedVersions: []string{"v1beta1.DRAPlugin"}}, "is v1.DRAPlugin"},
		{"bad name", &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: "Not_A_Name", Endpoint: f.d.SocketPath(), SupportedVersions: []string{drapb.DRAPluginService}}, `driver name "Not_A_Name"`},
		{"relative endpoint", &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: "x.example.com", Endpoint: "dra.sock", SupportedVersions: []string{drapb.DRAPluginService}}, "must be an absolute socket path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(f.dir, "bad.sock")
			os.Remove(sock)
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			srv := grpc.NewServer()
			bp := &badPlugin{info: tc.info, status: make(chan *registerapi.RegistrationStatus, 1)}
			registerapi.RegisterRegistrationServer(srv, bp)
			go srv.Serve(ln)
			defer srv.Stop()
			err = f.m.Register(context.Background(), sock)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			select {
			case s := <-bp.status:
				if s.PluginRegistered || !strings.Contains(s.Error, tc.want) {
					t.Errorf("status %v", s)
				}
			default:
				t.Error("NotifyRegistrationStatus not called")
			}
			if d := f.m.Drivers(); !slices.Equal(d, []string{gpudriver.DriverName}) {
				t.Errorf("drivers %v", d)
			}
		})
	}
}

func TestManagerRefusesDamagedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	cfg := dra.DefaultConfig()
	cfg.RegistryDir, cfg.StateDir = filepath.Join(dir, "r"), filepath.Join(dir, "s")
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg.StateDir, dra.StateName)
	if err := os.WriteFile(path, []byte(`{"version": 1, "claims": {`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := dra.New(cfg)
	if !errors.Is(err, dra.ErrCheckpointDamaged) || !strings.Contains(err.Error(), "mv "+path) {
		t.Fatalf("error %v", err)
	}
}

// A pod deleted while the agent was down: the restarted agent's first
// Retain unprepares its claim at once. The grace of Retain guards only
// uses this process made (a pod it may not have listed yet), and a use
// read from the checkpoint is older than any list the agent takes.
func TestRetainAfterRestartUnpreparesAtOnce(t *testing.T) {
	shared := allocated("shared", "claim-1", []string{"p1"}, result("first", "gpu-0"), result("second/fast", "gpu-1"))
	f := setUp(t, shared)
	ctx := context.Background()
	if _, err := f.m.PrepareResources(ctx, pod("p1")); err != nil {
		t.Fatal(err)
	}
	// Within the grace, this process keeps the claim it just prepared.
	if err := f.m.Retain(ctx, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if got := f.d.Prepared(); !slices.Equal(got, []string{"claim-1"}) {
		t.Fatalf("Retain unprepared a claim used just now, within the grace: prepared %v", got)
	}
	f.m.Stop()
	m2 := f.startManager(t)
	f.waitDrivers(t, m2, []string{gpudriver.DriverName})
	if err := m2.Retain(ctx, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if got := f.d.Prepared(); len(got) != 0 {
		t.Fatalf("after a restart, Retain kept the claim of a gone pod prepared for the grace period: %v", got)
	}
	if c := m2.Claims(); len(c) != 0 {
		t.Errorf("manager still has %v", c)
	}
}
