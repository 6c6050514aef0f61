package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
	rtfake "skiff.dev/skiff/runtime/fake"
)

// The foundation issue's new-user flow, through the HTTP client against an
// in-process control plane and one agent on the simulated runtime: apply a
// Namespace, a ConfigMap and a 3-replica Deployment; scale to 5 then 2;
// change the image; look at the Events; delete the namespace.
func TestNewUserFlow(t *testing.T) {
	cp, c := startControlPlane(t, nil)
	ncfg := testNodeConfig(rtfake.New(rtfake.DefaultConfig()), "n1", t.TempDir(), nil)
	ncfg.RuntimeSimulated = true
	startNode(t, cp, ncfg)
	ctx := context.Background()
	const ns = "demo"

	for _, obj := range []api.Object{
		namespace(ns),
		&api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: "web-config", Namespace: ns}, Data: map[string]string{"greeting": "hello"}},
		deployment(ns, "web", 3, api.Container{Name: "web", Image: "nginx:1.27"}),
	} {
		if _, err := c.Create(ctx, obj); err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
	}
	waitDeploy := func(want int32) {
		t.Helper()
		testwait.Until(t, 30*time.Second, func() (bool, string) {
			d, err := client.Get[*api.Deployment](ctx, c, ns, "web")
			if err != nil {
				return false, err.Error()
			}
			ps := listPods(t, c, ns, "app=web")
			live := 0
			for _, p := range ps {
				if p.DeletionTimestamp == nil {
					live++
				}
			}
			st := d.Status
			ok := st.ReadyReplicas == want && st.Replicas == want && st.UpdatedReplicas == want && runningPods(ps) == int(want) && live == int(want)
			return ok, fmt.Sprintf("deployment status %+v; pods %s", st, podSummary(ps))
		})
	}
	waitDeploy(3)

	for _, n := range []int32{5, 2} {
		sc, err := c.GetScale(ctx, api.MustKindOf(&api.Deployment{}), ns, "web")
		if err != nil {
			t.Fatal(err)
		}
		sc.Spec.Replicas = n
		if _, err := c.UpdateScale(ctx, api.MustKindOf(&api.Deployment{}), ns, "web", sc); err != nil {
			t.Fatalf("scale to %d: %v", n, err)
		}
		waitDeploy(n)
	}

	// A new image rolls out a new ReplicaSet; the old one goes to 0.
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		d, err := client.Get[*api.Deployment](ctx, c, ns, "web")
		if err != nil {
			return false, err.Error()
		}
		d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
		if _, err := client.Update(ctx, c, d); err != nil {
			return false, "update image: " + err.Error() // a conflict with the controller: read again
		}
		return true, ""
	})
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		rss, _, err := client.List[*api.ReplicaSet](ctx, c, ns, api.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error()
		}
		d, err := client.Get[*api.Deployment](ctx, c, ns, "web")
		if err != nil {
			return false, err.Error()
		}
		var oldOK, newOK bool
		var desc []string
		for _, rs := range rss {
			img := rs.Spec.Template.Spec.Containers[0].Image
			rev := rs.Annotations[api.AnnotationRevision]
			desc = append(desc, fmt.Sprintf("%s image=%s rev=%s spec=%d ready=%d", rs.Name, img, rev, *rs.Spec.Replicas, rs.Status.ReadyReplicas))
			switch img {
			case "nginx:1.27":
				oldOK = *rs.Spec.Replicas == 0 && rs.Status.Replicas == 0 && rev == "1"
			case "nginx:1.28":
				newOK = *rs.Spec.Replicas == 2 && rs.Status.ReadyReplicas == 2 && rev == "2"
			}
		}
		ps := listPods(t, c, ns, "app=web")
		podsOK := len(ps) == 2 && runningPods(ps) == 2
		for _, p := range ps {
			podsOK = podsOK && p.Spec.Containers[0].Image == "nginx:1.28"
		}
		ok := len(rss) == 2 && oldOK && newOK && podsOK && d.Annotations[api.AnnotationRevision] == "2"
		return ok, fmt.Sprintf("deployment revision %q; replicasets %v; pods %s", d.Annotations[api.AnnotationRevision], desc, podSummary(ps))
	})

	testwait.Until(t, 10*time.Second, func() (bool, string) {
		evs := eventsFor(t, c, ns, "web")
		var reasons []string
		for _, e := range evs {
			reasons = append(reasons, e.Reason)
		}
		return len(evs) > 0 && strings.Contains(strings.Join(reasons, ","), "ScalingReplicaSet"), fmt.Sprintf("events of deployment web: %v", reasons)
	})

	if err := c.Delete(ctx, api.MustKindOf(&api.Namespace{}), "", ns, api.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		var left []string
		for _, obj := range []api.Object{&api.Deployment{}, &api.ReplicaSet{}, &api.Pod{}, &api.ConfigMap{}} {
			objs, _, err := c.List(ctx, api.MustKindOf(obj), ns, api.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, o := range objs {
				left = append(left, fmt.Sprintf("%T/%s", o, o.GetObjectMeta().Name))
			}
		}
		_, err := client.Get[*api.Namespace](ctx, c, "", ns)
		return len(left) == 0 && api.IsNotFound(err), fmt.Sprintf("left in %s: %v; namespace get: %v", ns, left, err)
	})
}

