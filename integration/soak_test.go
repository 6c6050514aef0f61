package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testwait"
)

// A chaos soak (SKIFF_SOAK=short|long, root, containerd from
// hack/containerd-start.sh): `skiff server` and three `skiff agent`
// processes of the built binary on real containerd, each agent with a
// simulated DGX A100 (8 GPUs), under continuous churn — a Deployment
// scaled, two Deployments rolled (one of them GPU pods), standalone GPU
// pods created and deleted, ConfigMaps created, updated and deleted —
// while a fault injector kills -9 the server, an agent or containerd at
// random moments and starts it again on the same data. Invariants are
// checked all along (soak_check_test.go):
//
//   - every acknowledged write is readable with at least its
//     resourceVersion, every acknowledged delete stays deleted;
//   - no GPU of a node is in two running containers (containerd's view:
//     the CDI devices each container was created with);
//   - goroutines (server, from /metrics), threads, fds and RSS of every
//     process stay within a generous bound of their first sample after
//     warm-up;
//
// after the last fault, within soakConvergeBound: every Deployment has its
// replicas Running and Ready on its newest template, no pod is stuck
// Terminating, every running container belongs to a live pod and every
// live pod has one, the nodes' GPU allocation records match the running
// pods; and once everything is deleted: no container, task, active
// snapshot, mount, network namespace, iptables rule or CDI file left.
//
// The agents run with --network none (pods share the host's network; no
// pod here declares a port): three CNI pod networks from three agent
// processes on one machine would need a bridge flag `skiff agent` does not
// have. The leak checks for network namespaces and iptables rules still
// run, and would catch one made by mistake.
//
// It ends with a table: faults injected, operations acknowledged,
// invariant checks, violations (any violation fails the test).
func TestSoak(t *testing.T) {
	mode, churnFor := soakDuration(t)
	e := newCtrdEnv(t)
	rt := e.runtime(t) // imports busybox into the namespace the agents use
	ctrdProc := privateContainerd(t, e.addr)
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("SKIFF_SOAK_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("soak %s: churn for %v, seed %d (SKIFF_SOAK_SEED)", mode, churnFor, seed)

	s := startSoakCluster(t, e, 3)
	l := newSoakLedger(t)
	ctx := context.Background()
	if _, err := s.c.Create(ctx, namespace(soakNS)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*api.Deployment{
		soakDeployment("web", 2, 0),
		soakDeployment("roll", 3, 0),
		soakDeployment("gpu-dep", 2, 2),
	} {
		got, err := s.c.Create(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		l.ack(got)
	}
	testwait.Until(t, 90*time.Second, func() (bool, string) {
		ps := listPods(t, s.c, soakNS, "")
		return runningPods(ps) == 7, "7 pods Running before the churn: " + podSummary(ps)
	})

	// Churn, checkers and faults, for churnFor.
	cctx, stopChurn := context.WithTimeout(ctx, churnFor)
	defer stopChurn()
	var churners, checkers sync.WaitGroup
	workers := []func(context.Context, *rand.Rand){
		func(ctx context.Context, r *rand.Rand) { s.scaleWeb(ctx, r, l) },
		func(ctx context.Context, r *rand.Rand) { s.rollDeployments(ctx, r, l) },
		func(ctx context.Context, r *rand.Rand) { s.gpuPods(ctx, r, l) },
		func(ctx context.Context, r *rand.Rand) { s.configMaps(ctx, r, l) },
		func(ctx context.Context, r *rand.Rand) { s.injectFaults(ctx, r, l, ctrdProc, mode) },
	}
	for i, w := range workers {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		churners.Go(func() { w(cctx, r) })
	}
	kctx, stopChecks := context.WithCancel(ctx)
	res := newResourceWatch(s)
	checkers.Go(func() { every(kctx, 2*time.Second, func() { l.checkWrites(kctx, s.c) }) })
	checkers.Go(func() { every(kctx, time.Second, func() { checkGPURuntime(kctx, rt, l) }) })
	checkers.Go(func() { every(kctx, 3*time.Second, func() { res.sample(kctx, l) }) })
	churners.Wait()
	churnEnd := time.Now()

	// Convergence after the last fault (and the last write).
	from := churnEnd
	if r := l.lastRepairTime(); r.After(from) {
		from = r
	}
	convergeBy := from.Add(soakConvergeBound)
	t.Logf("churn over; the last fault was repaired %v before its end; converging by %v", churnEnd.Sub(l.lastRepairTime()).Round(time.Millisecond), soakConvergeBound)
	converged := s.converge(ctx, rt, l, convergeBy)
	stopChecks()
	checkers.Wait()
	if converged {
		l.checkWrites(ctx, s.c) // once more, now that the cluster is quiet
		l.checkDeletes(ctx, s.c)
	}

	// Everything deleted: nothing left behind.
	s.checkLeaks(ctx, rt, e, l)

	l.printTable(mode, churnFor, seed)
	res.printTable()
}

// soakNS is the namespace of the soak's objects.
const soakNS = "skiff-soak"

// soakConvergeBound: after the last fault, every object reaches its spec
// within this.
const soakConvergeBound = 60 * time.Second

// soakDuration is the churn phase's length from SKIFF_SOAK.
func soakDuration(t *testing.T) (string, time.Duration) {
	t.Helper()
	switch mode := os.Getenv("SKIFF_SOAK"); mode {
	case "":
		t.Skip("a chaos soak: set SKIFF_SOAK=short (about two minutes) or SKIFF_SOAK=long (SKIFF_SOAK_DURATION, default 15m); hack/soak.sh")
	case "short":
		return mode, 90 * time.Second
	case "long":
		d := 15 * time.Minute
		if v := os.Getenv("SKIFF_SOAK_DURATION"); v != "" {
			var err error
			if d, err = time.ParseDuration(v); err != nil || d <= 0 {
				t.Fatalf("SKIFF_SOAK_DURATION=%q: want a positive duration such as 15m", v)
			}
		}
		return mode, d
	default:
		t.Fatalf("SKIFF_SOAK=%q: want short or long", mode)
	}
	return "", 0
}

// every runs f every interval until ctx ends (a checker's pace).
func every(ctx context.Context, interval time.Duration, f func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			f()
		}
	}
}

// pollUntil polls cond until it holds, ctx ends or timeout passes; for
// goroutines other than the test's, which cannot t.Fatal.
func pollUntil(ctx context.Context, timeout time.Duration, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %s", timeout, why)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", ctx.Err(), why)
		case <-time.After(100 * time.Millisecond): // poll interval
		}
	}
}

