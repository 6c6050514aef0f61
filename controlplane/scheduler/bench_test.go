package scheduler

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/scheduler/config"
)

// nopClient accepts every write and stores nothing: the benchmarks measure
// the scheduling algorithm, not the API server or the store.
type nopClient struct{}

var _ client.Interface = nopClient{}

func (nopClient) Create(_ context.Context, o api.Object) (api.Object, error)       { return o, nil }
func (nopClient) Update(_ context.Context, o api.Object) (api.Object, error)       { return o, nil }
func (nopClient) UpdateStatus(_ context.Context, o api.Object) (api.Object, error) { return o, nil }
func (nopClient) Delete(context.Context, *api.Kind, string, string, api.DeleteOptions) error {
	return nil
}
func (nopClient) Get(_ context.Context, k *api.Kind, _, name string) (api.Object, error) {
	return nil, api.NewNotFound(k, name)
}
func (nopClient) List(context.Context, *api.Kind, string, api.ListOptions) ([]api.Object, string, error) {
	return nil, "1", nil
}
func (nopClient) Watch(context.Context, *api.Kind, string, api.ListOptions) (client.Watcher, error) {
	return nil, fmt.Errorf("not supported")
}
func (nopClient) Bind(context.Context, *api.Binding) error { return nil }
func (nopClient) GetScale(context.Context, *api.Kind, string, string) (*api.Scale, error) {
	return nil, fmt.Errorf("not supported")
}
func (nopClient) UpdateScale(context.Context, *api.Kind, string, string, *api.Scale) (*api.Scale, error) {
	return nil, fmt.Errorf("not supported")
}
func (nopClient) AddTrace(context.Context, string, string, ...api.TraceSpan) error { return nil }
func (nopClient) GetTrace(context.Context, string, string) (*api.PodTrace, error) {
	return nil, fmt.Errorf("not supported")
}

type nopEvents struct{}

func (nopEvents) Eventf(context.Context, api.Object, string, string, string, ...any) {}

// scheduler_perf's node and pod templates: 4 cpu, 32Gi, 110 pods; pods
// request 100m and 500Mi.
func benchNode(i, gpus int) *api.Node {
	n := &api.Node{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("node-%05d", i), Labels: map[string]string{api.LabelHostname: fmt.Sprintf("node-%05d", i)}}}
	n.Status.Allocatable = rl("cpu", "4", "memory", "32Gi", "pods", "110")
	if gpus > 0 {
		n.Status.Allocatable[api.ResourceNvidiaGPU] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	n.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue}}
	return n
}

func benchPod(i int, cpu string, gpus int) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i), Namespace: "bench"}}
	p.Spec.Containers = []api.Container{{Name: "c", Resources: api.ResourceRequirements{Requests: rl("cpu", cpu, "memory", "500Mi")}}}
	if gpus > 0 {
		p.Spec.Containers[0].Resources.Limits = api.ResourceList{api.ResourceNvidiaGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}
	}
	return p
}

// benchSchedule schedules every pod once: pop, cycle (filter, score,
// assume), bind through a client that accepts at once, and the informer's
// confirmation. Unschedulable pods get their full failure handling
// (preemption search, status, event, trace) against the no-op client.
func benchSchedule(b *testing.B, nodes, pods int, gpusPerNode int, pod func(i int) *api.Pod) {
	ctx := context.Background()
	var scheduled, failed int
	var elapsed, cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		s, err := New(nopClient{}, config.Default(), Options{Recorder: nopEvents{}})
		if err != nil {
			b.Fatal(err)
		}
		for i := range nodes {
			s.onNodeAdd(benchNode(i, gpusPerNode))
		}
		for i := range pods {
			s.onPodAdd(pod(i))
		}
		start, cpu0 := time.Now(), cpuTime()
		b.StartTimer()
		ok, no := drainQueue(ctx, s)
		scheduled, failed = scheduled+ok, failed+no
		elapsed += time.Since(start)
		cpu += cpuTime() - cpu0
	}
	b.ReportMetric(float64(scheduled+failed)/elapsed.Seconds(), "pods/s")
	// Pods per CPU-second of the whole process (GC included): a fair number
	// on a shared machine, where wall time depends on the neighbours.
	b.ReportMetric(float64(scheduled+failed)/cpu.Seconds(), "pods/cpu-s")
	b.ReportMetric(float64(scheduled)/float64(scheduled+failed), "scheduled-ratio")
}

// drainQueue schedules every queued pod once, binding (or reporting) each
// at once; it returns how many were placed and how many fit nowhere.
func drainQueue(ctx context.Context, s *Scheduler) (scheduled, failed int) {
	for {
		qp, _ := s.queue.TryPop()
		if qp == nil {
			return scheduled, failed
		}
		t := s.scheduleOne(ctx, qp)
		if t == nil {
			continue
		}
		s.runTask(ctx, t)
		if t.assumed != nil {
			s.onPodUpdate(qp.Info.Pod, t.assumed.Pod) // the informer confirms the binding
			scheduled++
		} else {
			failed++
		}
	}
}

func BenchmarkSchedule5000Nodes10000Pods(b *testing.B) {
	benchSchedule(b, 5000, 10000, 0, func(i int) *api.Pod { return benchPod(i, "100m", 0) })
}

func BenchmarkSchedule5000Nodes10000GPUPods(b *testing.B) {
	benchSchedule(b, 5000, 10000, 8, func(i int) *api.Pod { return benchPod(i, "100m", 1) })
}

// Half the pods ask for more cpu than any node has: each of them is
// filtered against every node and then searched for preemption victims.
func BenchmarkSchedule5000Nodes10000PodsHalfUnschedulable(b *testing.B) {
	benchSchedule(b, 5000, 10000, 0, func(i int) *api.Pod {
		if i%2 == 1 {
			return benchPod(i, "64", 0)
		}
		return benchPod(i, "100m", 0)
	})
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
