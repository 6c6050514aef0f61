// Command bench-scheduler measures the scheduler the way Kubernetes'
// scheduler_perf does: the real control plane in process (bbolt store,
// API server logic, controllers, scheduler; controlplane.Start, without
// the web dashboard `skiff up` attaches), N simulated nodes
// (controlplane/simnodes, pods not run), and P pods created through the
// in-process client as fast as the API takes them. Every binding goes
// through the API's binding subresource and is committed to the store.
//
// It prints one JSON line: pods/s from the first create to the last
// measured pod bound, and the process's memory at the end (the control
// plane plus this harness, which keeps only counters).
//
// Variants: plain (cpu and memory requests), gpu (one nvidia.com/gpu per
// pod on 8-GPU nodes), unschedulable (every other pod selects a GPU
// product no node has; pods/s counts the schedulable half, as
// scheduler_perf measures its schedulable pods among unschedulable ones),
// dra (one GPU per pod through a ResourceClaimTemplate, every node's 8 GPUs
// published in a gpu.nvidia.com ResourceSlice; built with -tags benchdra,
// dra.go, since older trees have no DRA), spread (plain pods in 100
// groups, each spread over the nodes by topology spread constraints as a
// Deployment's pods are by default: PodTopologySpread counts the group's
// pods on every node; spread.go, left out with -tags nospread for trees
// from before topology spread constraints).
//
// hack/bench-scheduler.sh runs the variants and prints a table;
// hack/bench-ab.sh builds this same file in two trees and compares them.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/controlplane/simnodes"
)

