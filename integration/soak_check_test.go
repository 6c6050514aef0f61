package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/runtime"
)

// The soak's invariants (TestSoak) and its ledger of what the API
// acknowledged, faults, checks and violations.

type soakLedger struct {
	t          testing.TB
	mu         sync.Mutex
	faults     map[string]int
	lastRepair time.Time
	acked      int
	checks     int
	violations int
	writes     map[string]*ackedWrite // by kind/namespace/name
}

// ackedWrite is the last acknowledged write of an object.
type ackedWrite struct {
	kind     *api.Kind
	ns, name string
	uid      string
	rv       uint64
	// deleting: a delete was sent and not (yet) acknowledged: it may
	// have landed, so the object may be gone.
	deleting bool
	deleted  bool // a delete was acknowledged
}

func newSoakLedger(t testing.TB) *soakLedger {
	return &soakLedger{t: t, faults: map[string]int{}, writes: map[string]*ackedWrite{}}
}

func writeKey(kind *api.Kind, ns, name string) string { return kind.Kind + "/" + ns + "/" + name }

func (l *soakLedger) ack(obj api.Object) { l.ackMeta(api.MustKindOf(obj), *obj.GetObjectMeta()) }

func (l *soakLedger) ackMeta(kind *api.Kind, m api.ObjectMeta) {
	rv, err := strconv.ParseUint(m.ResourceVersion, 10, 64)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked++
	if err != nil {
		l.violationLocked("%s %s/%s acknowledged with resourceVersion %q: %v", kind.Kind, m.Namespace, m.Name, m.ResourceVersion, err)
		return
	}
	k := writeKey(kind, m.Namespace, m.Name)
	w := l.writes[k]
	if w == nil {
		w = &ackedWrite{kind: kind, ns: m.Namespace, name: m.Name}
		l.writes[k] = w
	}
	if m.UID != "" {
		w.uid = m.UID
	}
	w.rv = max(w.rv, rv)
	w.deleting = false // it was there after the delete sent before
}

// deleteSent records a delete about to be sent: from then on the object
// may be gone, whether or not the API acknowledges it.
func (l *soakLedger) deleteSent(kind *api.Kind, ns, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w := l.writes[writeKey(kind, ns, name)]; w != nil {
		w.deleting = true
	}
}

func (l *soakLedger) ackDelete(kind *api.Kind, ns, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked++
	if w := l.writes[writeKey(kind, ns, name)]; w != nil {
		w.deleted = true
	}
}

func (l *soakLedger) fault(what string, repairErr error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faults[what]++
	l.lastRepair = time.Now()
	l.t.Logf("%s: kill -9 %s, back (repair error: %v)", l.lastRepair.Format("15:04:05.000"), what, repairErr)
	l.checks++
	if repairErr != nil {
		l.violationLocked("after kill -9 of %s: %v", what, repairErr)
	}
}

func (l *soakLedger) lastRepairTime() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastRepair
}

// check counts one invariant check; a false one is a violation.
func (l *soakLedger) check(ok bool, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checks++
	if !ok {
		l.violationLocked(format, args...)
	}
}

func (l *soakLedger) violationLocked(format string, args ...any) {
	l.violations++
	l.t.Errorf("soak violation at %s: %s", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (l *soakLedger) snapshot() []ackedWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]ackedWrite, 0, len(l.writes))
	for _, w := range l.writes {
		out = append(out, *w)
	}
	return out
}

func (l *soakLedger) deletedNow(w ackedWrite) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.writes[writeKey(w.kind, w.ns, w.name)]
	return now.deleted || now.deleting
}

