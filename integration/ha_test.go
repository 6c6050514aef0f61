package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/etcd/etcdtest"
	"skiff.dev/skiff/internal/testwait"
)

// Several servers on embedded etcd, as separate processes of the built
// binary (so kill -9 is real), on loopback ports with separate data dirs,
// and two agents on the simulated runtime with simulated DGX A100s.

// haServer is one `skiff server` process and how to start it again.
type haServer struct {
	name    string
	apiURL  string
	dataDir string
	args    []string
	proc    *skiffProcess
}

type haCluster struct {
	bin, home string
	token     string
	ca        []byte // the cluster CA, PEM
	servers   []*haServer
	c         *client.Client // lists every server: fails over
}

// leaseTTL of the leader election in these tests: short, for a fast
// failover; still above etcd's shortest lease.
const haLeaseTTL = "3s"

func startHACluster(t testing.TB, servers, agents int) *haCluster {
	t.Helper()
	return startHAClusterOn(t, servers, agents, "")
}

// startHAClusterOn starts servers on embedded etcd (external "") or on
// the external etcd at the client URL external (--etcd-endpoints: no
// member of their own; the first server creates the token, the others
// are given it).
func startHAClusterOn(t testing.TB, servers, agents int, external string) *haCluster {
	t.Helper()
	h := &haCluster{bin: skiffBinary(t), home: t.TempDir()}
	root := t.TempDir()
	for i := range servers {
		s := &haServer{name: fmt.Sprintf("s%d", i), dataDir: filepath.Join(root, fmt.Sprintf("server-%d", i))}
		listen := freeLoopbackAddr(t)
		s.apiURL = "https://" + listen
		s.args = []string{"server", "--no-agent", "--node-name", s.name, "--data-dir", s.dataDir, "--listen", listen,
			"--gossip-port", strconv.Itoa(freePort(t)), "--advertise-address", "127.0.0.1",
			"--leader-lease-ttl", haLeaseTTL}
		switch {
		case external != "":
			s.args = append(s.args, "--etcd-endpoints", external)
			if i > 0 {
				// One cluster: the first server's CA, join token and
				// admin token (an external etcd has no join to hand them).
				copyClusterSecrets(t, h.servers[0].dataDir, s.dataDir)
			}
		case i == 0:
			s.args = append(s.args, "--cluster-init")
		default:
			s.args = append(append(s.args, "--join-server", h.servers[0].apiURL), joinArgs(t, h.servers[0].dataDir, "token")...)
		}
		if external == "" {
			s.args = append(s.args, "--etcd-peer-listen", "https://"+freeLoopbackAddr(t), "--etcd-client-listen", "https://"+freeLoopbackAddr(t))
		}
		s.proc = startProc(t, h.bin, h.home, s.args...)
		h.servers = append(h.servers, s)
		h.waitAPI(t, s)
		if i == 0 {
			tok, err := os.ReadFile(filepath.Join(s.dataDir, "token"))
			if err != nil {
				t.Fatal(err)
			}
			h.token = string(tok[:len(tok)-1])
			if h.ca, err = serverCA(s.dataDir); err != nil {
				t.Fatal(err)
			}
		}
	}
	var urls []string
	for _, s := range h.servers {
		urls = append(urls, s.apiURL)
	}
	c, err := client.New(client.Config{Server: urls[0], Servers: urls[1:], Token: h.token, CAData: h.ca})
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	gossip := h.servers[0].args[slices.Index(h.servers[0].args, "--gossip-port")+1]
	for i := range agents {
		name := fmt.Sprintf("gpu-%d", i)
		args := append([]string{"agent", "--join", "127.0.0.1:" + gossip}, joinArgs(t, h.servers[0].dataDir, "join-token")...)
		startProc(t, h.bin, h.home, append(args, "--node-name", name,
			"--runtime", "fake", "--gpus", "sim:dgxa100", "--network", "none", "--data-dir", filepath.Join(root, name),
			"--gossip-port", strconv.Itoa(freePort(t)), "--advertise-address", "127.0.0.1", "--listen-agent", freeLoopbackAddr(t))...)
	}
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		nodes, _, err := client.List[*api.Node](context.Background(), h.c, "", api.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, n := range nodes {
			for _, cond := range n.Status.Conditions {
				if cond.Type == api.NodeReady && cond.Status == api.ConditionTrue {
					ready++
				}
			}
		}
		return ready == agents, fmt.Sprintf("%d of %d nodes Ready", ready, agents)
	})
	return h
}