type result struct {
	Variant     string  `json:"variant"`
	Nodes       int     `json:"nodes"`
	Pods        int     `json:"pods"`
	Measured    int     `json:"measured"`
	NoSync      bool    `json:"nosync"`
	GOMAXPROCS  int     `json:"gomaxprocs"`
	RegisterSec float64 `json:"register_s"`
	Seconds     float64 `json:"seconds"`
	PodsPerSec  float64 `json:"pods_per_s"`
	RSSMiB      float64 `json:"rss_mib"`
	PeakRSSMiB  float64 `json:"peak_rss_mib"`
	HeapMiB     float64 `json:"heap_mib"`
	GoSysMiB    float64 `json:"go_sys_mib"`
	Unscheduled int     `json:"unscheduled"`
	Events      int     `json:"events"`
	TimedOut    bool    `json:"timed_out,omitempty"`
	StoreMiB    float64 `json:"store_mib"`
	// Store commits (fsyncs) and writes during the measured part.
	Commits float64 `json:"commits"`
	Writes  float64 `json:"writes"`
	// RecentStarts: GuaranteedUpdates (the binds among them) that started
	// from the object's last write instead of a read of the store.
	RecentStarts float64 `json:"recent_starts"`
	// CPUMsPerPod is the process's CPU time (user and system: scheduler,
	// store, API and the creators) during the measured part, a pod bound:
	// what a pod costs. Times PodsPerSec it is the cores the run kept busy.
	CPUMsPerPod float64 `json:"cpu_ms_per_pod"`
	// AllocKiBPerPod is what the process allocated on its heap during the
	// measured part, a pod bound, and GCs its collections then: steadier
	// from run to run than the rate or the CPU on a busy machine, so a
	// change of a few per cent in what a pod costs shows here first.
	AllocKiBPerPod float64 `json:"alloc_kib_per_pod"`
	GCs            float64 `json:"gcs"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scheduler:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		nodes     = flag.Int("nodes", 5000, "simulated nodes")
		pods      = flag.Int("pods", 10000, "pods to create")
		variant   = flag.String("variant", "plain", "plain, gpu, unschedulable, spread or dra")
		noSync    = flag.Bool("nosync", false, "store without fsync")
		creators  = flag.Int("creators", 16, "concurrent pod creators")
		timeout   = flag.Duration("timeout", 5*time.Minute, "give up after")
		cpuProf   = flag.String("cpuprofile", "", "write a CPU profile of the measured part here")
		memProf   = flag.String("memprofile", "", "write an allocation profile (allocs) here at the end of the measured part, and one at its start to the same name with -start before .pprof (go tool pprof -base START END: the measured part's allocations)")
		blockProf = flag.String("blockprofile", "", "write a block profile (blocking on channels, locks, select) of the run here")
		mutexProf = flag.String("mutexprofile", "", "write a mutex contention profile of the run here")
		traceOut  = flag.String("trace", "", "write a runtime execution trace of the measured part here (go tool trace)")
	)
	flag.Parse()
	switch *variant {
	case "plain", "gpu", "unschedulable":
	case "spread":
		if !spreadBuilt {
			return fmt.Errorf("variant spread: this build has no topology spread constraints (built with -tags nospread)")
		}
	case "dra":
		if !draBuilt {
			return fmt.Errorf("variant dra: this build has no DRA (build with -tags benchdra on a tree that has it)")
		}
	default:
		return fmt.Errorf("variant %q: want plain, gpu, unschedulable, spread or dra", *variant)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *blockProf != "" {
		runtime.SetBlockProfileRate(int(10 * time.Microsecond)) // sample blocking events of ~10µs and more
		defer writeProfile("block", *blockProf)
	}
	if *mutexProf != "" {
		runtime.SetMutexProfileFraction(10)
		defer writeProfile("mutex", *mutexProf)
	}

	dir, err := os.MkdirTemp("", "skiff-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := controlplane.DefaultConfig(dir)
	cfg.API.Listen = "127.0.0.1:0"
	cfg.Store.NoSync = *noSync
	// controlplane.Start and simnodes, not the cluster package: hack/bench-ab.sh
	// builds this file in older trees too (7ef9412 has no cluster package).
	cp, err := controlplane.Start(context.Background(), cfg)
	if err != nil {
		return err
	}
	defer cp.Stop()
	c := cp.Local()

	scfg := simnodes.DefaultConfig()
	scfg.Count, scfg.RunPods = *nodes, false
	regStart := time.Now()
	sim, err := simnodes.New(scfg, c)
	if err != nil {
		return err
	}
	defer sim.Stop()
	if err := sim.Start(context.Background()); err != nil {
		return err
	}
	if *variant == "dra" {
		if err := setupDRA(ctx, c, sim.Names()); err != nil {
			return err
		}
	}
	res := result{Variant: *variant, Nodes: *nodes, Pods: *pods, NoSync: *noSync, GOMAXPROCS: runtime.GOMAXPROCS(0),
		RegisterSec: time.Since(regStart).Seconds()}

	// Watch binds from now on.
	podKind := api.MustKindOf(&api.Pod{})
	_, rv, err := c.List(ctx, podKind, "", api.ListOptions{})
	if err != nil {
		return err
	}
	for i := range *pods {
		if isMeasured(*variant, i) {
			res.Measured++
		}
	}
	bw := &bindWatch{want: int64(res.Measured), done: make(chan struct{})}
	go bw.run(ctx, c, rv)

	// The CPU profile and the trace cover the measured part alone: they
	// stop when the last pod is bound (stopMeasured), before measureAfter
	// lists every pod and event (8 % of a profile's samples when they
	// stopped at the end), or at an early return.
	var stops []func()
	stopMeasured := func() {
		for _, stop := range stops {
			stop()
		}
		stops = nil
	}
	defer stopMeasured()
	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if *traceOut != "" {
		f, err := os.Create(*traceOut)
		if err != nil {
			return err
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			return err
		}
		stops = append(stops, func() { trace.Stop(); f.Close() })
	}
	commits0, writes0 := storeCounter(cp, "skiff_store_commits_total"), storeCounter(cp, "skiff_store_writes_total")
	recent0 := storeCounter(cp, "skiff_store_recent_starts_total")
	cpu0, err := cpuTime()
	if err != nil {
		return err
	}
	if *memProf != "" {
		runtime.GC() // the profile is as of the last collection
		writeProfile("allocs", strings.TrimSuffix(*memProf, ".pprof")+"-start.pprof")
	}
	heap0 := readHeapMetrics()
	start := time.Now()
	if err := createPods(ctx, c, *variant, *pods, *creators); err != nil {
		return err
	}
	select {
	case <-bw.done:
	case <-ctx.Done():
		res.TimedOut = true
	}
	cpu1, err := cpuTime()
	if err != nil {
		return err
	}
	heap1 := readHeapMetrics()
	stopMeasured()
	if *memProf != "" {
		runtime.GC()
		writeProfile("allocs", *memProf)
	}
	end := time.Unix(0, bw.lastBind.Load())
	if res.TimedOut {
		end = time.Now()
	}
	res.Seconds = end.Sub(start).Seconds()
	res.Commits = storeCounter(cp, "skiff_store_commits_total") - commits0
	res.Writes = storeCounter(cp, "skiff_store_writes_total") - writes0
	res.RecentStarts = storeCounter(cp, "skiff_store_recent_starts_total") - recent0
	res.PodsPerSec = float64(bw.bound.Load()) / res.Seconds
	if n := bw.bound.Load(); n > 0 {
		res.CPUMsPerPod = float64((cpu1 - cpu0).Microseconds()) / 1000 / float64(n)
		res.AllocKiBPerPod = float64(heap1.allocs-heap0.allocs) / 1024 / float64(n)
	}
	res.GCs = float64(heap1.gcs - heap0.gcs)
	if res.TimedOut {
		res.Measured = int(bw.bound.Load())
	}

	measureAfter(&res, c, dir)
	return json.NewEncoder(os.Stdout).Encode(res)
}

// cpuTime is this process's CPU time so far, user and system.
func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// heapMetrics are the runtime's counts of bytes allocated on the heap and
// of collections, so far.
type heapMetrics struct{ allocs, gcs uint64 }

func readHeapMetrics() heapMetrics {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return heapMetrics{allocs: s[0].Value.Uint64(), gcs: s[1].Value.Uint64()}
}

// measureAfter fills in the memory, store size, unscheduled pods and
// events at the end of a run.
func measureAfter(res *result, c client.Interface, dir string) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapMiB, res.GoSysMiB = mib(ms.HeapAlloc), mib(ms.Sys)
	res.RSSMiB, res.PeakRSSMiB = procStatus("VmRSS:"), procStatus("VmHWM:")
	if fi, err := os.Stat(dir + "/state.db"); err == nil {
		res.StoreMiB = mib(uint64(fi.Size()))
	}
	all, _, err := client.List[*api.Pod](context.Background(), c, "", api.ListOptions{FieldSelector: "spec.nodeName="})
	if err == nil {
		res.Unscheduled = len(all)
	}
	if evs, _, err := c.List(context.Background(), api.MustKindOf(&api.Event{}), "", api.ListOptions{}); err == nil {
		res.Events = len(evs)
	}
}

// bindWatch counts the measured pods bound, from a watch of pods (a list
// again when the watch falls behind), and closes done when want are.
type bindWatch struct {
	want     int64
	bound    atomic.Int64
	lastBind atomic.Int64 // unix nanoseconds of the last bind seen
	done     chan struct{}
}

func (b *bindWatch) run(ctx context.Context, c client.Interface, rv string) {
	podKind := api.MustKindOf(&api.Pod{})
	measured := func(p *api.Pod) bool { return p.Labels["measured"] == "true" }
	seen := map[string]bool{}
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, podKind, "", api.ListOptions{ResourceVersion: rv})
		if err != nil {
			return
		}
		for ev := range w.Events() {
			p, ok := ev.Object.(*api.Pod)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			if p.Spec.NodeName != "" && measured(p) && !seen[p.Name] {
				seen[p.Name] = true
				b.lastBind.Store(time.Now().UnixNano())
				if b.bound.Add(1) == b.want {
					close(b.done)
					w.Stop()
					return
				}
			}
		}
		if api.IsGone(w.Err()) { // fell behind: count from a fresh list
			items, lrv, err := c.List(ctx, podKind, "", api.ListOptions{})
			if err != nil {
				return
			}
			for _, o := range items {
				p := o.(*api.Pod)
				if p.Spec.NodeName != "" && measured(p) && !seen[p.Name] {
					seen[p.Name] = true
					b.bound.Add(1)
				}
			}
			rv = lrv
			if b.bound.Load() >= b.want {
				b.lastBind.Store(time.Now().UnixNano())
				close(b.done)
				return
			}
		}
	}
}

// createPods creates the variant's pods through c with creators
// concurrent creators, as fast as the API takes them.
func createPods(ctx context.Context, c client.Interface, variant string, pods, creators int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var createErr atomic.Value
	for range creators {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= pods || ctx.Err() != nil {
					return
				}
				if _, err := c.Create(ctx, newPod(variant, i)); err != nil {
					createErr.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, ok := createErr.Load().(error); ok {
		return fmt.Errorf("create pods: %w", err)
	}
	return nil
}

func isMeasured(variant string, i int) bool { return variant != "unschedulable" || i%2 == 0 }

// newPod is pod i of a variant.
func newPod(variant string, i int) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("pod-%05d", i),
		Labels: map[string]string{"measured": fmt.Sprint(isMeasured(variant, i))}},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
			Resources: api.ResourceRequirements{Requests: api.ResourceList{
				api.ResourceCPU: resource.MustParse("100m"), api.ResourceMemory: resource.MustParse("500Mi")}}}}}}
	switch {
	case variant == "dra":
		draPod(p)
	case variant == "spread":
		spreadPod(p, i)
	case variant == "gpu":
		p.Spec.Containers[0].Resources.Limits = api.ResourceList{api.ResourceNvidiaGPU: resource.MustParse("1")}
	case !isMeasured(variant, i):
		p.Spec.NodeSelector = map[string]string{api.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3"}
	}
	return p
}

// storeCounter reads one of the store's counters from the control plane's
// metrics (0 when absent).
func storeCounter(cp *controlplane.ControlPlane, name string) float64 {
	mfs, err := cp.Metrics().Registry().Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// writeProfile writes the named runtime profile (block, mutex) to path.
func writeProfile(name, path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-scheduler:", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scheduler:", err)
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// procStatus reads a kB field of /proc/self/status, in MiB (0 off Linux).
func procStatus(field string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			var kb float64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb)
			return kb / 1024
		}
	}
	return 0
}