// skiffProcess is `skiff up` run as a subprocess.
type skiffProcess struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{} // closed when the process has exited
	err  error         // its exit, once done is closed
}

// lockedBuffer is an output sink the test reads while others write.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startSkiffUp runs `skiff up --runtime fake` with HOME in home, and waits
// until it says its node is Ready. It returns the process and the ms the
// process reported.
func startSkiffUp(t testing.TB, bin, home, dataDir, listen string) (*skiffProcess, string) {
	t.Helper()
	cmd := exec.Command(bin, "up", "--runtime", "fake", "--no-gossip", "--node-name", "n1", "--data-dir", dataDir, "--listen", listen)
	cmd.Env = append(os.Environ(), "HOME="+home)
	pr, pw := io.Pipe()
	out := &lockedBuffer{}
	cmd.Stdout = io.MultiWriter(out, pw)
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &skiffProcess{cmd: cmd, out: out, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); pw.Close(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		// A killed skiff leaves what skiff reset removes (here: the
		// plugin sockets' directory in /tmp, its data dir being deep).
		if out, err := exec.Command(bin, "reset", "--data-dir", dataDir).CombinedOutput(); err != nil {
			t.Errorf("skiff reset after the test: %v\n%s", err, out)
		}
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), " is Ready ") {
				ready <- sc.Text()
			}
		}
		close(ready)
	}()
	select {
	case line, ok := <-ready:
		if !ok {
			t.Fatalf("skiff up exited before its node was Ready:\n%s", out.String())
		}
		go io.Copy(io.Discard, pr) //nolint:errcheck // keep the pipe drained
		return p, line
	case <-time.After(30 * time.Second):
		t.Fatalf("skiff up: no Ready node within 30s:\n%s", out.String())
	}
	return nil, ""
}

// freeLoopbackAddr returns 127.0.0.1:PORT with a port no one listens on.
// The port is below the kernel's ephemeral range (ip_local_port_range,
// 32768 and up by default), never one the kernel chose for ":0": such a
// port can be taken again, as the source port of any process's outgoing
// connection, before the server a test starts on it binds it
// (TestHAKillLeader failed so once: "bind: address already in use").
// Ports are tried in turn from a random start, so that two test processes
// seldom try the same ones.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	low, high := 10000, ephemeralLow()
	if high-low < 1000 {
		ln, err := net.Listen("tcp", "127.0.0.1:0") // no room below: the kernel's choice
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	nextPortOnce.Do(func() { nextPort.Store(int64(rand.IntN(high - low))) })
	for range 2000 {
		port := low + int(nextPort.Add(1))%(high-low)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	t.Fatalf("no free loopback port in [%d, %d)", low, high)
	return ""
}

var (
	nextPort     atomic.Int64
	nextPortOnce sync.Once
)

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo <= 0 {
		return 32768
	}
	return lo
}

