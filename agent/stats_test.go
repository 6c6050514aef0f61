package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/runtime"
	rtfake "skiff.dev/skiff/runtime/fake"
)

func TestNanoCores(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		prev, cur  cpuSample
		want       uint64
		wantRateOK bool
	}{
		{"a quarter core over 10 s", cpuSample{t0, 1e9}, cpuSample{t0.Add(10 * time.Second), 1e9 + 2.5e9}, 250e6, true},
		{"two cores over 500 ms", cpuSample{t0, 0}, cpuSample{t0.Add(500 * time.Millisecond), 1e9}, 2e9, true},
		{"idle", cpuSample{t0, 7}, cpuSample{t0.Add(time.Second), 7}, 0, true},
		{"no window", cpuSample{t0, 1}, cpuSample{t0, 2}, 0, false},
		{"counter went back (a new cgroup)", cpuSample{t0, 5e9}, cpuSample{t0.Add(time.Second), 1e9}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := nanoCores(tc.prev, tc.cur)
			if got != tc.want || ok != tc.wantRateOK {
				t.Errorf("nanoCores = %d, %v; want %d, %v", got, ok, tc.want, tc.wantRateOK)
			}
		})
	}
}

func TestParseProcFiles(t *testing.T) {
	stat := "cpu  100 20 30 1000 50 6 4 2 0 0\ncpu0 50 10 15 500 25 3 2 1 0 0\nintr 1\n"
	got, err := parseProcStat(stat)
	// busy: user 100 + nice 20 + system 30 + irq 6 + softirq 4 + steal 2 = 162 ticks of 10 ms
	if want := uint64(162 * 10_000_000); err != nil || got != want {
		t.Errorf("parseProcStat = %d, %v; want %d", got, err, want)
	}
	if _, err := parseProcStat("intr 1\n"); err == nil {
		t.Error("parseProcStat without a cpu line: no error")
	}
	mem := "MemTotal:       16000 kB\nMemFree:         4000 kB\nMemAvailable:   9000 kB\nInactive(file):  3000 kB\n"
	ws, err := parseMeminfo(mem)
	if want := uint64((16000 - 4000 - 3000) * 1024); err != nil || ws != want {
		t.Errorf("parseMeminfo = %d, %v; want %d", ws, err, want)
	}
	if _, err := parseMeminfo("MemFree: 1 kB\n"); err == nil {
		t.Error("parseMeminfo without MemTotal: no error")
	}
}