// soakProc is one process of the soak cluster and how to start it again.
type soakProc struct {
	name    string
	args    []string
	dataDir string
	mu      sync.Mutex
	proc    *skiffProcess
	started time.Time
}

func (p *soakProc) current() (*skiffProcess, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proc, p.started
}

type soakCluster struct {
	t         testing.TB
	bin, home string
	token     string
	apiURL    string
	server    *soakProc
	agents    []*soakProc
	c         *client.Client
	ctrdNS    string
}

// startSoakCluster starts `skiff server --no-agent` and n agents on
// containerd namespace e.ns, each with a simulated DGX A100, and waits
// until every node is Ready.
func startSoakCluster(t testing.TB, e *ctrdEnv, n int) *soakCluster {
	t.Helper()
	s := &soakCluster{t: t, bin: skiffBinary(t), home: t.TempDir(), ctrdNS: e.ns}
	root := t.TempDir()
	listen := freeLoopbackAddr(t)
	s.apiURL = "https://" + listen
	gossip := strconv.Itoa(freePort(t))
	s.server = &soakProc{name: "server", dataDir: filepath.Join(root, "server")}
	s.server.args = []string{"server", "--no-agent", "--data-dir", s.server.dataDir, "--listen", listen,
		"--gossip-port", gossip, "--advertise-address", "127.0.0.1"}
	s.start(s.server)
	if err := s.waitAPI(context.Background(), s.server); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		name := fmt.Sprintf("soak-%d", i+1)
		a := &soakProc{name: name, dataDir: filepath.Join(root, name)}
		a.args = append([]string{"agent", "--join", "127.0.0.1:" + gossip}, joinArgs(t, s.server.dataDir, "join-token")...)
		a.args = append(a.args, "--node-name", name,
			"--runtime", "containerd", "--containerd-address", e.addr, "--containerd-namespace", e.ns,
			"--gpus", "sim:dgxa100", "--network", "none", "--data-dir", a.dataDir,
			"--gossip-port", strconv.Itoa(freePort(t)), "--advertise-address", "127.0.0.1", "--listen-agent", freeLoopbackAddr(t))
		s.start(a)
		s.agents = append(s.agents, a)
	}
	for _, a := range s.agents {
		if err := s.waitNodeReady(context.Background(), a, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func (s *soakCluster) start(p *soakProc) {
	proc := startProc(s.t, s.bin, s.home, p.args...)
	p.mu.Lock()
	p.proc, p.started = proc, time.Now()
	p.mu.Unlock()
}

func (s *soakCluster) kill9(p *soakProc) error {
	proc, _ := p.current()
	if err := proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 %s: %w", p.name, err)
	}
	<-proc.done
	return nil
}

// waitAPI waits until the server answers an authenticated list; the first
// time, it reads the token the server wrote and makes s.c.
func (s *soakCluster) waitAPI(ctx context.Context, p *soakProc) error {
	return pollUntil(ctx, 60*time.Second, func() (bool, string) {
		proc, _ := p.current()
		select {
		case <-proc.done:
			return false, fmt.Sprintf("server exited: %v\n%s", proc.err, proc.out.String())
		default:
		}
		if s.c == nil {
			b, err := os.ReadFile(filepath.Join(p.dataDir, "token"))
			if err != nil {
				return false, err.Error()
			}
			s.token = strings.TrimSpace(string(b))
			ca, err := serverCA(p.dataDir)
			if err != nil {
				return false, err.Error()
			}
			c, err := client.New(client.Config{Server: s.apiURL, Token: s.token, CAData: ca})
			if err != nil {
				return false, err.Error()
			}
			s.c = c
		}
		_, _, err := client.List[*api.Namespace](ctx, s.c, "", api.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// waitNodeReady waits until a's Node is Ready with a heartbeat after since.
func (s *soakCluster) waitNodeReady(ctx context.Context, a *soakProc, since time.Time) error {
	return pollUntil(ctx, 60*time.Second, func() (bool, string) {
		proc, _ := a.current()
		select {
		case <-proc.done:
			return false, fmt.Sprintf("agent %s exited: %v\n%s", a.name, proc.err, proc.out.String())
		default:
		}
		n, err := client.Get[*api.Node](ctx, s.c, "", a.name)
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == api.NodeReady {
				return cond.Status == api.ConditionTrue && cond.LastHeartbeatTime.After(since),
					fmt.Sprintf("node %s Ready=%s, heartbeat %v (since %v)", a.name, cond.Status, cond.LastHeartbeatTime.Time, since)
			}
		}
		return false, "node " + a.name + " has no Ready condition"
	})
}

// Churn. Each worker paces itself with a ticker; an error (a process
// killed under the request) is not an acknowledgement.

func soakContainer(gpus int64) api.Container {
	c := api.Container{Name: "main", Image: "busybox:1.36", ImagePullPolicy: "IfNotPresent",
		// PID 1 ignores SIGTERM unless it traps it.
		Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"}}
	if gpus > 0 {
		c.Resources.Limits = api.ResourceList{api.ResourceNvidiaGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return c
}

func soakDeployment(name string, replicas int32, gpus int64) *api.Deployment {
	d := deployment(soakNS, name, replicas, soakContainer(gpus))
	grace := int64(10)
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = &grace
	return d
}

func opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 10*time.Second)
}

// scaleWeb scales Deployment web to 0..5 replicas every 3 s.
func (s *soakCluster) scaleWeb(ctx context.Context, r *rand.Rand, l *soakLedger) {
	kind := api.MustKindOf(&api.Deployment{})
	every(ctx, 3*time.Second, func() {
		octx, cancel := opCtx(ctx)
		defer cancel()
		sc, err := s.c.GetScale(octx, kind, soakNS, "web")
		if err != nil {
			return
		}
		sc.Spec.Replicas = int32(r.IntN(6))
		if got, err := s.c.UpdateScale(octx, kind, soakNS, "web", sc); err == nil {
			l.ackMeta(kind, got.ObjectMeta)
		}
	})
}

// rollDeployments changes the template of roll or gpu-dep every 5 s: a
// rolling update each time.
func (s *soakCluster) rollDeployments(ctx context.Context, r *rand.Rand, l *soakLedger) {
	round := 0
	every(ctx, 5*time.Second, func() {
		round++
		name := []string{"roll", "gpu-dep"}[r.IntN(2)]
		octx, cancel := opCtx(ctx)
		defer cancel()
		d, err := client.Get[*api.Deployment](octx, s.c, soakNS, name)
		if err != nil {
			return
		}
		d.Spec.Template.Spec.Containers[0].Env = []api.EnvVar{{Name: "ROUND", Value: strconv.Itoa(round)}}
		if got, err := client.Update(octx, s.c, d); err == nil {
			l.ack(got)
		}
	})
}

// gpuPods creates a pod of 1 or 2 GPUs every 1.5 s and deletes the oldest
// beyond 5.
func (s *soakCluster) gpuPods(ctx context.Context, r *rand.Rand, l *soakLedger) {
	kind := api.MustKindOf(&api.Pod{})
	var live []string
	i := 0
	every(ctx, 1500*time.Millisecond, func() {
		octx, cancel := opCtx(ctx)
		defer cancel()
		name := fmt.Sprintf("gpu-%04d", i)
		i++
		p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: soakNS, Labels: map[string]string{"app": "gpu-pod"}}}
		grace := int64(10)
		p.Spec.TerminationGracePeriodSeconds = &grace
		p.Spec.Containers = []api.Container{soakContainer(1 + r.Int64N(2))}
		if got, err := s.c.Create(octx, p); err == nil {
			l.ack(got)
			live = append(live, name)
		}
		if len(live) > 5 {
			l.deleteSent(kind, soakNS, live[0])
			err := s.c.Delete(octx, kind, soakNS, live[0], api.DeleteOptions{})
			if err == nil || api.IsNotFound(err) {
				l.ackDelete(kind, soakNS, live[0])
				live = live[1:]
			}
		}
	})
}

// configMaps creates, updates and deletes ConfigMaps four times a second.
func (s *soakCluster) configMaps(ctx context.Context, r *rand.Rand, l *soakLedger) {
	kind := api.MustKindOf(&api.ConfigMap{})
	var live []string
	i := 0
	every(ctx, 250*time.Millisecond, func() {
		octx, cancel := opCtx(ctx)
		defer cancel()
		switch op := r.IntN(10); {
		case op < 3 || len(live) == 0:
			name := fmt.Sprintf("cm-%05d", i)
			i++
			cm := &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: name, Namespace: soakNS}, Data: map[string]string{"v": "0"}}
			if got, err := s.c.Create(octx, cm); err == nil {
				l.ack(got)
				live = append(live, name)
			}
		case op < 9 || len(live) < 10:
			name := live[r.IntN(len(live))]
			cm, err := client.Get[*api.ConfigMap](octx, s.c, soakNS, name)
			if err != nil {
				return
			}
			cm.Data = map[string]string{"v": strconv.Itoa(r.IntN(1 << 20))}
			if got, err := client.Update(octx, s.c, cm); err == nil {
				l.ack(got)
			}
		default:
			j := r.IntN(len(live))
			l.deleteSent(kind, soakNS, live[j])
			err := s.c.Delete(octx, kind, soakNS, live[j], api.DeleteOptions{})
			if err == nil || api.IsNotFound(err) {
				l.ackDelete(kind, soakNS, live[j])
				live = append(live[:j], live[j+1:]...)
			}
		}
	})
}

// Faults.

// containerdProc is the private containerd of hack/containerd-start.sh
// that the soak kills and starts again with the same paths.
type containerdProc struct {
	dataDir, runDir string
}

var tomlRoot = regexp.MustCompile(`(?m)^root = "(.*)/containerd"$`)

// privateContainerd finds the paths hack/containerd-start.sh started the
// containerd at addr with (its config next to the socket).
func privateContainerd(t testing.TB, addr string) *containerdProc {
	t.Helper()
	run := filepath.Dir(addr)
	b, err := os.ReadFile(filepath.Join(run, "containerd.toml"))
	if err != nil {
		t.Fatalf("the soak kills containerd and starts it again: it needs one started by hack/containerd-start.sh (%v)", err)
	}
	m := tomlRoot.FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no root = \".../containerd\" line", filepath.Join(run, "containerd.toml"))
	}
	return &containerdProc{dataDir: string(m[1]), runDir: run}
}