// Killing the server process with SIGKILL and starting it again loses no
// object, and a watcher (an informer over HTTP) resumes and sees new changes.
func TestServerKill9KeepsObjectsAndWatchersResume(t *testing.T) {
	bin := skiffBinary(t)
	home, dataDir, listen := t.TempDir(), filepath.Join(t.TempDir(), "data"), freeLoopbackAddr(t)
	p, _ := startSkiffUp(t, bin, home, dataDir, listen)

	cfg, err := client.LoadKubeconfig(filepath.Join(home, ".skiff", "kubeconfig"))
	if err != nil {
		t.Fatalf("the CLI config skiff up wrote to $HOME: %v", err)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kc := kubectltest.Use(t, cfg.Server, cfg.CAData, cfg.Token)
	checkSystemNamespaces(t, kc, "sharing-config")
	const ns = "durable"
	for _, obj := range []api.Object{
		namespace(ns),
		&api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: "cm-1", Namespace: ns}, Data: map[string]string{"k": "v"}},
		&api.Secret{ObjectMeta: api.ObjectMeta{Name: "s-1", Namespace: ns}, Data: map[string][]byte{"k": []byte("v")}},
		deployment(ns, "web", 2, api.Container{Name: "web", Image: "nginx:1.27"}),
	} {
		if _, err := c.Create(ctx, obj); err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
	}
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		ps := listPods(t, c, ns, "app=web")
		return runningPods(ps) == 2, podSummary(ps)
	})
	// A quota's count survives the kill: the two pods, a third charged.
	if _, err := c.Create(ctx, &api.ResourceQuota{ObjectMeta: api.ObjectMeta{Name: "pods", Namespace: ns},
		Spec: api.ResourceQuotaSpec{Hard: api.ResourceList{"pods": resource.MustParse("3")}}}); err != nil {
		t.Fatal(err)
	}
	quotaUsed := func(want string) {
		t.Helper()
		testwait.Until(t, 30*time.Second, func() (bool, string) {
			q, err := client.Get[*api.ResourceQuota](ctx, c, ns, "pods")
			if err != nil {
				return false, err.Error()
			}
			used, ok := q.Status.Used["pods"]
			return ok && used.String() == want, fmt.Sprintf("used %v", q.Status.Used)
		})
	}
	quotaUsed("2")
	if _, err := c.Create(ctx, benchPod(ns, "third")); err != nil {
		t.Fatalf("third pod under a quota of 3: %v", err)
	}
	quotaUsed("3")

	// What the store holds before the kill, by kind/name: uid and resourceVersion.
	kinds := []api.Object{&api.Namespace{}, &api.ConfigMap{}, &api.Secret{}, &api.Deployment{}, &api.ReplicaSet{}, &api.Pod{}}
	snapshot := func() map[string][2]string {
		t.Helper()
		m := map[string][2]string{}
		for _, k := range kinds {
			kind := api.MustKindOf(k)
			objs, _, err := c.List(ctx, kind, "", api.ListOptions{})
			if err != nil {
				t.Fatalf("list %s: %v", kind.Kind, err)
			}
			for _, o := range objs {
				om := o.GetObjectMeta()
				m[kind.Kind+"/"+om.Namespace+"/"+om.Name] = [2]string{om.UID, om.ResourceVersion}
			}
		}
		return m
	}
	before := snapshot()

	inf := client.NewInformer(c, api.MustKindOf(&api.ConfigMap{}), ns, api.ListOptions{}, nil)
	seen := make(chan string, 16)
	// kube-root-ca.crt is the serviceaccount controller's, in every
	// namespace (as in Kubernetes), and may come before or after cm-1.
	inf.AddHandler(client.Handler{OnAdd: func(o api.Object) {
		if n := o.GetObjectMeta().Name; n != api.RootCAConfigMap {
			seen <- n
		}
	}})
	ictx, icancel := context.WithCancel(ctx)
	defer icancel()
	go inf.Run(ictx)
	if !inf.WaitForSync(ictx) {
		t.Fatal("informer did not sync")
	}
	if got := <-seen; got != "cm-1" {
		t.Fatalf("informer's first add = %q; want cm-1", got)
	}

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if p.err == nil || !strings.Contains(p.err.Error(), "killed") {
		t.Fatalf("skiff up after SIGKILL: %v", p.err)
	}
	startSkiffUp(t, bin, home, dataDir, listen)
	checkSystemNamespaces(t, kc, "sharing-config-2")

	quotaUsed("3")
	if _, err := c.Create(ctx, benchPod(ns, "fourth")); err == nil || !strings.Contains(err.Error(), "exceeded quota: pods") {
		t.Errorf("a fourth pod after the restart: %v, want exceeded quota", err)
	}
	after := snapshot()
	for key, was := range before {
		now, ok := after[key]
		switch {
		case !ok:
			t.Errorf("%s lost in the kill", key)
		case now[0] != was[0]:
			t.Errorf("%s: uid %s after the restart, was %s", key, now[0], was[0])
		case !strings.HasPrefix(key, "Pod/") && !strings.HasPrefix(key, "Deployment/") && !strings.HasPrefix(key, "ReplicaSet/") && now[1] != was[1]:
			// Objects no controller touches keep their resourceVersion;
			// pods, ReplicaSets and Deployments get status updates from
			// the restarted agent and controllers.
			t.Errorf("%s: resourceVersion %s after the restart, was %s", key, now[1], was[1])
		}
	}

	if _, err := c.Create(ctx, &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: "cm-2", Namespace: ns}}); err != nil {
		t.Fatalf("create after restart: %v", err)
	}
	select {
	case got := <-seen:
		if got != "cm-2" {
			t.Errorf("the resumed watch saw %q first; want cm-2", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the watcher did not resume: cm-2 not seen within 30s")
	}
}

// checkSystemNamespaces checks with the real kubectl what every Kubernetes
// cluster has (issue 27): the four system namespaces, kube-public's
// cluster-info naming this server, kube-system usable (NVIDIA's device
// plugin and the GPU operator's ConfigMaps live there) and never deleted,
// in Kubernetes' words.
func checkSystemNamespaces(t *testing.T, kc *kubectltest.Cluster, configMap string) {
	t.Helper()
	got := kc.Must(t, "", "get", "namespaces", "-o", "name")
	for _, ns := range api.SystemNamespaces {
		if !strings.Contains(got, "namespace/"+ns+"\n") {
			t.Errorf("kubectl get namespaces: no %s in\n%s", ns, got)
		}
	}
	info := kc.Must(t, "", "get", "configmap", "cluster-info", "-n", "kube-public", "-o", "jsonpath={.data.kubeconfig}")
	if !strings.Contains(info, "server: "+kc.URL+"\n") || !strings.Contains(info, "certificate-authority-data: ") || strings.Contains(info, "token") {
		t.Errorf("kube-public/cluster-info kubeconfig: want server %s and the CA only, got\n%s", kc.URL, info)
	}
	r := kc.Run(t, "", "delete", "namespace", "kube-system")
	if want := `Error from server (Forbidden): namespaces "kube-system" is forbidden: this namespace may not be deleted`; r.Err == nil || strings.TrimSpace(r.Stderr) != want {
		t.Errorf("kubectl delete namespace kube-system: err %v, stderr %q, want %q", r.Err, r.Stderr, want)
	}
	kc.Must(t, "", "create", "configmap", configMap, "-n", "kube-system", "--from-literal=any=version: v1")
}