// Two samples of a container's cumulative CPU give its rate; the summary
// groups containers by pod, sums them, and a simulated node reports the
// sum of its pods.
func TestSummaryFromTwoSamples(t *testing.T) {
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	rt := rtfake.New(rtfake.Config{Images: []string{"nginx:1"}, Now: clock})
	id := runContainer(t, rt, testNode, "default", "web", "uid-web")
	runContainer(t, rt, "node-2", "default", "elsewhere", "uid-elsewhere") // not this node's
	cfg := testConfig(t)
	cfg.Simulated = true
	a, err := New(cfg, fake.New(), rt)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	set := func(cpu, ws uint64) {
		t.Helper()
		if err := rt.SetStats(id, runtime.ContainerStats{CPUUsageCoreNanoSeconds: cpu, MemoryWorkingSetBytes: ws, MemoryUsageBytes: ws + 100}); err != nil {
			t.Fatal(err)
		}
	}
	set(3e9, 64<<20)
	if err := a.sample(ctx, now); err != nil {
		t.Fatal(err)
	}
	first, err := a.summary(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Pods) != 1 || first.Pods[0].Containers[0].CPU.UsageNanoCores != nil {
		t.Fatalf("after one sample: %+v, want one pod with no CPU rate yet", first.Pods)
	}

	now = now.Add(2 * time.Second)
	set(3e9+1e9, 80<<20) // half a core over 2 s
	s, err := a.summary(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 1 {
		t.Fatalf("pods %+v, want only this node's", s.Pods)
	}
	p := s.Pods[0]
	if p.PodRef.Name != "web" || p.PodRef.Namespace != "default" || p.PodRef.UID != "uid-web" || len(p.Containers) != 1 || p.Containers[0].Name != "web" {
		t.Fatalf("pod %+v", p)
	}
	c := p.Containers[0]
	if c.CPU.UsageNanoCores == nil || *c.CPU.UsageNanoCores != 500e6 {
		t.Errorf("container usageNanoCores %v, want 500000000", c.CPU.UsageNanoCores)
	}
	if *c.Memory.WorkingSetBytes != 80<<20 || *c.Memory.UsageBytes != 80<<20+100 {
		t.Errorf("container memory %d/%d", *c.Memory.WorkingSetBytes, *c.Memory.UsageBytes)
	}
	if *p.CPU.UsageNanoCores != 500e6 || *p.Memory.WorkingSetBytes != 80<<20 {
		t.Errorf("pod sums cpu %d memory %d", *p.CPU.UsageNanoCores, *p.Memory.WorkingSetBytes)
	}
	if s.Node.NodeName != testNode || s.Node.CPU.UsageNanoCores == nil || *s.Node.CPU.UsageNanoCores != 500e6 || *s.Node.Memory.WorkingSetBytes != 80<<20 {
		t.Errorf("simulated node %+v cpu %v, want the sum of its pods", s.Node, s.Node.CPU)
	}
}

// A container that starts is sampled at once and again newSampleDelay
// later, so `kubectl top pods` has its CPU rate within seconds of the
// start, long before the next statsInterval tick.
func TestStartedContainerSampledSoon(t *testing.T) {
	rt := rtfake.New(rtfake.Config{Images: []string{"nginx:1"}})
	cfg := testConfig(t)
	cfg.Simulated = true
	a, err := New(cfg, fake.New(), rt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.runtimeEvents(ctx)
	go a.statsLoop(ctx)
	testwait.For(t, 5*time.Second, "the first sample", func() bool {
		a.stats.mu.Lock()
		defer a.stats.mu.Unlock()
		return !a.stats.last.IsZero()
	})
	runContainer(t, rt, testNode, "default", "web", "uid-web")
	// The next tick is statsInterval (10 s) away: only the kick and the
	// follow-up sample can give a rate before it.
	testwait.Until(t, statsInterval-time.Second, func() (bool, string) {
		a.stats.mu.Lock()
		defer a.stats.mu.Unlock()
		for id, c := range a.stats.containers {
			if x := a.stats.cpu[id]; c.pod.Name == "web" && x != nil && !x.prev.t.IsZero() {
				return true, ""
			}
		}
		return false, "no CPU rate for the started container yet"
	})
}

// listCounter counts the runtime's ListContainers calls.
type listCounter struct {
	*rtfake.Runtime
	mu    sync.Mutex
	lists int
}

func (l *listCounter) ListContainers(ctx context.Context, labels map[string]string) ([]runtime.ContainerStatus, error) {
	l.mu.Lock()
	l.lists++
	l.mu.Unlock()
	return l.Runtime.ListContainers(ctx, labels)
}

// A started container's first sample reads that container alone, beside
// the newest full sample of the others, which stays as it was; a
// container of another node sharing the runtime is not sampled.
func TestStartedContainerSampledAlone(t *testing.T) {
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	fr := rtfake.New(rtfake.Config{Images: []string{"nginx:1"}, Now: func() time.Time { return now }})
	rt := &listCounter{Runtime: fr}
	old := runContainer(t, rt, testNode, "default", "old", "uid-old")
	cfg := testConfig(t)
	cfg.Simulated = true
	a, err := New(cfg, fake.New(), rt)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.sample(ctx, now); err != nil {
		t.Fatal(err)
	}
	before := *a.stats.cpu[old]
	lists := rt.lists

	now = now.Add(3 * time.Second)
	started := runContainer(t, rt, testNode, "default", "web", "uid-web")
	other := runContainer(t, rt, "node-2", "default", "elsewhere", "uid-elsewhere")
	a.stats.kick(started)
	a.stats.kick(other)
	if err := a.sampleStarted(ctx, now); err != nil {
		t.Fatal(err)
	}
	if rt.lists != lists {
		t.Errorf("the started container's sample listed the node's containers %d times", rt.lists-lists)
	}
	if c, ok := a.stats.containers[started]; !ok || c.pod.Name != "web" || a.stats.cpu[started] == nil || !a.stats.rateless() {
		t.Errorf("started container's sample %+v (in %v), want it sampled once, without a rate yet", c, ok)
	}
	if _, ok := a.stats.containers[other]; ok {
		t.Error("another node's container was sampled")
	}
	if _, ok := a.stats.containers[old]; !ok || *a.stats.cpu[old] != before {
		t.Errorf("the other container's series changed: %+v, was %+v", a.stats.cpu[old], before)
	}
}
