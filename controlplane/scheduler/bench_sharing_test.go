package scheduler

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/config"
)

// BenchmarkScheduleGPUSharing: scheduling throughput of one-GPU pods on
// nodes whose 8 GPUs are time-sliced 10 ways (nvidia.com/gpu: 80, GPU
// feature discovery's sharing labels) against the same nodes with 8 whole
// GPUs, in the same run: 500 nodes, 4,000 pods (every pod fits either
// way). It reports pods/s of each and their ratio.
func BenchmarkScheduleGPUSharing(b *testing.B) {
	const nodes, pods = 500, 4000
	run := func(replicas int) time.Duration {
		ctx := context.Background()
		s, err := New(nopClient{}, config.Default(), Options{Recorder: nopEvents{}})
		if err != nil {
			b.Fatal(err)
		}
		for i := range nodes {
			n := benchNode(i, 8*replicas)
			if replicas > 1 {
				n.Labels[api.LabelGPUSharingStrategy] = "time-slicing"
				n.Labels[api.LabelGPUReplicas] = "10"
				n.Status.Capacity = api.ResourceList{api.ResourceNvidiaGPU: *resource.NewQuantity(int64(8*replicas), resource.DecimalSI)}
			}
			s.onNodeAdd(n)
		}
		for i := range pods {
			s.onPodAdd(benchPod(i, "100m", 1))
		}
		start := time.Now()
		ok, no := drainQueue(ctx, s)
		if ok != pods || no != 0 {
			b.Fatalf("replicas %d: %d scheduled, %d failed, want all %d", replicas, ok, no, pods)
		}
		return time.Since(start)
	}
	var whole, shared time.Duration
	for b.Loop() {
		whole += run(1)
		shared += run(10)
	}
	n := float64(b.N * pods)
	b.ReportMetric(n/whole.Seconds(), "whole-pods/s")
	b.ReportMetric(n/shared.Seconds(), "sliced-pods/s")
	b.ReportMetric(whole.Seconds()/shared.Seconds(), "sliced/whole")
}
