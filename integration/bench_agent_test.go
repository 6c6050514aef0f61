package integration

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testenv"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/runtime"
	ctrd "skiff.dev/skiff/runtime/containerd"
)

// Agent measurements on real containerd (SKIFF_BENCH=1, root): `skiff
// server --no-agent` and `skiff agent --runtime containerd` run as
// subprocesses, like on a lab machine.
//
//   - apply → Running for a local busybox image over 50 pods created one at
//     a time (create sent → the watch shows the pod Running), against a raw
//     `ctr run -d` of the same image before each pod (the two alternate, so
//     both meet the same load), with where the time goes from the pods'
//     traces;
//   - the agent process's RSS with 100 running pods.
func TestBenchAgent(t *testing.T) {
	requireBench(t)
	addr := testenv.ContainerdAddress(t)
	testenv.RequireBusybox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	ctx := context.Background()
	const image = "docker.io/library/busybox:1.36"
	arch, err := testenv.Busybox(image).Archive()
	if err != nil {
		t.Fatal(err)
	}
	openNS := func(ns string) runtime.Runtime {
		cfg := ctrd.DefaultConfig()
		cfg.Address, cfg.Namespace, cfg.StateDir, cfg.CDISpecDirs = addr, ns, t.TempDir(), []string{t.TempDir()}
		rt, err := ctrd.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		if _, err := rt.ImportImage(ctx, bytes.NewReader(arch)); err != nil {
			t.Fatal(err)
		}
		return rt
	}
	removeWhere := func(rt runtime.Runtime, labels map[string]string) {
		cs, err := rt.ListContainers(ctx, labels)
		if err != nil {
			t.Error(err)
			return
		}
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Go(func() {
				if err := rt.RemoveContainer(ctx, c.ID); err != nil {
					t.Errorf("remove %s: %v", c.ID, err)
				}
			})
		}
		wg.Wait()
	}

	// Raw: ctr run -d, one before each of skiff's sequential pods below,
	// so both see the same load on a shared machine.
	const rawNS = "skiff-bench-raw"
	raw := openNS(rawNS)
	removeWhere(raw, nil)
	t.Cleanup(func() { removeWhere(raw, nil) })
	var rawLat []time.Duration
	rawRun := func(i int) {
		t0 := time.Now()
		out, err := exec.Command("ctr", "-a", addr, "-n", rawNS, "run", "-d", image, fmt.Sprintf("raw-%d", i), "sleep", "3600").CombinedOutput()
		if err != nil {
			t.Fatalf("ctr run: %v\n%s", err, out)
		}
		rawLat = append(rawLat, time.Since(t0))
	}

	// skiff: server and agent as processes; the agent uses containerd
	// namespace "skiff", where the image is imported first.
	const node = "bench-node"
	sk := openNS("skiff")
	removeWhere(sk, map[string]string{"skiff.dev/node": node})
	t.Cleanup(func() { removeWhere(sk, map[string]string{"skiff.dev/node": node}) })
	bin := coldBinary(t, skiffBinary(t))
	home, dataDir := t.TempDir(), filepath.Join(t.TempDir(), "server")
	listen := freeLoopbackAddr(t)
	gossipPort := freePort(t)
	startProc(t, bin, home, "server", "--no-agent", "--data-dir", dataDir, "--listen", listen,
		"--gossip-port", strconv.Itoa(gossipPort), "--advertise-address", "127.0.0.1")
	var c *client.Client
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		cfg, err := client.LoadKubeconfig(filepath.Join(dataDir, "kubeconfig"))
		if err != nil {
			return false, err.Error()
		}
		if c, err = client.New(cfg); err != nil {
			return false, err.Error()
		}
		_, _, err = client.List[*api.Node](ctx, c, "", api.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
	agentProc := startProc(t, bin, home, append([]string{"agent", "--join", fmt.Sprintf("127.0.0.1:%d", gossipPort)}, append(joinArgs(t, dataDir, "join-token"),
		"--node-name", node, "--runtime", "containerd", "--containerd-address", addr, "--data-dir", filepath.Join(t.TempDir(), "agent"),
		"--gossip-port", strconv.Itoa(freePort(t)), "--advertise-address", "127.0.0.1", "--listen-agent", "127.0.0.1:0",
		"--network", "none")...)...) // never the machine's own network namespace
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		n, err := client.Get[*api.Node](ctx, c, "", node)
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == api.NodeReady && cond.Status == api.ConditionTrue {
				return true, ""
			}
		}
		return false, "node not Ready"
	})
	rssIdle := rssKiB(t, agentProc.cmd.Process.Pid)
	anonIdle, fileIdle := procStatusKiB(t, agentProc.cmd.Process.Pid, "RssAnon:"), procStatusKiB(t, agentProc.cmd.Process.Pid, "RssFile:")

	// Watch pods; note when each first shows Running.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := c.Watch(wctx, api.MustKindOf(&api.Pod{}), "default", api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	runningAt := map[string]time.Time{}
	signal := make(chan struct{}, 1)
	go func() {
		for ev := range w.Events() {
			p, ok := ev.Object.(*api.Pod)
			if !ok || p.Status.Phase != api.PodRunning {
				continue
			}
			mu.Lock()
			if _, seen := runningAt[p.Name]; !seen {
				runningAt[p.Name] = time.Now()
			}
			mu.Unlock()
			select {
			case signal <- struct{}{}:
			default:
			}
		}
	}()
	pod := func(i int) *api.Pod {
		p := benchPod("default", fmt.Sprintf("run-%03d", i))
		p.Spec.Containers[0].ImagePullPolicy = "IfNotPresent"
		return p
	}
	waitRunning := func(names ...string) {
		deadline := time.After(120 * time.Second)
		for {
			mu.Lock()
			n := 0
			for _, name := range names {
				if _, ok := runningAt[name]; ok {
					n++
				}
			}
			mu.Unlock()
			if n == len(names) {
				return
			}
			select {
			case <-signal:
			case <-deadline:
				t.Fatalf("%d of %d pods Running after 120s", n, len(names))
			}
		}
	}
	var skLat []time.Duration
	sentAt := map[string]time.Time{}
	for i := range 50 {
		rawRun(i)
		p := pod(i)
		t0 := time.Now()
		if _, err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		waitRunning(p.Name)
		sentAt[p.Name] = t0
		mu.Lock()
		skLat = append(skLat, runningAt[p.Name].Sub(t0))
		mu.Unlock()
	}
	slices.Sort(skLat)
	slices.Sort(rawLat)
	mu.Lock()
	seenAt := maps.Clone(runningAt)
	mu.Unlock()
	steps := traceSteps(t, c, sentAt, seenAt)

	var rest []string
	for i := 50; i < 100; i++ {
		p := pod(i)
		if _, err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		rest = append(rest, p.Name)
	}
	waitRunning(rest...)
	rss100 := rssKiB(t, agentProc.cmd.Process.Pid)
	hwm := procStatusKiB(t, agentProc.cmd.Process.Pid, "VmHWM:")
	anon100, file100 := procStatusKiB(t, agentProc.cmd.Process.Pid, "RssAnon:"), procStatusKiB(t, agentProc.cmd.Process.Pid, "RssFile:")

	fmt.Printf("\nAgent (skiff agent process, containerd %s, local busybox image)\n", addr)
	fmt.Printf("| measurement | n | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|\n")
	fmt.Printf("| raw `ctr run -d` | %d | %s | %s | %s |\n", len(rawLat), ms(percentile(rawLat, .5)), ms(percentile(rawLat, .99)), ms(rawLat[len(rawLat)-1]))
	fmt.Printf("| skiff create pod → Running (sequential) | %d | %s | %s | %s |\n", len(skLat), ms(percentile(skLat, .5)), ms(percentile(skLat, .99)), ms(skLat[len(skLat)-1]))
	fmt.Printf("\nratio p50 skiff / raw = %.2f×\n", float64(percentile(skLat, .5))/float64(percentile(rawLat, .5)))
	fmt.Printf("\nWhere the time goes (p50 over the %d sequential pods of the trace spans' start and end, ms after the create was sent):\n", len(sentAt))
	fmt.Printf("| component | step | n | p50 start | p50 end | p50 duration |\n|---|---|---|---|---|---|\n")
	for _, s := range steps {
		fmt.Printf("| %s | %s | %d | %s | %s | %s |\n", s.component, s.step, len(s.start), ms(percentile(s.start, .5)), ms(percentile(s.end, .5)), ms(percentile(s.dur, .5)))
	}
	fmt.Printf("\n| agent memory | MiB |\n|---|---|\n| RSS, Ready, no pods | %.1f |\n| RSS, 100 running pods | %.1f |\n| peak RSS (VmHWM) | %.1f |\n",
		float64(rssIdle)/1024, float64(rss100)/1024, float64(hwm)/1024)
	fmt.Printf("| of the RSS, Ready: anonymous / file pages | %.1f / %.1f |\n| of the RSS, 100 pods: anonymous / file pages | %.1f / %.1f |\n",
		float64(anonIdle)/1024, float64(fileIdle)/1024, float64(anon100)/1024, float64(file100)/1024)
}