// waitAPI waits until s answers an authenticated list (its store is up).
func (h *haCluster) waitAPI(t testing.TB, s *haServer) {
	t.Helper()
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		select {
		case <-s.proc.done:
			t.Fatalf("server %s exited: %v\n%s", s.name, s.proc.err, s.proc.out.String())
		default:
		}
		tok := h.token
		if tok == "" {
			b, err := os.ReadFile(filepath.Join(s.dataDir, "token"))
			if err != nil {
				return false, err.Error()
			}
			tok = string(b[:len(b)-1])
		}
		ca, err := serverCA(s.dataDir)
		if err != nil {
			return false, err.Error()
		}
		c, err := client.New(client.Config{Server: s.apiURL, Token: tok, CAData: ca})
		if err != nil {
			return false, err.Error()
		}
		_, _, err = client.List[*api.Namespace](context.Background(), c, "", api.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// leader asks server s who leads.
func (h *haCluster) leader(ctx context.Context, s *haServer) (api.LeaderStatus, error) {
	c, err := client.New(client.Config{Server: s.apiURL, Token: h.token, CAData: h.ca})
	if err != nil {
		return api.LeaderStatus{}, err
	}
	resp, err := c.Do(ctx, "GET", api.LeaderPath, nil)
	if err != nil {
		return api.LeaderStatus{}, err
	}
	defer resp.Body.Close()
	var ls api.LeaderStatus
	err = json.NewDecoder(resp.Body).Decode(&ls)
	return ls, err
}

// waitLeader waits until every server in among agrees that one of them
// leads, and returns it.
func (h *haCluster) waitLeader(t testing.TB, among []*haServer, within time.Duration) *haServer {
	t.Helper()
	var lead *haServer
	testwait.Until(t, within, func() (bool, string) {
		lead = nil
		for _, s := range among {
			ls, err := h.leader(context.Background(), s)
			if err != nil {
				return false, fmt.Sprintf("%s: %v", s.name, err)
			}
			if ls.Leader.APIServer == "" {
				return false, s.name + ": nobody leads"
			}
			i := slices.IndexFunc(among, func(x *haServer) bool { return x.apiURL == ls.Leader.APIServer })
			if i < 0 {
				return false, fmt.Sprintf("%s: leader %s is not a live server", s.name, ls.Leader.APIServer)
			}
			if lead != nil && lead != among[i] {
				return false, "servers disagree on the leader"
			}
			lead = among[i]
		}
		return true, ""
	})
	return lead
}

func (h *haCluster) kill9(t testing.TB, s *haServer) {
	t.Helper()
	if err := s.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.proc.done
}

func churnPod(ns, name string) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "churn"}}}
	grace := int64(0)
	p.Spec.TerminationGracePeriodSeconds = &grace
	c := api.Container{Name: "main", Image: "cuda:12", Command: []string{"sleep", "3600"}}
	c.Resources.Limits = api.ResourceList{api.ResourceNvidiaGPU: *resource.NewQuantity(1, resource.DecimalSI)}
	p.Spec.Containers = []api.Container{c}
	return p
}

// churn creates GPU pods and deletes the oldest, and scales a Deployment,
// until ctx ends, recording what the API acknowledged. An error (a
// server dying under a request) is not an acknowledgement: that write may
// or may not have landed.
type churn struct {
	mu      sync.Mutex
	created []string // acknowledged creates, oldest first
	deleted map[string]bool
	// unsure: deletes sent whose answer never came (the churn stopped or
	// a server died mid-request): the pod may or may not be gone.
	unsure      map[string]bool
	replicas    int32 // last acknowledged scale
	scaleUnsure bool  // a later scale was sent and its answer lost
	errors      int
}

