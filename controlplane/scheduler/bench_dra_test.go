package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/controlplane/scheduler/config"
)

// draBenchClient is the fake API for the DynamicResources benchmark: the
// plugin's informers list and watch its classes, slices and claims, and
// its PreBind writes the claims there (so the informer catches up as in a
// cluster); bindings and traces are accepted and dropped, as nopClient
// does for the other benchmarks.
type draBenchClient struct{ *fake.Client }

func (draBenchClient) Bind(context.Context, *api.Binding) error { return nil }
func (draBenchClient) AddTrace(context.Context, string, string, ...api.TraceSpan) error {
	return nil
}

// draBenchPod is benchPod with one GPU through a ResourceClaimTemplate:
// the claim the resourceclaim controller made for it (POD-gpu-xxxxx,
// owned by the pod, named in status.resourceClaimStatuses).
func draBenchPod(i int) (*api.Pod, *api.ResourceClaim) {
	p := benchPod(i, "100m", 0)
	p.UID = fmt.Sprintf("uid-%05d", i)
	tmpl, claim := "single-gpu", p.Name+"-gpu-abcde"
	p.Spec.ResourceClaims = []api.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
	p.Spec.Containers[0].Resources.Claims = []api.ContainerResourceClaim{{Name: "gpu"}}
	p.Status.ResourceClaimStatuses = []api.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &claim}}
	c := gpuClaim(claim)
	c.Namespace = p.Namespace
	c.OwnerReferences = []api.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptrTo(true)}}
	return p, c
}

// benchDRA schedules pods pods on nodes nodes of 8 GPUs (each published in
// a gpu.nvidia.com ResourceSlice too), twice in each iteration on a fresh
// scheduler: once asking nvidia.com/gpu: 1 (the device plugin's path),
// once with a claim for one GPU of class gpu.nvidia.com (DRA); it reports
// both rates and their ratio.
func benchDRA(b *testing.B, nodes, pods int) {
	ctx := context.Background()
	var rate [2]struct {
		pods       int
		wall, cpuT time.Duration
	}
	for b.Loop() {
		for kind := range 2 { // 0: nvidia.com/gpu, 1: ResourceClaim
			b.StopTimer()
			objs := []api.Object{gpuClass()}
			for i := range nodes {
				objs = append(objs, gpuSlice(fmt.Sprintf("node-%05d", i), "nvl-0", "nvl-0", "nvl-0", "nvl-0", "nvl-1", "nvl-1", "nvl-1", "nvl-1"))
			}
			var queued []*api.Pod
			for i := range pods {
				if kind == 0 {
					queued = append(queued, benchPod(i, "100m", 1))
					continue
				}
				p, c := draBenchPod(i)
				queued = append(queued, p)
				objs = append(objs, c)
			}
			c := draBenchClient{fake.New(objs...)}
			s, err := New(c, config.Default(), Options{Recorder: nopEvents{}})
			if err != nil {
				b.Fatal(err)
			}
			runCtx, cancel := context.WithCancel(ctx)
			for _, es := range s.sources {
				go es.Run(runCtx, func() { s.queue.Move(wildCard, nil, nil) })
				if !es.WaitForSync(runCtx) {
					b.Fatal("DRA informers did not sync")
				}
			}
			for i := range nodes {
				s.onNodeAdd(benchNode(i, 8))
			}
			for _, p := range queued {
				s.onPodAdd(p)
			}
			start, cpu0 := time.Now(), cpuTime()
			b.StartTimer()
			scheduled, failed := drainQueue(ctx, s)
			b.StopTimer()
			rate[kind].wall += time.Since(start)
			rate[kind].cpuT += cpuTime() - cpu0
			rate[kind].pods += scheduled + failed
			cancel()
			if scheduled != pods {
				b.Fatalf("kind %d: %d of %d pods scheduled", kind, scheduled, pods)
			}
			b.StartTimer()
		}
	}
	gpu := float64(rate[0].pods) / rate[0].wall.Seconds()
	dra := float64(rate[1].pods) / rate[1].wall.Seconds()
	b.ReportMetric(gpu, "gpu-limit-pods/s")
	b.ReportMetric(dra, "claim-pods/s")
	b.ReportMetric(dra/gpu, "claim/gpu-ratio")
	b.ReportMetric(float64(rate[0].pods)/rate[0].cpuT.Seconds(), "gpu-limit-pods/cpu-s")
	b.ReportMetric(float64(rate[1].pods)/rate[1].cpuT.Seconds(), "claim-pods/cpu-s")
}

func BenchmarkScheduleDRA500Nodes2000Pods(b *testing.B) { benchDRA(b, 500, 2000) }
func BenchmarkScheduleDRA100Nodes400Pods(b *testing.B)  { benchDRA(b, 100, 400) }