// traceStep is one component's step of the pods' traces: when it started
// and ended after the create was sent, and how long it took, sorted.
type traceStep struct {
	component, step string
	start, end, dur []time.Duration
}

// traceSteps reads the trace of each pod in sentAt (its first span of each
// component and step) and adds a last row, the watch seeing it Running.
func traceSteps(t testing.TB, c *client.Client, sentAt, runningAt map[string]time.Time) []*traceStep {
	t.Helper()
	var steps []*traceStep
	byKey := map[string]*traceStep{}
	add := func(component, step string, t0, start, end time.Time) {
		k := component + "/" + step
		s := byKey[k]
		if s == nil {
			s = &traceStep{component: component, step: step}
			byKey[k] = s
			steps = append(steps, s)
		}
		s.start = append(s.start, start.Sub(t0))
		s.end = append(s.end, end.Sub(t0))
		s.dur = append(s.dur, end.Sub(start))
	}
	names := slices.Sorted(maps.Keys(sentAt))
	for _, name := range names {
		tr, err := c.GetTrace(context.Background(), "default", name)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, sp := range tr.Spans {
			k := sp.Component + "/" + sp.Step
			if seen[k] {
				continue
			}
			seen[k] = true
			add(sp.Component, sp.Step, sentAt[name], sp.Start.Time, sp.End.Time)
		}
	}
	// Steps in the order of their median start.
	for _, s := range steps {
		slices.Sort(s.start)
		slices.Sort(s.end)
		slices.Sort(s.dur)
	}
	slices.SortStableFunc(steps, func(a, b *traceStep) int { return cmp.Compare(percentile(a.start, .5), percentile(b.start, .5)) })
	for _, name := range names {
		at := runningAt[name]
		add("watch", "Running seen", sentAt[name], at, at)
	}
	last := steps[len(steps)-1]
	slices.Sort(last.start)
	slices.Sort(last.end)
	slices.Sort(last.dur)
	return steps
}