func (ch *churn) run(ctx context.Context, c *client.Client, ns, deploy string) {
	tick := time.NewTicker(150 * time.Millisecond) // pacing the load, not waiting for a condition
	defer tick.Stop()
	podKind, depKind := api.MustKindOf(&api.Pod{}), api.MustKindOf(&api.Deployment{})
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		name := fmt.Sprintf("gpu-%03d", i)
		if _, err := c.Create(ctx, churnPod(ns, name)); err == nil {
			ch.mu.Lock()
			ch.created = append(ch.created, name)
			ch.mu.Unlock()
		} else {
			ch.mu.Lock()
			ch.errors++
			ch.mu.Unlock()
		}
		// Keep about 6 GPU pods: delete the oldest live one.
		ch.mu.Lock()
		var oldest string
		live := 0
		for _, n := range ch.created {
			if !ch.deleted[n] {
				if oldest == "" {
					oldest = n
				}
				live++
			}
		}
		ch.mu.Unlock()
		if live > 6 {
			err := c.Delete(ctx, podKind, ns, oldest, api.DeleteOptions{})
			ch.mu.Lock()
			if err == nil || api.IsNotFound(err) {
				ch.deleted[oldest] = true
			} else {
				ch.unsure[oldest] = true
			}
			ch.mu.Unlock()
		}
		if i%5 == 0 {
			want := int32(2 + (i/5)%5) // 2..6
			s, err := c.GetScale(ctx, depKind, ns, deploy)
			if err == nil {
				s.Spec.Replicas = want
				_, err = c.UpdateScale(ctx, depKind, ns, deploy, s)
				ch.mu.Lock()
				if err == nil {
					ch.replicas, ch.scaleUnsure = want, false
				} else {
					ch.scaleUnsure = true
				}
				ch.mu.Unlock()
			}
		}
	}
}

// checkGPUs: every running GPU pod holds a GPU of its node that no other
// pod holds, as the nodes' allocation annotations say.
func checkGPUs(t testing.TB, c client.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		nodes, _, err := client.List[*api.Node](ctx, c, "", api.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		holder := map[string]string{} // GPU UUID → pod
		held := map[string]int{}      // pod → GPUs
		for _, n := range nodes {
			var alloc map[string]string
			if raw := n.Annotations[gputopology.AnnotationAllocations]; raw != "" {
				if err := json.Unmarshal([]byte(raw), &alloc); err != nil {
					return false, fmt.Sprintf("node %s: %v", n.Name, err)
				}
			}
			for uuid, pod := range alloc {
				if prev, ok := holder[uuid]; ok && prev != pod {
					t.Fatalf("GPU %s held by %s and %s", uuid, prev, pod)
				}
				holder[uuid] = pod
				held[pod]++
			}
		}
		pods := listPods(t, c, ns, "app=churn")
		for _, p := range pods {
			if p.Status.Phase == api.PodRunning && held[ns+"/"+p.Name] != 1 {
				return false, fmt.Sprintf("running pod %s holds %d GPUs per its node's annotation", p.Name, held[ns+"/"+p.Name])
			}
		}
		return true, ""
	})
}

// failover kills the leader while ch churns and returns the time from
// the kill to the first pod bound after it, and the killed server.
func (h *haCluster) failover(t testing.TB, ns string, round int) (time.Duration, *haServer) {
	t.Helper()
	lead := h.waitLeader(t, h.servers, 30*time.Second)
	var rest []*haServer
	for _, s := range h.servers {
		if s != lead {
			rest = append(rest, s)
		}
	}
	probe := fmt.Sprintf("probe-%d", round)
	h.kill9(t, lead)
	killed := time.Now()
	ctx := context.Background()
	// A pod created after the kill: only a new leader can bind it.
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		_, err := h.c.Create(ctx, churnPod(ns, probe))
		return err == nil || api.IsAlreadyExists(err), fmt.Sprint(err)
	})
	var bound time.Duration
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		p, err := client.Get[*api.Pod](ctx, h.c, ns, probe)
		if err != nil {
			return false, err.Error()
		}
		if p.Spec.NodeName == "" {
			return false, "probe pod not bound yet"
		}
		bound = time.Since(killed)
		return true, ""
	})
	newLead := h.waitLeader(t, rest, 10*time.Second)
	t.Logf("round %d: killed leader %s; %s leads; probe pod bound %v after the kill", round, lead.name, newLead.name, bound.Round(time.Millisecond))
	return bound, lead
}

