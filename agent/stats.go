package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/runtime"
)

// Resource statistics, the kubelet's Summary API (GET /stats/summary, the
// types of k8s.io/kubelet/pkg/apis/stats/v1alpha1) reduced to what
// metrics.k8s.io needs: per container and per pod, CPU (cumulative
// usageCoreNanoSeconds and the rate usageNanoCores) and memory (usage and
// working set); the same for the node.
//
// A rate needs two samples. The agent samples every statsInterval (as the
// kubelet's cAdvisor housekeeping does) and again when asked, if its
// newest sample is more than minStatsWindow old; usageNanoCores is the
// CPU time used between the two newest samples divided by the time
// between them. A container seen once has no rate yet and is left out of
// the summary's CPU figures (metrics-server then skips it, as for a
// container that just started). So that `kubectl top pods` answers a
// few seconds after a pod starts, not a whole interval later, a started
// container is sampled at once (itself only: a pod's start does not read
// every container of the node), and a sample that saw a container
// without a rate is followed by a full one at most newSampleDelay later.
//
// Where the figures come from: containers from the runtime
// (runtime.StatsProvider: the container's cgroup on containerd; zeros on
// the fake runtime); the node from /proc/stat and /proc/meminfo. A
// simulated node (Config.Simulated) reports the sum of its containers
// (zeros) instead of the machine's figures, which it does not own.

const (
	statsInterval  = 10 * time.Second
	minStatsWindow = time.Second
	// newSampleDelay: the second sample of a new container comes this
	// soon, so it has a CPU rate (its first two samples are at least
	// minStatsWindow apart).
	newSampleDelay = 2 * minStatsWindow
)

// cpuSample is one reading of a cumulative CPU counter.
type cpuSample struct {
	t    time.Time
	used uint64 // core-nanoseconds
}

// nanoCores is the rate between two samples of a cumulative CPU counter,
// in nanocores (1e9 = one core busy); ok is false when there is no
// usable window (same time, or a counter that went back: a new cgroup).
func nanoCores(prev, cur cpuSample) (uint64, bool) {
	dt := cur.t.Sub(prev.t)
	if dt <= 0 || cur.used < prev.used {
		return 0, false
	}
	return uint64(float64(cur.used-prev.used) / dt.Seconds()), true
}

// series keeps the two newest samples of one counter.
type series struct{ prev, cur cpuSample }

// add records s; samples closer than minStatsWindow to the newest replace
// nothing but the newest's reading.
func (x *series) add(s cpuSample) {
	switch {
	case x.cur.t.IsZero():
		x.cur = s
	case s.t.Sub(x.cur.t) >= minStatsWindow:
		x.prev, x.cur = x.cur, s
	}
}

func (x *series) rate() (uint64, bool) {
	if x.prev.t.IsZero() {
		return 0, false
	}
	return nanoCores(x.prev, x.cur)
}

// containerSample is what one sample knows of a container.
type containerSample struct {
	st        runtime.ContainerStats
	started   time.Time
	pod       statsapi.PodReference
	container string
}

// statsSampler holds the agent's samples; the zero value is ready. Safe
// for concurrent use.
type statsSampler struct {
	kickOnce sync.Once
	kicks    chan struct{} // a container started: sample it now

	mu         sync.Mutex
	started    []string // containers started since the last sampleStarted
	last       time.Time
	node       series
	nodeMem    uint64             // working set, newest sample
	cpu        map[string]*series // by container ID
	containers map[string]containerSample
}

// kickC is the channel a started container kicks; made once.
func (s *statsSampler) kickC() chan struct{} {
	s.kickOnce.Do(func() { s.kicks = make(chan struct{}, 1) })
	return s.kicks
}

// kick asks statsLoop for a sample of container id, which started, now;
// it never blocks.
func (s *statsSampler) kick(id string) {
	s.mu.Lock()
	s.started = append(s.started, id)
	s.mu.Unlock()
	select {
	case s.kickC() <- struct{}{}:
	default: // one is already asked for
	}
}

// rateless reports whether the newest sample saw a container it has no
// CPU rate for yet (seen once).
func (s *statsSampler) rateless() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.containers {
		if x := s.cpu[id]; x == nil || x.prev.t.IsZero() {
			return true
		}
	}
	return false
}

// statsLoop samples every container of the node every statsInterval until
// ctx ends, and newSampleDelay after a sample that saw a container without
// a rate; a container that starts is sampled at once, alone, and brings
// the next full sample to newSampleDelay away if it was further (never
// puts it off: pods started one after the other still get theirs).
func (a *Agent) statsLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	due := time.Now()
	kicks := a.stats.kickC()
	for {
		full := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			full = true
		case <-kicks:
		}
		now := time.Now()
		sample := a.sampleStarted
		if full {
			sample = a.sample
		}
		if err := sample(ctx, now); err != nil && ctx.Err() == nil {
			a.log.Debug("sample resource usage", "err", err)
		}
		next := statsInterval
		if a.stats.rateless() {
			next = newSampleDelay
		}
		if full || now.Add(next).Before(due) {
			due = now.Add(next)
			t.Reset(next)
		}
	}
}