// checkWrites: every object whose last acknowledged write was a create or
// update is there, with its uid and at least that resourceVersion. A read
// that fails (the server is down) checks nothing.
func (l *soakLedger) checkWrites(ctx context.Context, c client.Interface) {
	for _, w := range l.snapshot() {
		if w.deleted || w.deleting {
			continue
		}
		octx, cancel := opCtx(ctx)
		obj, err := c.Get(octx, w.kind, w.ns, w.name)
		cancel()
		switch {
		case api.IsNotFound(err):
			if l.deletedNow(w) { // deleted (and acknowledged) since the snapshot
				continue
			}
			l.check(false, "%s %s/%s: acknowledged at resourceVersion %d, now not found", w.kind.Kind, w.ns, w.name, w.rv)
		case err != nil:
			return
		default:
			m := obj.GetObjectMeta()
			rv, _ := strconv.ParseUint(m.ResourceVersion, 10, 64)
			l.check(rv >= w.rv && (w.uid == "" || m.UID == w.uid), "%s %s/%s: acknowledged at resourceVersion %d uid %s, read at %d uid %s",
				w.kind.Kind, w.ns, w.name, w.rv, w.uid, rv, m.UID)
		}
	}
}

// checkDeletes: every object whose last acknowledged write was a delete
// is gone (after convergence: no grace period is still running).
func (l *soakLedger) checkDeletes(ctx context.Context, c client.Interface) {
	for _, w := range l.snapshot() {
		if !w.deleted {
			continue
		}
		octx, cancel := opCtx(ctx)
		obj, err := c.Get(octx, w.kind, w.ns, w.name)
		cancel()
		if err != nil && !api.IsNotFound(err) {
			l.check(false, "read %s %s/%s: %v", w.kind.Kind, w.ns, w.name, err)
			continue
		}
		l.check(api.IsNotFound(err), "%s %s/%s: deleted (acknowledged) but still there: %+v", w.kind.Kind, w.ns, w.name, obj)
	}
}

// checkGPURuntime: in containerd's view, no GPU of a node is in two
// running containers (the CDI devices each was created with). A list
// that fails (containerd is down) checks nothing.
func checkGPURuntime(ctx context.Context, rt runtime.Runtime, l *soakLedger) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	cs, err := rt.ListContainers(octx, nil)
	if err != nil {
		return
	}
	holders := map[string][]string{} // node + device → containers
	for _, c := range cs {
		if c.State != runtime.StateRunning || c.CDIEdits == nil {
			continue
		}
		for _, d := range c.CDIEdits.Devices {
			k := c.Labels[podworker.LabelNode] + " " + d
			holders[k] = append(holders[k], fmt.Sprintf("%s (pod %s/%s)", c.ID, c.Labels[runtime.LabelPodNamespace], c.Labels[runtime.LabelPodName]))
		}
	}
	for k, hs := range holders {
		l.check(len(hs) == 1, "GPU %s in %d running containers: %v", k, len(hs), hs)
	}
}

// Bounded resources.

type procSample struct {
	fds, threads, goroutines int
	rssKiB                   int64
}

// resourceWatch samples every process of the cluster; each incarnation's
// first sample after soakWarmUp is its baseline, and every later sample
// stays within soakBound of it.
type resourceWatch struct {
	s     *soakCluster
	mu    sync.Mutex
	procs map[string]*watchedProc // by soakProc name
}

type watchedProc struct {
	pid      int
	base     *procSample
	peak     procSample
	firstAll *procSample // the first baseline of any incarnation, for the table
	samples  int
	restarts int
}

const soakWarmUp = 15 * time.Second

// soakBound: a sample may be this many times its baseline, plus slack.
func soakBound(base, slack int64) int64 { return 3*base + slack }

func newResourceWatch(s *soakCluster) *resourceWatch {
	return &resourceWatch{s: s, procs: map[string]*watchedProc{}}
}

