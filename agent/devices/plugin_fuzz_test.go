package devices_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"skiff.dev/skiff/agent/devices"
)

// hostile is a device plugin that answers whatever the fuzzer says:
// device lists with duplicate, empty and oddly healthy IDs, preferred
// allocations of devices it never offered, Allocate answers for too many or
// too few containers, and errors.
type hostile struct {
	pluginapi.UnimplementedDevicePluginServer
	lists chan []*pluginapi.Device

	mu         sync.Mutex
	preferred  [][]string // one answer per container response
	preferErr  bool
	allocResps int
	allocErr   bool
	envs       map[string]string
}

func (h *hostile) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

func (h *hostile) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		select {
		case devs := <-h.lists:
			if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
				return err
			}
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}

func (h *hostile) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.preferErr {
		return nil, errors.New("hostile: no preference")
	}
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, ids := range h.preferred {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

func (h *hostile) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.allocErr {
		return nil, errors.New("hostile: allocate fails")
	}
	resp := &pluginapi.AllocateResponse{}
	for range h.allocResps {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs:       h.envs,
			CdiDevices: []*pluginapi.CDIDevice{{Name: "example.com/widget=" + strings.Join(req.ContainerRequests[0].DevicesIds, ",")}},
			Devices:    []*pluginapi.DeviceSpec{{HostPath: "/dev/null", ContainerPath: "/dev/widget", Permissions: "rw"}},
		})
	}
	return resp, nil
}

func (h *hostile) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// startHostile serves a hostile plugin in dir and registers it.
func startHostile(t testing.TB, dir string) *hostile {
	t.Helper()
	h := &hostile{lists: make(chan []*pluginapi.Device)}
	ln, err := net.Listen("unix", filepath.Join(dir, "hostile.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, h)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, devices.SocketName), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := pluginapi.NewRegistrationClient(conn).Register(ctxT(t), &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: "hostile.sock", ResourceName: widget,
	}); err != nil {
		t.Fatal(err)
	}
	return h
}

// parseDevices reads "id:H,id:U,..." (H healthy, U unhealthy, anything
// else is taken as the health string itself). Invalid UTF-8 is replaced:
// protobuf strings cannot carry it, so no plugin can send it.
func parseDevices(s string) []*pluginapi.Device {
	var out []*pluginapi.Device
	for item := range strings.SplitSeq(strings.ToValidUTF8(s, "?"), ",") {
		id, health, _ := strings.Cut(item, ":")
		switch health {
		case "H":
			health = pluginapi.Healthy
		case "U":
			health = pluginapi.Unhealthy
		}
		out = append(out, &pluginapi.Device{ID: id, Health: health})
	}
	return out
}