// sample reads every running container of this node and the node itself.
func (a *Agent) sample(ctx context.Context, now time.Time) error {
	sp, ok := a.rt.(runtime.StatsProvider)
	if !ok {
		return errors.New("the runtime does not report container statistics")
	}
	cs, err := a.rt.ListContainers(ctx, map[string]string{podworker.LabelNode: a.cfg.NodeName})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	seen := map[string]containerSample{}
	for _, c := range cs {
		if cs, ok := sampleContainer(ctx, sp, c); ok {
			seen[c.ID] = cs
		}
	}
	var nodeCPU, nodeMem uint64
	if a.cfg.Simulated {
		for _, c := range seen {
			nodeCPU += c.st.CPUUsageCoreNanoSeconds
			nodeMem += c.st.MemoryWorkingSetBytes
		}
	} else {
		if nodeCPU, err = procCPUUsage(); err != nil {
			return err
		}
		if nodeMem, err = procMemWorkingSet(); err != nil {
			return err
		}
	}

	s := &a.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cpu == nil {
		s.cpu = map[string]*series{}
	}
	for id := range s.cpu {
		if _, ok := seen[id]; !ok {
			delete(s.cpu, id) // gone: forget it
		}
	}
	for id, c := range seen {
		s.addCPU(id, c)
	}
	s.containers = seen
	s.node.add(cpuSample{t: now, used: nodeCPU})
	s.nodeMem = nodeMem
	s.last = now
	return nil
}

// sampleContainer reads c's figures, if it is a running container of a pod
// (ok false: not one, or stopped meanwhile).
func sampleContainer(ctx context.Context, sp runtime.StatsProvider, c runtime.ContainerStatus) (containerSample, bool) {
	if c.State != runtime.StateRunning || c.Labels[runtime.LabelPodUID] == "" {
		return containerSample{}, false
	}
	st, err := sp.ContainerStats(ctx, c.ID)
	if err != nil {
		return containerSample{}, false // stopped meanwhile
	}
	return containerSample{
		st: st, started: c.StartedAt, container: c.Labels[runtime.LabelContainerName],
		pod: statsapi.PodReference{Name: c.Labels[runtime.LabelPodName], Namespace: c.Labels[runtime.LabelPodNamespace], UID: c.Labels[runtime.LabelPodUID]},
	}, true
}

// addCPU adds c's CPU reading to container id's series; under s.mu.
func (s *statsSampler) addCPU(id string, c containerSample) {
	if s.cpu == nil {
		s.cpu = map[string]*series{}
	}
	x := s.cpu[id]
	if x == nil {
		x = &series{}
		s.cpu[id] = x
	}
	x.add(cpuSample{t: c.st.Time, used: c.st.CPUUsageCoreNanoSeconds})
}

// sampleStarted samples the containers started since it last ran (kick),
// each read alone, into the newest sample beside the others'; the next
// full sample (sample) reads them all again.
func (a *Agent) sampleStarted(ctx context.Context, _ time.Time) error {
	sp, ok := a.rt.(runtime.StatsProvider)
	if !ok {
		return errors.New("the runtime does not report container statistics")
	}
	s := &a.stats
	s.mu.Lock()
	ids := s.started
	s.started = nil
	s.mu.Unlock()
	for _, id := range ids {
		c, err := a.rt.ContainerStatus(ctx, id)
		if err != nil || c.Labels[podworker.LabelNode] != a.cfg.NodeName {
			continue // gone meanwhile, or another node's
		}
		cs, ok := sampleContainer(ctx, sp, c)
		if !ok {
			continue
		}
		s.mu.Lock()
		if s.containers == nil {
			s.containers = map[string]containerSample{}
		}
		s.containers[id] = cs
		s.addCPU(id, cs)
		s.mu.Unlock()
	}
	return nil
}