func (w *resourceWatch) sample(ctx context.Context, l *soakLedger) {
	for _, p := range append([]*soakProc{w.s.server}, w.s.agents...) {
		proc, started := p.current()
		if time.Since(started) < soakWarmUp {
			continue
		}
		pid := proc.cmd.Process.Pid
		smp, err := readProcSample(pid)
		if err != nil {
			continue // it died between current() and now: a fault
		}
		if p == w.s.server {
			g, err := w.s.goroutines(ctx)
			if err != nil {
				continue
			}
			smp.goroutines = g
		}
		w.mu.Lock()
		wp := w.procs[p.name]
		if wp == nil {
			wp = &watchedProc{}
			w.procs[p.name] = wp
		}
		if wp.pid != pid {
			if wp.pid != 0 {
				wp.restarts++
			}
			wp.pid, wp.base = pid, &smp
			if wp.firstAll == nil {
				wp.firstAll = &smp
			}
		}
		wp.samples++
		wp.peak = procSample{fds: max(wp.peak.fds, smp.fds), threads: max(wp.peak.threads, smp.threads),
			goroutines: max(wp.peak.goroutines, smp.goroutines), rssKiB: max(wp.peak.rssKiB, smp.rssKiB)}
		b := *wp.base
		w.mu.Unlock()
		l.check(int64(smp.fds) <= soakBound(int64(b.fds), 200), "%s (pid %d): %d open fds, baseline %d", p.name, pid, smp.fds, b.fds)
		l.check(int64(smp.threads) <= soakBound(int64(b.threads), 50), "%s (pid %d): %d threads, baseline %d", p.name, pid, smp.threads, b.threads)
		l.check(smp.rssKiB <= soakBound(b.rssKiB, 200<<10), "%s (pid %d): RSS %d KiB, baseline %d KiB", p.name, pid, smp.rssKiB, b.rssKiB)
		if p == w.s.server {
			l.check(int64(smp.goroutines) <= soakBound(int64(b.goroutines), 300), "%s (pid %d): %d goroutines, baseline %d", p.name, pid, smp.goroutines, b.goroutines)
		}
	}
}

func readProcSample(pid int) (procSample, error) {
	var s procSample
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.fds = len(fds)
	st, err := readProcStatus(pid)
	if err != nil {
		return s, err
	}
	s.rssKiB, s.threads = st["VmRSS:"], int(st["Threads:"])
	return s, nil
}

// goroutines reads go_goroutines from the server's /metrics.
func (s *soakCluster) goroutines(ctx context.Context) (int, error) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	resp, err := s.c.Do(octx, "GET", "/metrics", nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no go_goroutines in /metrics")
}

func (w *resourceWatch) printTable() {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.procs))
	for n := range w.procs {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Printf("\n| process | samples | restarts | first baseline: fds / threads / goroutines / RSS MiB | peak: fds / threads / goroutines / RSS MiB |\n|---|---|---|---|---|\n")
	for _, n := range names {
		p := w.procs[n]
		g := func(v int) string {
			if n != "server" {
				return "–"
			}
			return strconv.Itoa(v)
		}
		fmt.Printf("| %s | %d | %d | %d / %d / %s / %.0f | %d / %d / %s / %.0f |\n", n, p.samples, p.restarts,
			p.firstAll.fds, p.firstAll.threads, g(p.firstAll.goroutines), float64(p.firstAll.rssKiB)/1024,
			p.peak.fds, p.peak.threads, g(p.peak.goroutines), float64(p.peak.rssKiB)/1024)
	}
}

// Convergence.

// converge waits until the cluster has reached its spec, and counts it as
// one check per object once it has; by the deadline, whatever has not is a
// violation.
func (s *soakCluster) converge(ctx context.Context, rt runtime.Runtime, l *soakLedger, by time.Time) bool {
	var last []string
	err := pollUntil(ctx, time.Until(by), func() (bool, string) {
		last = s.divergence(ctx, rt, l)
		return len(last) == 0, strings.Join(last, "; ")
	})
	if err != nil {
		for _, why := range last {
			l.check(false, "not converged %v after the last fault: %s", soakConvergeBound, why)
		}
		return false
	}
	l.check(true, "")
	return true
}