func (p *containerdProc) kill9(ctx context.Context) error {
	b, err := os.ReadFile(filepath.Join(p.runDir, "containerd.pid"))
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("containerd.pid: %w", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 containerd %d: %w", pid, err)
	}
	return pollUntil(ctx, 10*time.Second, func() (bool, string) {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true, ""
		}
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		return len(f) > 0 && f[0] == "Z", fmt.Sprintf("containerd %d still running", pid)
	})
}

func (p *containerdProc) start(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, "../hack/containerd-start.sh")
	cmd.Env = append(os.Environ(), "SKIFF_CI_DIR="+p.dataDir, "SKIFF_CI_RUN="+p.runDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("containerd-start.sh: %w\n%s", err, out)
	}
	return nil
}

// injectFaults kills -9 the server, an agent or containerd every 5–12 s
// (short) or 10–40 s (long), waits up to 2 s, starts it again and waits
// until it is back.
func (s *soakCluster) injectFaults(ctx context.Context, r *rand.Rand, l *soakLedger, ctrd *containerdProc, mode string) {
	lo, spread := 5*time.Second, 7*time.Second
	if mode == "long" {
		lo, spread = 10*time.Second, 30*time.Second
	}
	// Faults come in rounds of one of each kind, in a random order, so
	// that even the short soak kills each at least once.
	var deck []int
	for {
		if len(deck) == 0 {
			deck = r.Perm(3)
		}
		kind := deck[0]
		deck = deck[1:]
		select {
		case <-ctx.Done():
			return
		case <-time.After(lo + time.Duration(r.Int64N(int64(spread)))): // the moment of the next fault, at random
		}
		// A fault and its repair run to the end even when the churn
		// phase ends meanwhile: the cluster is never left broken.
		fctx := context.Background()
		down := time.Duration(r.Int64N(int64(2 * time.Second)))
		var what string
		var err error
		switch kind {
		case 0:
			what = "server"
			if err = s.kill9(s.server); err == nil {
				time.Sleep(down) // the process stays dead this long
				s.start(s.server)
				err = s.waitAPI(fctx, s.server)
			}
		case 1:
			a := s.agents[r.IntN(len(s.agents))]
			what = "agent"
			if err = s.kill9(a); err == nil {
				time.Sleep(down) // the process stays dead this long
				restarted := time.Now()
				s.start(a)
				err = s.waitNodeReady(fctx, a, restarted)
			}
		case 2:
			what = "containerd"
			if err = ctrd.kill9(fctx); err == nil {
				time.Sleep(down) // the process stays dead this long
				err = ctrd.start(fctx)
			}
		}
		l.fault(what, err)
		if err != nil {
			return // the cluster is broken: the violation says why; no more faults
		}
	}
}
