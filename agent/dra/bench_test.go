package dra_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"skiff.dev/skiff/api"
)

// BenchmarkPrepareRoundTrip measures NodePrepareResources against the
// built-in GPU driver over a simulated DGX A100, on real unix sockets,
// beside gpuplugin's BenchmarkAllocateRoundTrip:
//
//   - grpc: one v1 NodePrepareResources of a new one-GPU claim (the
//     driver reads the claim from the API, a fake here, checks the one
//     inventory, writes its checkpoint and the claim's CDI spec), then its
//     NodeUnprepareResources outside the timing;
//   - manager: Manager.PrepareResources of a pod with that claim (read
//     the claim, the gRPC call, the manager's checkpoint), what a pod
//     start pays, then UnprepareResources outside the timing.
//
// It reports p50 and p99 besides ns/op (docs/performance.md).
func BenchmarkPrepareRoundTrip(b *testing.B) {
	const claims = 64
	var objs []api.Object
	for i := range claims {
		objs = append(objs, allocated(fmt.Sprintf("c%d", i), fmt.Sprintf("claim-%d", i), []string{fmt.Sprintf("p%d", i)}, result("gpu", fmt.Sprintf("gpu-%d", i%8))))
	}
	f := setUp(b, objs...)
	ctx := context.Background()

	b.Run("grpc", func(b *testing.B) {
		conn, err := grpc.NewClient("unix://"+f.d.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		c := drapb.NewDRAPluginClient(conn)
		lat := make([]time.Duration, 0, b.N)
		i := 0
		for b.Loop() {
			claim := &drapb.Claim{Namespace: "default", Name: fmt.Sprintf("c%d", i%claims), Uid: fmt.Sprintf("claim-%d", i%claims)}
			i++
			t0 := time.Now()
			resp, err := c.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{claim}})
			lat = append(lat, time.Since(t0))
			if err != nil || resp.Claims[claim.Uid].GetError() != "" {
				b.Fatalf("prepare: %v %v", err, resp)
			}
			b.StopTimer()
			if _, err := c.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{claim}}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		report(b, lat)
	})

	b.Run("manager", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		i := 0
		for b.Loop() {
			n := i % claims
			i++
			p := pod(fmt.Sprintf("p%d", n))
			p.Spec.ResourceClaims[0].ResourceClaimName = ptr(fmt.Sprintf("c%d", n))
			t0 := time.Now()
			if _, err := f.m.PrepareResources(ctx, p); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
			b.StopTimer()
			if err := f.m.UnprepareResources(ctx, p.UID); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		report(b, lat)
	})
}

func report(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