// divergence lists how the cluster differs from its spec; nil when it
// does not.
func (s *soakCluster) divergence(ctx context.Context, rt runtime.Runtime, l *soakLedger) []string {
	octx, cancel := opCtx(ctx)
	defer cancel()
	deps, _, err := client.List[*api.Deployment](octx, s.c, soakNS, api.ListOptions{})
	if err != nil {
		return []string{"list deployments: " + err.Error()}
	}
	pods, _, err := client.List[*api.Pod](octx, s.c, soakNS, api.ListOptions{})
	if err != nil {
		return []string{"list pods: " + err.Error()}
	}
	nodes, _, err := client.List[*api.Node](octx, s.c, "", api.ListOptions{})
	if err != nil {
		return []string{"list nodes: " + err.Error()}
	}
	var out []string
	for _, d := range deps {
		want := *d.Spec.Replicas
		st := d.Status
		if st.ObservedGeneration < d.Generation || st.Replicas != want || st.UpdatedReplicas != want || st.ReadyReplicas != want || st.AvailableReplicas != want {
			out = append(out, fmt.Sprintf("deployment %s: generation %d observed %d, replicas %d: status %d/%d updated/%d ready/%d available",
				d.Name, d.Generation, st.ObservedGeneration, want, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas))
		}
		var mine []*api.Pod
		for _, p := range pods {
			if p.Labels["app"] == d.Name && p.DeletionTimestamp == nil {
				mine = append(mine, p)
			}
		}
		if int32(len(mine)) != want || int32(runningPods(mine)) != want {
			out = append(out, fmt.Sprintf("deployment %s: want %d pods Running and Ready, have %s", d.Name, want, podSummary(mine)))
		}
	}
	live := map[string]*api.Pod{} // by uid
	for _, p := range pods {
		switch {
		case p.DeletionTimestamp != nil:
			out = append(out, fmt.Sprintf("pod %s still Terminating (since %v)", p.Name, p.DeletionTimestamp.Time))
		case p.Status.Phase != api.PodRunning || !allReady(p):
			out = append(out, "pod not Running and Ready: "+podSummary([]*api.Pod{p}))
		default:
			live[p.UID] = p
		}
	}
	// The runtime runs what the API says, nothing more.
	cs, err := rt.ListContainers(octx, nil)
	if err != nil {
		return append(out, "list containers: "+err.Error())
	}
	running := map[string]int{}
	for _, c := range cs {
		if c.State != runtime.StateRunning {
			continue
		}
		uid := c.Labels[runtime.LabelPodUID]
		p := live[uid]
		switch {
		case p == nil:
			out = append(out, fmt.Sprintf("container %s of pod %s/%s (uid %s) runs on %s, but the pod is not live", c.ID, c.Labels[runtime.LabelPodNamespace], c.Labels[runtime.LabelPodName], uid, c.Labels[podworker.LabelNode]))
		case p.Spec.NodeName != c.Labels[podworker.LabelNode]:
			out = append(out, fmt.Sprintf("container %s of pod %s runs on %s; the pod is bound to %s", c.ID, p.Name, c.Labels[podworker.LabelNode], p.Spec.NodeName))
		}
		running[uid]++
	}
	for uid, p := range live {
		if running[uid] != 1 {
			out = append(out, fmt.Sprintf("pod %s: %d running containers, want 1", p.Name, running[uid]))
		}
	}
	// The nodes' GPU allocation records hold what the running pods asked for.
	held := map[string]int64{} // ns/pod → GPUs
	for _, n := range nodes {
		raw := n.Annotations[gputopology.AnnotationAllocations]
		if raw == "" {
			continue
		}
		alloc, err := gputopology.ParseAllocations(raw)
		if err != nil {
			out = append(out, fmt.Sprintf("node %s: %v", n.Name, err))
			continue
		}
		for _, pod := range alloc {
			held[pod]++
		}
	}
	for pod, n := range held {
		ns, name, _ := strings.Cut(pod, "/")
		if ns != soakNS {
			continue
		}
		if !slices.ContainsFunc(pods, func(p *api.Pod) bool { return p.Name == name && p.DeletionTimestamp == nil }) {
			out = append(out, fmt.Sprintf("pod %s holds %d GPUs in its node's allocation records but is gone", pod, n))
		}
	}
	for _, p := range live {
		var want int64
		for _, c := range p.Spec.Containers {
			if q, ok := c.Resources.Limits[api.ResourceNvidiaGPU]; ok {
				want += q.Value()
			}
		}
		if got := held[soakNS+"/"+p.Name]; got != want {
			out = append(out, fmt.Sprintf("pod %s asks for %d GPUs, holds %d in its node's allocation records", p.Name, want, got))
		}
	}
	return out
}