// restart starts a killed server again with its data dir and waits for it.
func (h *haCluster) restart(t testing.TB, s *haServer) {
	t.Helper()
	s.proc = startProc(t, h.bin, h.home, s.args...)
	h.waitAPI(t, s)
}

func TestHAKillLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers and two agents")
	}
	h := startHACluster(t, 3, 2)
	ctx := context.Background()
	const ns = "ha"
	if _, err := h.c.Create(ctx, namespace(ns)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.Create(ctx, deployment(ns, "web", 3, api.Container{Name: "web", Image: "nginx:1.27"})); err != nil {
		t.Fatal(err)
	}
	ch := &churn{deleted: map[string]bool{}, unsure: map[string]bool{}, replicas: 3}
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { ch.run(cctx, h.c, ns, "web") })
	// Some churn before the kill.
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		ch.mu.Lock()
		defer ch.mu.Unlock()
		return len(ch.created) >= 5, fmt.Sprintf("%d GPU pods created", len(ch.created))
	})

	took, killed := h.failover(t, ns, 0)
	if took > 25*time.Second {
		t.Errorf("failover took %v: want a new leader binding pods within 25s", took)
	}
	// Churn goes on under the new leader.
	ch.mu.Lock()
	n0 := len(ch.created)
	ch.mu.Unlock()
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		ch.mu.Lock()
		defer ch.mu.Unlock()
		return len(ch.created) >= n0+5, fmt.Sprintf("%d GPU pods created, %d before", len(ch.created), n0)
	})
	h.restart(t, killed)
	stop()
	wg.Wait()

	// Every acknowledged write is there (and every acknowledged delete
	// gone), pods run, none twice.
	ch.mu.Lock()
	defer ch.mu.Unlock()
	t.Logf("churn: %d GPU pods created, %d deleted, %d errors during failover; replicas %d", len(ch.created), len(ch.deleted), ch.errors, ch.replicas)
	testwait.Until(t, 40*time.Second, func() (bool, string) {
		pods := listPods(t, h.c, ns, "app=churn")
		have := map[string]*api.Pod{}
		for _, p := range pods {
			have[p.Name] = p
		}
		for _, n := range ch.created {
			p, ok := have[n]
			switch {
			case ch.deleted[n] && ok && p.DeletionTimestamp == nil:
				t.Fatalf("pod %s: deleted (acknowledged) but still there", n)
			case !ch.deleted[n] && ch.unsure[n] && (!ok || p.DeletionTimestamp != nil):
				// Its delete was sent, the answer lost: gone is right too.
			case !ch.deleted[n] && !ok:
				t.Fatalf("pod %s: created (acknowledged) but lost", n)
			case !ch.deleted[n] && p.Status.Phase != api.PodRunning:
				return false, fmt.Sprintf("pod %s is %s", n, p.Status.Phase)
			}
		}
		want := ch.replicas
		if ch.scaleUnsure { // the last scale's answer was lost: the server's word
			d, err := client.Get[*api.Deployment](ctx, h.c, ns, "web")
			if err != nil {
				return false, err.Error()
			}
			want = *d.Spec.Replicas
		}
		web := listPods(t, h.c, ns, "app=web")
		live := slices.DeleteFunc(web, func(p *api.Pod) bool { return p.DeletionTimestamp != nil })
		if int32(len(live)) != want || int32(runningPods(live)) != want {
			return false, fmt.Sprintf("deployment: want %d running pods, have %s", want, podSummary(live))
		}
		return true, ""
	})
	checkGPUs(t, h.c, ns)

	// The killed server is back: a member again, answering, agreeing on
	// the leader, and serving the objects written while it was down.
	h.waitLeader(t, h.servers, 20*time.Second)
	c1, err := client.New(client.Config{Server: killed.apiURL, Token: h.token, CAData: h.ca})
	if err != nil {
		t.Fatal(err)
	}
	last := ch.created[len(ch.created)-1]
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		_, err := client.Get[*api.Pod](ctx, c1, ns, last)
		return err == nil || ch.deleted[last], fmt.Sprintf("restarted %s: %v", killed.name, err)
	})
}