// summary is the Summary of the newest samples, sampling first when the
// newest is older than minStatsWindow.
func (a *Agent) summary(ctx context.Context, now time.Time) (statsapi.Summary, error) {
	a.stats.mu.Lock()
	stale := now.Sub(a.stats.last) >= minStatsWindow
	a.stats.mu.Unlock()
	if stale {
		if err := a.sample(ctx, now); err != nil {
			return statsapi.Summary{}, err
		}
	}
	s := &a.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	out := statsapi.Summary{Node: statsapi.NodeStats{NodeName: a.cfg.NodeName}}
	out.Node.CPU = cpuStats(&s.node)
	out.Node.Memory = &statsapi.MemoryStats{Time: metav1.NewTime(s.node.cur.t), WorkingSetBytes: new(s.nodeMem)}
	pods := map[string]*statsapi.PodStats{}
	var order []string
	for id, c := range s.containers {
		p := pods[c.pod.UID]
		if p == nil {
			p = &statsapi.PodStats{PodRef: c.pod}
			pods[c.pod.UID] = p
			order = append(order, c.pod.UID)
		}
		ws, usage := c.st.MemoryWorkingSetBytes, c.st.MemoryUsageBytes
		p.Containers = append(p.Containers, statsapi.ContainerStats{
			Name: c.container, StartTime: metav1.NewTime(c.started),
			CPU:    cpuStats(s.cpu[id]),
			Memory: &statsapi.MemoryStats{Time: metav1.NewTime(c.st.Time), WorkingSetBytes: &ws, UsageBytes: &usage},
		})
	}
	slices.Sort(order)
	for _, uid := range order {
		p := pods[uid]
		slices.SortFunc(p.Containers, func(x, y statsapi.ContainerStats) int { return strings.Compare(x.Name, y.Name) })
		p.CPU, p.Memory = sumPod(p.Containers)
		out.Pods = append(out.Pods, *p)
	}
	return out, nil
}

// cpuStats reports a series: cumulative always, the rate when known.
func cpuStats(x *series) *statsapi.CPUStats {
	if x == nil || x.cur.t.IsZero() {
		return nil
	}
	c := &statsapi.CPUStats{Time: metav1.NewTime(x.cur.t), UsageCoreNanoSeconds: new(x.cur.used)}
	if r, ok := x.rate(); ok {
		c.UsageNanoCores = &r
	}
	return c
}

// sumPod adds up a pod's containers; the pod's CPU rate is known when
// every container's is.
func sumPod(cs []statsapi.ContainerStats) (*statsapi.CPUStats, *statsapi.MemoryStats) {
	var cpu *statsapi.CPUStats
	var rate, used, ws uint64
	rated := true
	for _, c := range cs {
		if c.CPU == nil || c.CPU.UsageNanoCores == nil {
			rated = false
		} else {
			rate += *c.CPU.UsageNanoCores
		}
		if c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil {
			used += *c.CPU.UsageCoreNanoSeconds
			if cpu == nil {
				cpu = &statsapi.CPUStats{Time: c.CPU.Time}
			}
		}
		if c.Memory != nil && c.Memory.WorkingSetBytes != nil {
			ws += *c.Memory.WorkingSetBytes
		}
	}
	if cpu != nil {
		cpu.UsageCoreNanoSeconds = &used
		if rated {
			cpu.UsageNanoCores = &rate
		}
	}
	var t metav1.Time
	if len(cs) > 0 && cs[0].Memory != nil {
		t = cs[0].Memory.Time
	}
	return cpu, &statsapi.MemoryStats{Time: t, WorkingSetBytes: &ws}
}

// serveStatsSummary answers GET /stats/summary.
func (a *Agent) serveStatsSummary(w http.ResponseWriter, r *http.Request) {
	s, err := a.summary(r.Context(), time.Now())
	if err != nil {
		writeStatus(w, api.NewInternal(fmt.Errorf("stats summary: %w", err)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s)
}

// procCPUUsage is the machine's busy CPU time from /proc/stat's cpu line
// (user nice system irq softirq steal; not idle, iowait or guest, which
// user already counts), in core-nanoseconds.
func procCPUUsage() (uint64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("node cpu: %w", err)
	}
	return parseProcStat(string(b))
}

// userHZ is the unit of /proc/stat: USER_HZ, 100 on every Linux ABI.
const userHZ = 100

func parseProcStat(s string) (uint64, error) {
	for _, line := range splitLines(s) {
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != "cpu" {
			continue
		}
		var busy uint64
		for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system irq softirq steal
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("node cpu: /proc/stat: %w", err)
			}
			busy += n
		}
		return busy * (1e9 / userHZ), nil
	}
	return 0, errors.New("node cpu: /proc/stat has no cpu line")
}

// procMemWorkingSet is the machine's memory in use less inactive file
// pages (MemTotal - MemFree - Inactive(file)), as cAdvisor computes the
// root cgroup's working set.
func procMemWorkingSet() (uint64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("node memory: %w", err)
	}
	return parseMeminfo(string(b))
}

func parseMeminfo(s string) (uint64, error) {
	kb := map[string]uint64{}
	for _, line := range splitLines(s) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		if n, err := strconv.ParseUint(f[0], 10, 64); err == nil {
			kb[k] = n
		}
	}
	total, ok := kb["MemTotal"]
	if !ok {
		return 0, errors.New("node memory: /proc/meminfo has no MemTotal")
	}
	used := total - min(total, kb["MemFree"])
	return (used - min(used, kb["Inactive(file)"])) * 1024, nil
}