// Leaks.

// checkLeaks deletes the namespace and then looks for anything the pods
// left behind: containers, tasks and active snapshots in the containerd
// namespace, mounts under the agents' data dirs or of the namespace's
// containers, network namespaces and iptables rules of the pods, CDI
// files other than each node's own simulated spec, and GPU allocations.
func (s *soakCluster) checkLeaks(ctx context.Context, rt runtime.Runtime, e *ctrdEnv, l *soakLedger) {
	kind := api.MustKindOf(&api.Namespace{})
	uids := map[string]bool{}
	if pods, _, err := client.List[*api.Pod](ctx, s.c, soakNS, api.ListOptions{}); err == nil {
		for _, p := range pods {
			uids[p.UID] = true
		}
	}
	if cs, err := rt.ListContainers(ctx, nil); err == nil {
		for _, c := range cs {
			uids[c.Labels[runtime.LabelPodUID]] = true
		}
	}
	if err := s.c.Delete(ctx, kind, "", soakNS, api.DeleteOptions{}); err != nil {
		l.check(false, "delete namespace %s: %v", soakNS, err)
		return
	}
	l.ackDelete(kind, "", soakNS)
	err := pollUntil(ctx, 90*time.Second, func() (bool, string) {
		_, err := s.c.Get(ctx, kind, "", soakNS)
		if err == nil {
			pods, _, _ := client.List[*api.Pod](ctx, s.c, soakNS, api.ListOptions{})
			return false, "namespace still there, pods: " + podSummary(pods)
		}
		return api.IsNotFound(err), fmt.Sprint(err)
	})
	l.check(err == nil, "namespace %s not gone: %v", soakNS, err)

	var last []string
	err = pollUntil(ctx, 30*time.Second, func() (bool, string) {
		last = s.leaks(ctx, rt, e, uids)
		return len(last) == 0, strings.Join(last, "; ")
	})
	if err != nil {
		for _, leak := range last {
			l.check(false, "leak 30s after the namespace is gone: %s", leak)
		}
		return
	}
	l.check(true, "")
}