// Two servers on an external etcd (--etcd-endpoints): neither runs a
// member, one leads, and a pod created through the other is bound (by
// the leader's scheduler) and read the same through both.
func TestHAExternalEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd member, two servers and an agent")
	}
	ext := etcdtest.Start(t, "external")
	h := startHAClusterOn(t, 2, 1, ext.Client().Endpoints()[0])
	ctx := context.Background()
	lead := h.waitLeader(t, h.servers, 30*time.Second)
	other := h.servers[0]
	if other == lead {
		other = h.servers[1]
	}
	for _, s := range h.servers {
		if _, err := os.Stat(filepath.Join(s.dataDir, "etcd")); err == nil {
			t.Errorf("server %s has an etcd data dir: it runs a member of its own", s.name)
		}
	}
	members, err := ext.Client().MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(members.Members) != 1 {
		t.Errorf("the external etcd has %d members, want its own 1", len(members.Members))
	}
	through := func(s *haServer) *client.Client {
		c, err := client.New(client.Config{Server: s.apiURL, Token: h.token, CAData: h.ca})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cOther, cLead := through(other), through(lead)
	const ns = "external"
	if _, err := cOther.Create(ctx, namespace(ns)); err != nil {
		t.Fatal(err)
	}
	if _, err := cOther.Create(ctx, churnPod(ns, "gpu")); err != nil {
		t.Fatal(err)
	}
	var bound *api.Pod
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		p, err := client.Get[*api.Pod](ctx, cOther, ns, "gpu")
		if err != nil {
			return false, err.Error()
		}
		bound = p
		return p.Spec.NodeName != "" && p.Status.Phase == api.PodRunning, fmt.Sprintf("pod on %q, %s", p.Spec.NodeName, p.Status.Phase)
	})
	p, err := client.Get[*api.Pod](ctx, cLead, ns, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if p.UID != bound.UID || p.Spec.NodeName != bound.Spec.NodeName {
		t.Errorf("through the leader %s: pod uid %s on %q; through %s: uid %s on %q", lead.name, p.UID, p.Spec.NodeName, other.name, bound.UID, bound.Spec.NodeName)
	}
	t.Logf("%s leads; the pod created through %s runs on %s", lead.name, other.name, bound.Spec.NodeName)
}

// Failover time over several rounds (SKIFF_BENCH=1): the leader is
// killed, the time to the first pod bound by the new leader measured,
// the killed server restarted; median and max printed.
func TestBenchHAFailover(t *testing.T) {
	requireBench(t)
	h := startHACluster(t, 3, 2)
	ctx := context.Background()
	const ns = "ha-bench"
	if _, err := h.c.Create(ctx, namespace(ns)); err != nil {
		t.Fatal(err)
	}
	rounds := 5
	if v, err := strconv.Atoi(os.Getenv("SKIFF_HA_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	var times []time.Duration
	for r := range rounds {
		took, killed := h.failover(t, ns, r)
		times = append(times, took)
		h.restart(t, killed)
		h.waitLeader(t, h.servers, 20*time.Second)
	}
	slices.Sort(times)
	fmt.Printf("| failover (leader kill -9 → first pod bound by the new leader), lease TTL %s | n | median ms | max ms |\n|---|---|---|---|\n", haLeaseTTL)
	fmt.Printf("| 3 servers, embedded etcd, 2 agents | %d | %s | %s |\n", len(times), ms(percentile(times, .5)), ms(times[len(times)-1]))
}
