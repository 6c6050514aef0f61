package gpuplugin_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/api/resource"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"skiff.dev/skiff/agent/devices/gpuplugin"
	"skiff.dev/skiff/api"
)

// BenchmarkAllocateRoundTrip measures Allocate against the built-in GPU
// plugin over a simulated DGX A100, on real unix sockets:
//
//   - grpc: one v1beta1 Allocate call, device manager side to plugin and back;
//   - manager: Manager.Allocate of one GPU for a new pod (free-set choice,
//     GetPreferredAllocation, checkpoint write, Allocate) then its Release,
//     what a pod start pays.
//
// It reports p50 and p99 besides ns/op (docs/performance.md, GPUs).
func BenchmarkAllocateRoundTrip(b *testing.B) {
	f := setUp(b)
	m, p := f.m, f.p
	ctx := context.Background()
	devs, err := f.src.Devices(ctx)
	if err != nil {
		b.Fatal(err)
	}

	b.Run("grpc", func(b *testing.B) {
		conn, err := grpc.NewClient("unix://"+p.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		c := pluginapi.NewDevicePluginClient(conn)
		req := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{devs[0].UUID}}}}
		if _, err := c.Allocate(ctx, req); err != nil { // connect outside the timing
			b.Fatal(err)
		}
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for b.Loop() {
			t0 := time.Now()
			if _, err := c.Allocate(ctx, req); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportPercentiles(b, lat)
	})

	b.Run("manager", func(b *testing.B) {
		c := &api.Container{Name: "main"}
		c.Resources.Limits = api.ResourceList{gpuplugin.ResourceName: *resource.NewQuantity(1, resource.DecimalSI)}
		lat := make([]time.Duration, 0, b.N)
		i := 0
		b.ResetTimer()
		for b.Loop() {
			pod := &api.Pod{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "default", UID: fmt.Sprintf("uid-%d", i)}}
			i++
			t0 := time.Now()
			if _, err := m.Allocate(ctx, pod, c); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
			if err := m.Release(ctx, pod.UID); err != nil {
				b.Fatal(err)
			}
		}
		reportPercentiles(b, lat)
	})
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