func (s *soakCluster) leaks(ctx context.Context, rt runtime.Runtime, e *ctrdEnv, podUIDs map[string]bool) []string {
	var out []string
	cs, err := rt.ListContainers(ctx, nil)
	if err != nil {
		return []string{"list containers: " + err.Error()}
	}
	for _, c := range cs {
		out = append(out, fmt.Sprintf("container %s (%s) of pod %s/%s on %s", c.ID, c.State, c.Labels[runtime.LabelPodNamespace], c.Labels[runtime.LabelPodName], c.Labels[podworker.LabelNode]))
	}
	ctr := func(args ...string) ([]string, error) {
		b, err := exec.CommandContext(ctx, "ctr", append([]string{"-a", e.addr, "-n", e.ns}, args...)...).Output()
		return strings.Split(strings.TrimSpace(string(b)), "\n"), err
	}
	tasks, err := ctr("tasks", "ls", "-q")
	if err != nil {
		return append(out, "ctr tasks ls: "+err.Error())
	}
	for _, id := range tasks {
		if id != "" {
			out = append(out, "task "+id)
		}
	}
	snaps, err := ctr("snapshots", "ls")
	if err != nil {
		return append(out, "ctr snapshots ls: "+err.Error())
	}
	for _, line := range snaps[min(1, len(snaps)):] { // KEY PARENT KIND; image layers are Committed
		if f := strings.Fields(line); len(f) > 0 && f[len(f)-1] == "Active" {
			out = append(out, "active snapshot "+f[0])
		}
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return append(out, err.Error())
	}
	var dirs []string
	for _, a := range s.agents {
		dirs = append(dirs, a.dataDir+"/")
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if slices.ContainsFunc(dirs, func(d string) bool { return strings.HasPrefix(f[1], d) }) || strings.Contains(f[1], "/"+e.ns+"/") {
			out = append(out, "mount "+f[1])
		}
	}
	// Network namespaces and iptables rules of the pods: agent/network
	// names them after the pod's uid.
	netns, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return append(out, "ip netns list: "+err.Error())
	}
	rules, err := exec.CommandContext(ctx, "iptables-save").Output()
	if err != nil {
		return append(out, "iptables-save: "+err.Error())
	}
	for uid := range podUIDs {
		short := strings.ReplaceAll(uid, "-", "")
		if len(short) > 12 {
			short = short[:12]
		}
		for _, text := range []struct{ what, s string }{{"network namespace", string(netns)}, {"iptables rule", string(rules)}} {
			if uid != "" && (strings.Contains(text.s, uid) || strings.Contains(text.s, short)) {
				out = append(out, fmt.Sprintf("%s of pod uid %s", text.what, uid))
			}
		}
	}
	if strings.Contains(string(rules), soakNS+"/") {
		out = append(out, "iptables rules naming namespace "+soakNS)
	}
	// CDI: each node's spec dir holds its simulated GPUs' spec and nothing else.
	for _, a := range s.agents {
		entries, err := os.ReadDir(filepath.Join(a.dataDir, "cdi"))
		if err != nil {
			out = append(out, fmt.Sprintf("node %s: CDI spec dir: %v", a.name, err))
			continue
		}
		for _, en := range entries {
			if en.Name() != "skiff-sim-"+a.name+".yaml" {
				out = append(out, fmt.Sprintf("node %s: CDI file %s", a.name, en.Name()))
			}
		}
		if cdis, _ := filepath.Glob("/var/run/cdi/*" + a.name + "*"); len(cdis) > 0 {
			out = append(out, fmt.Sprintf("node %s: CDI files in /var/run/cdi: %v", a.name, cdis))
		}
	}
	// No GPU allocation survives its pod.
	nodes, _, err := client.List[*api.Node](ctx, s.c, "", api.ListOptions{})
	if err != nil {
		return append(out, "list nodes: "+err.Error())
	}
	for _, n := range nodes {
		if raw := n.Annotations[gputopology.AnnotationAllocations]; raw != "" {
			alloc, err := gputopology.ParseAllocations(raw)
			if err != nil || len(alloc) > 0 {
				out = append(out, fmt.Sprintf("node %s: GPU allocations %s", n.Name, raw))
			}
		}
	}
	return out
}

func (l *soakLedger) printTable(mode string, churn time.Duration, seed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	total := 0
	var kinds []string
	for _, k := range []string{"server", "agent", "containerd"} {
		total += l.faults[k]
		kinds = append(kinds, fmt.Sprintf("%s %d", k, l.faults[k]))
	}
	fmt.Printf("\nChaos soak (SKIFF_SOAK=%s, churn %v, seed %d): 1 server + 3 agents (skiff processes), containerd, 3 simulated DGX A100\n", mode, churn, seed)
	fmt.Printf("| faults injected (kill -9) | operations acknowledged | invariant checks | violations |\n|---|---|---|---|\n")
	fmt.Printf("| %d (%s) | %d | %d | %d |\n", total, strings.Join(kinds, ", "), l.acked, l.checks, l.violations)
}
