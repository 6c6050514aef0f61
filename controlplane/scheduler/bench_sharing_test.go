package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/config"
)

// BenchmarkScheduleGPUSharing: scheduling throughput of one-GPU pods on
// nodes whose 8 GPUs are time-sliced 10 ways (nvidia.com/gpu: 80, GPU
// feature discovery's sharing labels), and on nodes registered for HAMi
// (8 cards of 40 GiB, 10 slices each; pods asking nvidia.com/gpumem 3000
// and nvidia.com/gpucores 10, placed card by card by the HAMi plugin with
// its decision written at PreBind), against the same nodes with 8 whole
// GPUs, in the same run: 500 nodes, 4,000 pods (every pod fits each way).
// It reports pods/s of each and the ratios to whole GPUs.
func BenchmarkScheduleGPUSharing(b *testing.B) {
	const nodes, pods = 500, 4000
	run := func(mode string) time.Duration {
		ctx := context.Background()
		s, err := New(hamiBenchClient{}, config.Default(), Options{Recorder: nopEvents{}})
		if err != nil {
			b.Fatal(err)
		}
		for i := range nodes {
			n := benchNode(i, 8)
			switch mode {
			case "sliced":
				n = benchNode(i, 80)
				n.Labels[api.LabelGPUSharingStrategy] = "time-slicing"
				n.Labels[api.LabelGPUReplicas] = "10"
				n.Status.Capacity = api.ResourceList{api.ResourceNvidiaGPU: *resource.NewQuantity(80, resource.DecimalSI)}
			case "hami":
				n = benchNode(i, 80)
				var devs []api.HAMiNodeDevice
				for g := range 8 {
					devs = append(devs, api.HAMiNodeDevice{ID: fmt.Sprintf("GPU-%d-%d", i, g), Count: 10, Devmem: 40960, Devcore: 100,
						Type: "NVIDIA-NVIDIA A100-SXM4-40GB", Health: true})
				}
				n.Annotations = map[string]string{api.HAMiNodeRegister: api.EncodeHAMiNodeDevices(devs)}
			}
			s.onNodeAdd(n)
		}
		for i := range pods {
			p := benchPod(i, "100m", 1)
			if mode == "hami" {
				p.Spec.Containers[0].Resources.Limits[api.HAMiResourceMem] = *resource.NewQuantity(3000, resource.DecimalSI)
				p.Spec.Containers[0].Resources.Limits[api.HAMiResourceCores] = *resource.NewQuantity(10, resource.DecimalSI)
			}
			s.onPodAdd(p)
		}
		start := time.Now()
		ok, no := drainQueue(ctx, s)
		if ok != pods || no != 0 {
			b.Fatalf("%s: %d scheduled, %d failed, want all %d", mode, ok, no, pods)
		}
		return time.Since(start)
	}
	var whole, shared, hami time.Duration
	for b.Loop() {
		whole += run("whole")
		shared += run("sliced")
		hami += run("hami")
	}
	n := float64(b.N * pods)
	b.ReportMetric(n/whole.Seconds(), "whole-pods/s")
	b.ReportMetric(n/shared.Seconds(), "sliced-pods/s")
	b.ReportMetric(n/hami.Seconds(), "hami-pods/s")
	b.ReportMetric(whole.Seconds()/shared.Seconds(), "sliced/whole")
	b.ReportMetric(whole.Seconds()/hami.Seconds(), "hami/whole")
}

// hamiBenchClient is nopClient that finds every pod (HAMi's PreBind reads
// the pod before writing its decision; the write is a no-op).
type hamiBenchClient struct{ nopClient }

func (hamiBenchClient) Get(_ context.Context, k *api.Kind, ns, name string) (api.Object, error) {
	if k.Kind != "Pod" {
		return nil, api.NewNotFound(k, name)
	}
	return &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: ns}}, nil
}