func freePort(t testing.TB) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(freeLoopbackAddr(t))
	p, _ := strconv.Atoi(port)
	return p
}

// startProc runs skiff with args and HOME=home until the test ends.
func startProc(t testing.TB, bin, home string, args ...string) *skiffProcess {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+home)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &skiffProcess{cmd: cmd, out: out, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("skiff %s output:\n%s", args[0], out.String())
		}
	})
	return p
}

func rssKiB(t testing.TB, pid int) int64 { return procStatusKiB(t, pid, "VmRSS:") }

func procStatusKiB(t testing.TB, pid int, field string) int64 {
	t.Helper()
	st, err := readProcStatus(pid)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := st[field]
	if !ok {
		t.Fatalf("no %s in /proc/%d/status", field, pid)
	}
	return n
}

// readProcStatus reads /proc/PID/status: each field ("VmRSS:", "Threads:")
// with the number that follows it (kB for sizes).
func readProcStatus(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			out[f[0]] = n
		}
	}
	return out, nil
}

// coldBinary returns bin with its page cache dropped (fsync, then
// POSIX_FADV_DONTNEED on that file alone), so that the agent maps it as a
// lab machine would after a reboot: read from disk as it runs. A file just
// written (by the linker, or by a copy) maps with about 25 MiB more file
// pages resident, which the RSS figures would count as the agent's
// (docs/performance.md, "Decode less, sixth sitting").
func coldBinary(t testing.TB, bin string) string {
	t.Helper()
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	return bin
}