// FuzzHostilePlugin feeds the device manager a plugin's worst answers and
// checks that the manager
//   - lists exactly the devices of the plugin's last ListAndWatch answer;
//   - never hands out a device it does not own: every allocated ID was
//     advertised healthy, is given once, to one pod, and a container gets
//     exactly the number it asked for;
//   - fails cleanly otherwise: an Allocate that errors leaves the pod
//     holding nothing, and Release frees everything.
//
// Inputs: the device list ("id:H,id:U,..."), the preferred answers
// (";"-separated lists of ","-separated IDs), the count each of two pods
// asks for, and bits: Allocate answers 0, 1 or 2 containers, Allocate
// errors, GetPreferredAllocation errors.
func FuzzHostilePlugin(f *testing.F) {
	f.Add("w0:H,w1:H,w2:H,w3:H", "w3,w2", uint8(1), uint8(2), uint8(1))
	f.Add("w0:H,w1:U,w2:H", "w1,w1", uint8(1), uint8(2), uint8(1))         // prefers an unhealthy device, twice
	f.Add("w0:H,w0:U,w1:H", "w0", uint8(1), uint8(1), uint8(1))            // one ID, two healths
	f.Add("w0:H,w1:H,w2:H", "nope,w0;w1,w2", uint8(1), uint8(1), uint8(1)) // a device never offered; two answers
	f.Add(":H,w0:H", "", uint8(2), uint8(1), uint8(1))                     // an empty ID
	f.Add("w0:H,w1:H", "w0,w1", uint8(1), uint8(1), uint8(2))              // two container responses
	f.Add("w0:H,w1:H", "w0,w1", uint8(1), uint8(1), uint8(0))              // no container response
	f.Add("w0:H,w1:H,w2:H", "w0", uint8(1), uint8(1), uint8(1|4))          // Allocate fails
	f.Add("w0:H,w1:H,w2:H", "w0", uint8(1), uint8(2), uint8(1|8))          // GetPreferredAllocation fails
	f.Add("w0:Healthy,w1:healthy,w2:", "", uint8(1), uint8(1), uint8(1))   // health spelled three ways
	f.Add("", "", uint8(1), uint8(1), uint8(1))                            // no devices
	f.Add("w0:H,w1:H,w2:H,w3:H,w4:H,w5:H,w6:H,w7:H", "w7,w6,w5,w4,w3,w2,w1,w0", uint8(4), uint8(4), uint8(1))
	dir := shortDir(f)
	m := startManager(f, dir)
	h := startHostile(f, dir)
	exec := 0
	f.Fuzz(func(t *testing.T, list, preferred string, na, nb, bits uint8) {
		if len(list) > 4<<10 || len(preferred) > 4<<10 {
			t.Skip("input too large")
		}
		exec++
		devs := parseDevices(list)
		want := map[string]string{}
		for _, d := range devs {
			want[d.ID] = d.Health // the last answer for an ID counts
		}
		healthy := map[string]bool{}
		for id, health := range want {
			healthy[id] = health == pluginapi.Healthy
		}
		h.mu.Lock()
		h.preferred = nil
		if preferred != "" {
			for part := range strings.SplitSeq(preferred, ";") {
				h.preferred = append(h.preferred, strings.Split(part, ","))
			}
		}
		h.allocResps, h.allocErr, h.preferErr = int(bits&3), bits&4 != 0, bits&8 != 0
		h.envs = map[string]string{"WIDGETS": list}
		h.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		select {
		case h.lists <- devs:
		case <-ctx.Done():
			t.Fatal("the manager does not read ListAndWatch")
		}
		if err := m.Wait(ctx, func(s devices.Snapshot) bool {
			return s[widget].Registered && maps.Equal(s[widget].Devices, want)
		}); err != nil {
			t.Fatalf("manager never listed %v: %v (has %v)", want, err, m.Snapshot()[widget].Devices)
		}

		held := map[string]string{} // device → pod
		var uids []string
		for i, n := range []uint8{na % 9, nb % 9} {
			uid := fmt.Sprintf("u%d-%d", exec, i)
			uids = append(uids, uid)
			p, c := pod(uid, int64(n), widget)
			alloc, err := m.Allocate(ctx, p, c)
			if err != nil {
				for id, owner := range m.Snapshot()[widget].Allocated {
					if owner == "default/"+p.Name {
						t.Fatalf("pod %s holds %s after a failed Allocate: %v", p.Name, id, err)
					}
				}
				continue
			}
			ids := alloc.Devices[widget]
			if n > 0 && len(ids) != int(n) {
				t.Fatalf("pod %s asked for %d, got %q", p.Name, n, ids)
			}
			for _, id := range ids {
				if !healthy[id] {
					t.Fatalf("pod %s got %q, not a healthy device of the plugin (%v)", p.Name, id, want)
				}
				if owner, ok := held[id]; ok {
					t.Fatalf("device %q given to %s and %s", id, owner, p.Name)
				}
				held[id] = p.Name
			}
		}
		for _, uid := range uids {
			if err := m.Release(ctx, uid); err != nil {
				t.Fatal(err)
			}
		}
		if a := m.Snapshot()[widget].Allocated; len(a) != 0 {
			t.Fatalf("devices still held after release: %v", a)
		}
	})
}
