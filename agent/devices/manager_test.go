package devices_test

import (
	"context"
	"errors"
	"maps"
	"sync"

	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"skiff.dev/skiff/agent/devices"
	"skiff.dev/skiff/agent/devices/testplugin"
	"skiff.dev/skiff/api"
)

const widget = "example.com/widget"

// shortDir is a temporary directory short enough for unix sockets
// (t.TempDir paths can pass the 107-byte limit).
func shortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func startManager(t testing.TB, dir string) *devices.Manager {
	t.Helper()
	return startManagerWith(t, dir, func(*devices.Config) {})
}

func startManagerWith(t testing.TB, dir string, mod func(*devices.Config)) *devices.Manager {
	t.Helper()
	cfg := devices.DefaultConfig()
	cfg.Dir = dir
	cfg.RetainGrace = 0
	mod(&cfg)
	m, err := devices.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

func startWidgets(t testing.TB, dir string, mod func(*testplugin.Config), ids ...string) *testplugin.Plugin {
	t.Helper()
	cfg := testplugin.Config{Dir: dir, Socket: "widget.sock", Resource: widget, Devices: ids}
	if mod != nil {
		mod(&cfg)
	}
	p, err := testplugin.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls the manager's state through its change notifications.
func waitFor(t testing.TB, m *devices.Manager, what string, cond func(devices.Snapshot) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Wait(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v (state %+v)", what, err, m.Snapshot())
	}
}

func healthyCount(res string, n int) func(devices.Snapshot) bool {
	return func(s devices.Snapshot) bool {
		h := 0
		for _, v := range s[res].Devices {
			if v == pluginapi.Healthy {
				h++
			}
		}
		return s[res].Registered && h == n
	}
}

func pod(uid string, n int64, res string) (*api.Pod, *api.Container) {
	p := &api.Pod{}
	p.Name, p.Namespace, p.UID = "p-"+uid, "default", uid
	p.Spec.Containers = []api.Container{{Name: "main"}}
	c := &p.Spec.Containers[0]
	c.Resources.Limits = api.ResourceList{res: *resource.NewQuantity(n, resource.DecimalSI), api.ResourceCPU: resource.MustParse("1")}
	return p, c
}

func quantities(m *devices.Manager, res string) (int64, int64) {
	c, a := m.Resources()
	cq, aq := c[res], a[res]
	return cq.Value(), aq.Value()
}

func TestRegisterListAndWatchHealth(t *testing.T) {
	dir := shortDir(t)
	m := startManager(t, dir)
	p := startWidgets(t, dir, nil, "w0", "w1", "w2")
	if err := p.Register(ctxT(t), &pluginapi.RegisterRequest{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "3 healthy widgets", healthyCount(widget, 3))
	if c, a := quantities(m, widget); c != 3 || a != 3 {
		t.Fatalf("capacity/allocatable = %d/%d, want 3/3", c, a)
	}
	p.SetHealth("w1", pluginapi.Unhealthy)
	waitFor(t, m, "2 healthy widgets", healthyCount(widget, 2))
	if c, a := quantities(m, widget); c != 3 || a != 2 {
		t.Fatalf("after fault: capacity/allocatable = %d/%d, want 3/2", c, a)
	}
	p.SetHealth("w1", pluginapi.Healthy)
	waitFor(t, m, "3 healthy widgets again", healthyCount(widget, 3))

	// The plugin goes away: capacity drops to 0 until it registers again.
	p.Stop()
	waitFor(t, m, "plugin gone", func(s devices.Snapshot) bool { return !s[widget].Registered })
	if c, a := quantities(m, widget); c != 0 || a != 0 {
		t.Fatalf("plugin gone: capacity/allocatable = %d/%d, want 0/0", c, a)
	}
	p2 := startWidgets(t, dir, nil, "w0", "w1", "w2")
	if err := p2.Register(ctxT(t), &pluginapi.RegisterRequest{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "widgets back", healthyCount(widget, 3))
}

func TestRegisterRejectsBadRequests(t *testing.T) {
	dir := shortDir(t)
	m := startManager(t, dir)
	p := startWidgets(t, dir, nil, "w0")
	if err := os.WriteFile(filepath.Join(dir, "plain-file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  *pluginapi.RegisterRequest
		code codes.Code
		want string
	}{
		{"wrong version", &pluginapi.RegisterRequest{Version: "v1alpha"}, codes.InvalidArgument, "unsupported device plugin API version"},
		{"no domain", &pluginapi.RegisterRequest{ResourceName: "widget"}, codes.InvalidArgument, "extended resource name"},
		{"bad name", &pluginapi.RegisterRequest{ResourceName: "example.com/wid get"}, codes.InvalidArgument, "resource name"},
		{"kubernetes domain", &pluginapi.RegisterRequest{ResourceName: "kubernetes.io/widget"}, codes.InvalidArgument, "reserved"},
		{"endpoint is a path", &pluginapi.RegisterRequest{Endpoint: "../widget.sock"}, codes.InvalidArgument, "not a path"},
		{"endpoint missing", &pluginapi.RegisterRequest{Endpoint: "nope.sock"}, codes.InvalidArgument, "nope.sock"},
		{"endpoint not a socket", &pluginapi.RegisterRequest{Endpoint: "plain-file"}, codes.InvalidArgument, "not a unix socket"},
		{"endpoint is kubelet.sock", &pluginapi.RegisterRequest{Endpoint: "kubelet.sock"}, codes.InvalidArgument, "own socket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Register(ctxT(t), tt.req)
			if status.Code(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Register = %v, want %s containing %q", err, tt.code, tt.want)
			}
		})
	}
	if len(m.Snapshot()) != 0 {
		t.Fatalf("rejected requests changed the state: %+v", m.Snapshot())
	}
	if c, _ := m.Resources(); len(c) != 0 {
		t.Fatalf("rejected requests added resources: %v", c)
	}
}

func TestAllocateIdempotentReleaseAndCheckpoint(t *testing.T) {
	dir := shortDir(t)
	m := startManager(t, dir)
	p := startWidgets(t, dir, func(c *testplugin.Config) {
		c.PreStart = true
		c.Preferred = func(avail []string, n int) []string { // the last ones
			return avail[len(avail)-n:]
		}
	}, "w0", "w1", "w2", "w3")
	if err := p.Register(ctxT(t), &pluginapi.RegisterRequest{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "4 widgets", healthyCount(widget, 4))
	ctx := ctxT(t)

	pa, ca := pod("a", 2, widget)
	alloc, err := m.Allocate(ctx, pa, ca)
	if err != nil {
		t.Fatal(err)
	}
	if got := alloc.Devices[widget]; !slices.Equal(got, []string{"w2", "w3"}) {
		t.Fatalf("devices = %v, want the preferred w2,w3", got)
	}
	if alloc.Env["WIDGETS"] != "w2,w3" || !slices.Equal(alloc.CDIDevices, []string{"example.com/widget=w2", "example.com/widget=w3"}) ||
		len(alloc.Mounts) != 1 || alloc.Mounts[0].Destination != "/run/widgets" {
		t.Fatalf("allocation = %+v", alloc)
	}
	if alloc.Trace[widget] == nil {
		t.Fatalf("no trace for %s: %+v", widget, alloc.Trace)
	}
	if calls := p.Calls(); !slices.Contains(calls, "PreStartContainer w2,w3") {
		t.Fatalf("calls = %v, want a PreStartContainer", calls)
	}
	again, err := m.Allocate(ctx, pa, ca)
	if err != nil || !slices.Equal(again.Devices[widget], alloc.Devices[widget]) {
		t.Fatalf("second Allocate = %v, %v; want the same devices %v", again.Devices, err, alloc.Devices)
	}

	pb, cb := pod("b", 2, widget)
	allocB, err := m.Allocate(ctx, pb, cb)
	if err != nil || !slices.Equal(allocB.Devices[widget], []string{"w0", "w1"}) {
		t.Fatalf("pod b = %v, %v; want w0,w1", allocB.Devices, err)
	}
	pc, cc := pod("c", 1, widget)
	if _, err := m.Allocate(ctx, pc, cc); !errors.Is(err, devices.ErrInsufficient) {
		t.Fatalf("pod c on a full node = %v, want ErrInsufficient", err)
	}

	// A new manager over the same directory (an agent restart) knows the
	// allocations: it gives pod a the same devices and pod c none.
	m.Stop()
	p.Stop()
	m2 := startManager(t, dir)
	p2 := startWidgets(t, dir, nil, "w0", "w1", "w2", "w3")
	if err := p2.Register(ctxT(t), &pluginapi.RegisterRequest{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m2, "4 widgets after restart", healthyCount(widget, 4))
	if got, err := m2.Allocate(ctx, pa, ca); err != nil || !slices.Equal(got.Devices[widget], []string{"w2", "w3"}) {
		t.Fatalf("pod a after restart = %v, %v; want w2,w3", got.Devices, err)
	}
	if _, err := m2.Allocate(ctx, pc, cc); !errors.Is(err, devices.ErrInsufficient) {
		t.Fatalf("pod c after restart = %v, want ErrInsufficient (no double allocation)", err)
	}

	// Release frees: pod c gets one of a's devices.
	if err := m2.Release(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	got, err := m2.Allocate(ctx, pc, cc)
	if err != nil || len(got.Devices[widget]) != 1 || !slices.Contains([]string{"w2", "w3"}, got.Devices[widget][0]) {
		t.Fatalf("pod c after release = %v, %v", got.Devices, err)
	}
	// Retain frees the devices of pods that are gone (b).
	if err := m2.Retain(map[string]bool{"c": true}); err != nil {
		t.Fatal(err)
	}
	alloc2 := m2.Snapshot()[widget].Allocated
	if len(alloc2) != 1 {
		t.Fatalf("after Retain: allocated = %v, want only pod c's device", alloc2)
	}
}

// A pod deleted while the agent was down, or right after its devices were
// picked and before any container was made, frees its devices at once:
// the grace of Retain guards only allocations this process made after
// listing, and a pod the API no longer has by name is released by name.
func TestReleaseGoneAndRetainAfterRestart(t *testing.T) {
	dir := shortDir(t)
	start := func() *devices.Manager {
		cfg := devices.DefaultConfig()
		cfg.Dir, cfg.RetainGrace = dir, time.Hour
		m, err := devices.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := start()
	p := startWidgets(t, dir, nil, "w0", "w1", "w2", "w3")
	if err := p.Register(ctxT(t), &pluginapi.RegisterRequest{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "4 widgets", healthyCount(widget, 4))
	ctx := ctxT(t)
	for _, uid := range []string{"a", "b"} {
		pd, c := pod(uid, 2, widget)
		if _, err := m.Allocate(ctx, pd, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Retain(map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if got := len(m.Snapshot()[widget].Allocated); got != 4 {
		t.Fatalf("Retain freed allocations younger than the grace: %d allocated, want 4", got)
	}
	if err := m.ReleaseGone("default", "p-b"); err != nil {
		t.Fatal(err)
	}
	if got := m.Holdings(); len(got) != 1 || got[0].Pod != "p-a" {
		t.Fatalf("after ReleaseGone(p-b): holdings %+v, want only p-a's", got)
	}
	m.Stop()
	p.Stop()

	m2 := start()
	t.Cleanup(m2.Stop)
	if got := m2.Holdings(); len(got) != 1 {
		t.Fatalf("the checkpoint lost p-a's devices: %+v", got)
	}
	if err := m2.Retain(map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if got := m2.Holdings(); len(got) != 0 {
		t.Fatalf("after a restart, Retain kept a gone pod's devices for the grace period: %+v", got)
	}
}

func TestAllocateSkipsUnhealthyAndUnknownResources(t *testing.T) {
	dir := shortDir(t)
	m := startManager(t, dir)
	p := startWidgets(t, dir, nil, "w0", "w1")
	if err := p.Register(ctxT(t), &pluginapi.RegisterRequest{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "2 widgets", healthyCount(widget, 2))
	p.SetHealth("w0", pluginapi.Unhealthy)
	waitFor(t, m, "1 healthy", healthyCount(widget, 1))
	pa, ca := pod("a", 1, widget)
	got, err := m.Allocate(ctxT(t), pa, ca)
	if err != nil || !slices.Equal(got.Devices[widget], []string{"w1"}) {
		t.Fatalf("Allocate = %v, %v; want the healthy w1", got.Devices, err)
	}
	// A resource no plugin serves is not the manager's business.
	po, co := pod("o", 1, "example.com/other")
	if got, err := m.Allocate(ctxT(t), po, co); err != nil || len(got.Devices) != 0 {
		t.Fatalf("Allocate of an unknown resource = %v, %v", got.Devices, err)
	}
	// Fractions are refused.
	pf, cf := pod("f", 1, widget)
	cf.Resources.Limits[widget] = resource.MustParse("500m")
	if _, err := m.Allocate(ctxT(t), pf, cf); err == nil || !strings.Contains(err.Error(), "whole number") {
		t.Fatalf("Allocate of 500m = %v", err)
	}
	// Quantities past an int64 are refused, not read as 0 devices.
	for _, q := range []string{"1e400", "9223372036854775808"} {
		ph, ch := pod("h", 1, widget)
		ch.Resources.Limits[widget] = resource.MustParse(q)
		if _, err := m.Allocate(ctxT(t), ph, ch); err == nil || !strings.Contains(err.Error(), "more than any node has") {
			t.Fatalf("Allocate of %s = %v", q, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := devices.DefaultConfig()
	cfg.Dir = "/" + strings.Repeat("x", 120)
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Fatalf("Validate = %v, want too long", err)
	}
	cfg.Dir = ""
	cfg.DialTimeout = 0
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "required") || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("Validate = %v, want every problem", err)
	}
}

func TestCorruptCheckpointIsAnError(t *testing.T) {
	dir := shortDir(t)
	if err := os.WriteFile(filepath.Join(dir, devices.CheckpointName), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := devices.DefaultConfig()
	cfg.Dir = dir
	if _, err := devices.New(cfg); err == nil {
		t.Fatal("New with a corrupt checkpoint succeeded; it could hand out held devices")
	}
}

// Confirm brings news of another holder of a picked device (a DRA claim
// was allocated it meanwhile): the pick is not recorded, the manager picks
// again without it, and each pick's confirmation is released. A Confirm
// that fails fails the Allocate and records nothing.
func TestAllocatePicksAgainWhenConfirmFindsAHolder(t *testing.T) {
	var (
		mu        sync.Mutex
		taken     = map[string]string{}
		confirmed [][]string
		released  int
		fail      bool
	)
	dir := shortDir(t)
	m := startManagerWith(t, dir, func(c *devices.Config) {
		c.Unavailable = func(string, []devices.Holding) map[string]string {
			mu.Lock()
			defer mu.Unlock()
			return maps.Clone(taken)
		}
		c.Confirm = func(_ context.Context, _ string, ids []string) (func(), error) {
			mu.Lock()
			defer mu.Unlock()
			confirmed = append(confirmed, ids)
			if fail {
				return nil, errors.New("the API server is gone")
			}
			if len(confirmed) == 1 {
				taken[ids[0]] = "claim default/c" // allocated while being picked
			}
			return func() { mu.Lock(); released++; mu.Unlock() }, nil
		}
	})
	p := startWidgets(t, dir, nil, "w0", "w1", "w2")
	if err := p.Register(ctxT(t), &pluginapi.RegisterRequest{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "3 widgets", healthyCount(widget, 3))
	pa, ca := pod("a", 1, widget)
	got, err := m.Allocate(ctxT(t), pa, ca)
	if err != nil || !slices.Equal(got.Devices[widget], []string{"w1"}) {
		t.Fatalf("Allocate = %v, %v; want w1 (w0 was taken while being picked)", got.Devices, err)
	}
	mu.Lock()
	if !slices.EqualFunc(confirmed, [][]string{{"w0"}, {"w1"}}, slices.Equal) || released != 2 {
		t.Errorf("confirmed %v, released %d times; want [[w0] [w1]], 2", confirmed, released)
	}
	fail = true
	mu.Unlock()
	pb, cb := pod("b", 1, widget)
	if _, err := m.Allocate(ctxT(t), pb, cb); err == nil || !strings.Contains(err.Error(), "the API server is gone") {
		t.Fatalf("Allocate with a failing Confirm = %v", err)
	}
	var held []string
	for _, h := range m.Holdings() {
		held = append(held, h.Pod+":"+strings.Join(h.DeviceIDs, ","))
	}
	if !slices.Equal(held, []string{pa.Name + ":w1"}) {
		t.Errorf("holdings %v, want only pod a on w1", held)
	}
}
