package podworker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/runtime"
	rtfake "skiff.dev/skiff/runtime/fake"
)

// fixture is a worker over the fake API client and the fake runtime, with a
// clock the test moves by hand.
type fixture struct {
	t   *testing.T
	c   *fake.Client
	rt  *rtfake.Runtime
	w   *Worker
	now time.Time
}

func newFixture(t *testing.T, objs ...api.Object) *fixture {
	f := &fixture{t: t, now: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	f.c = fake.New(objs...)
	rc := rtfake.DefaultConfig()
	rc.Now = func() time.Time { return f.now }
	f.rt = rtfake.New(rc)
	f.w = New(Config{NodeName: "node-1", NodeIP: "10.0.0.1", Client: f.c, Runtime: f.rt,
		VolumeDir: t.TempDir(), BaseBackoff: 10 * time.Second, MaxBackoff: 40 * time.Second,
		Now: func() time.Time { return f.now }})
	return f
}

func (f *fixture) pod(name string) *api.Pod {
	f.t.Helper()
	o, err := f.c.Get(context.Background(), api.MustKindOf(&api.Pod{}), "default", name)
	if err != nil {
		f.t.Fatalf("get pod %s: %v", name, err)
	}
	return o.(*api.Pod)
}

func (f *fixture) sync(name string) time.Duration {
	f.t.Helper()
	d, err := f.w.Sync(context.Background(), f.pod(name))
	if err != nil {
		f.t.Fatalf("sync %s: %v", name, err)
	}
	return d
}

func (f *fixture) containers(name string) []runtime.ContainerStatus {
	f.t.Helper()
	cs, err := f.rt.ListContainers(context.Background(), map[string]string{runtime.LabelPodName: name})
	if err != nil {
		f.t.Fatal(err)
	}
	return cs
}

func (f *fixture) running(name string) runtime.ContainerStatus {
	f.t.Helper()
	for _, c := range f.containers(name) {
		if c.State == runtime.StateRunning {
			return c
		}
	}
	f.t.Fatalf("pod %s has no running container", name)
	return runtime.ContainerStatus{}
}

func newPod(name string, mutate ...func(*api.Pod)) *api.Pod {
	p := &api.Pod{}
	p.Name, p.Namespace, p.UID = name, "default", "uid-"+name
	p.Spec.NodeName = "node-1"
	p.Spec.RestartPolicy = "Always"
	p.Spec.Containers = []api.Container{{Name: "main", Image: "busybox:1.36", Command: []string{"sleep", "3600"}}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func TestPodRunsAndReportsRunning(t *testing.T) {
	f := newFixture(t, newPod("web"))
	f.sync("web")
	p := f.pod("web")
	if p.Status.Phase != api.PodRunning {
		t.Fatalf("phase = %q; want Running", p.Status.Phase)
	}
	cs := p.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Running == nil || !cs[0].Ready || cs[0].RestartCount != 0 {
		t.Fatalf("container status = %+v; want one ready running container", cs)
	}
	if p.Status.HostIP != "10.0.0.1" || p.Status.StartTime == nil {
		t.Fatalf("hostIP %q startTime %v", p.Status.HostIP, p.Status.StartTime)
	}
	// A second sync changes nothing: no new container, no new write.
	before := len(f.c.Actions())
	f.sync("web")
	if n := len(f.containers("web")); n != 1 {
		t.Fatalf("%d containers after a second sync; want 1", n)
	}
	for _, a := range f.c.Actions()[before:] {
		if a.IsWrite() && a.Kind == "pods" {
			t.Fatalf("second sync wrote %v", a)
		}
	}
}

// The spans of a container's start (pull, create, start) reach the pod's
// trace in one request, before the status that says Running.
func TestStartSpansPostedOnceBeforeRunning(t *testing.T) {
	f := newFixture(t, newPod("web"))
	f.sync("web")
	var order []string
	for _, a := range f.c.Actions() {
		switch {
		case a.Subresource == "trace":
			order = append(order, "trace")
		case a.Subresource == "status" && a.Object.(*api.Pod).Status.Phase == api.PodRunning:
			order = append(order, "Running")
		}
	}
	if strings.Join(order, ",") != "trace,Running" {
		t.Errorf("writes %v; want one trace post, then the Running status", order)
	}
	tr, err := f.c.GetTrace(context.Background(), "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, s := range tr.Spans {
		steps = append(steps, s.Component+"/"+s.Step)
	}
	if got := strings.Join(steps, ","); got != "agent/pull,agent/create,agent/start" {
		t.Errorf("trace steps %s; want agent/pull,agent/create,agent/start", got)
	}
}

func TestCrashRestartsWithBackoffAndCountsRestarts(t *testing.T) {
	f := newFixture(t, newPod("web"))
	f.sync("web")
	id := f.running("web").ID
	if err := f.rt.Exit(id, 1, ""); err != nil {
		t.Fatal(err)
	}
	// The first restart is immediate.
	f.sync("web")
	if p := f.pod("web"); p.Status.ContainerStatuses[0].RestartCount != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("after first crash: %+v; want running with 1 restart", p.Status.ContainerStatuses[0])
	}
	if last := f.pod("web").Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 1 || last.Reason != "Error" {
		t.Fatalf("lastState after a restart = %+v; want terminated with exit code 1, reason Error", last)
	}
	// The second crash backs off: CrashLoopBackOff until the delay passes.
	if err := f.rt.Exit(f.running("web").ID, 2, ""); err != nil {
		t.Fatal(err)
	}
	wait := f.sync("web")
	p := f.pod("web")
	cs := p.Status.ContainerStatuses[0]
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || wait <= 0 {
		t.Fatalf("after second crash: state %+v wait %v; want CrashLoopBackOff and a requeue", cs.State, wait)
	}
	if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 2 {
		t.Fatalf("lastState = %+v; want exit code 2", cs.LastTerminationState)
	}
	f.now = f.now.Add(wait)
	f.sync("web")
	if cs := f.pod("web").Status.ContainerStatuses[0]; cs.RestartCount != 2 || cs.State.Running == nil {
		t.Fatalf("after backoff: %+v; want running with 2 restarts", cs)
	}
	// Only the latest and the previous attempt are kept.
	if n := len(f.containers("web")); n != 2 {
		t.Fatalf("%d containers kept; want 2 (latest and previous)", n)
	}
}

// The restart backoff is the kubelet's: the first restart at once, then the
// base delay doubling to the cap (10s, 20s, 40s here), starting over once
// a container ran 10 minutes.
func TestCrashLoopBackOffDoublesToTheCapAndStartsOver(t *testing.T) {
	f := newFixture(t, newPod("web"))
	f.sync("web")
	for i, step := range []struct {
		ranFor time.Duration
		want   time.Duration
	}{
		{time.Second, 0},
		{time.Second, 10 * time.Second},
		{time.Second, 20 * time.Second},
		{time.Second, 40 * time.Second},
		{time.Second, 40 * time.Second},
		{11 * time.Minute, 10 * time.Second},
		{time.Second, 20 * time.Second},
	} {
		f.now = f.now.Add(step.ranFor)
		if err := f.rt.Exit(f.running("web").ID, 1, ""); err != nil {
			t.Fatal(err)
		}
		wait := f.sync("web")
		cs := f.pod("web").Status.ContainerStatuses[0]
		if step.want == 0 {
			if wait != 0 || cs.State.Running == nil {
				t.Fatalf("crash %d: wait %v, state %+v; want an immediate restart", i+1, wait, cs.State)
			}
			continue
		}
		if wait != step.want {
			t.Errorf("crash %d: wait %v, want %v", i+1, wait, step.want)
		}
		msg := "back-off " + step.want.String() + " restarting failed container=main pod=web_default(uid-web)"
		if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || cs.State.Waiting.Message != msg {
			t.Fatalf("crash %d: state %+v; want CrashLoopBackOff %q", i+1, cs.State, msg)
		}
		f.now = f.now.Add(wait)
		f.sync("web")
		if cs := f.pod("web").Status.ContainerStatuses[0]; cs.State.Running == nil {
			t.Fatalf("crash %d: after the backoff: %+v; want running", i+1, cs.State)
		}
	}
}

// Failed pulls back off as the kubelet's image pulls: the base delay
// doubling to the cap.
func TestImagePullBackOffDoublesToTheCap(t *testing.T) {
	f := newFixture(t, newPod("bad", func(p *api.Pod) { p.Spec.Containers[0].Image = "registry.invalid/does-not-exist:1" }))
	for i, want := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 40 * time.Second} {
		f.sync("bad") // pulls, fails
		if left := f.sync("bad"); left != want {
			t.Errorf("failed pull %d: next pull in %v, want %v", i+1, left, want)
		}
		f.now = f.now.Add(want - time.Millisecond)
		if left := f.sync("bad"); left != time.Millisecond {
			t.Fatalf("failed pull %d: %v before the backoff ends, want 1ms", i+1, left)
		}
		f.now = f.now.Add(time.Millisecond)
	}
}

func TestRestartPolicyNeverEndsInSucceededOrFailed(t *testing.T) {
	for _, tc := range []struct {
		code  int
		phase string
	}{{0, api.PodSucceeded}, {3, api.PodFailed}} {
		f := newFixture(t, newPod("job", func(p *api.Pod) { p.Spec.RestartPolicy = "Never" }))
		f.sync("job")
		if err := f.rt.Exit(f.running("job").ID, tc.code, ""); err != nil {
			t.Fatal(err)
		}
		f.sync("job")
		p := f.pod("job")
		if p.Status.Phase != tc.phase {
			t.Errorf("exit %d: phase %q; want %q", tc.code, p.Status.Phase, tc.phase)
		}
		if term := p.Status.ContainerStatuses[0].State.Terminated; term == nil || int(term.ExitCode) != tc.code {
			t.Errorf("exit %d: terminated state %+v", tc.code, term)
		}
		f.sync("job")
		if n := len(f.containers("job")); n != 1 {
			t.Errorf("exit %d: %d containers; a finished pod must not restart", tc.code, n)
		}
	}
}

func TestOOMKilledIsReported(t *testing.T) {
	f := newFixture(t, newPod("hog", func(p *api.Pod) {
		p.Spec.RestartPolicy = "Never"
		p.Spec.Containers[0].Resources.Limits = api.ResourceList{api.ResourceMemory: resource.MustParse("16Mi")}
	}))
	f.sync("hog")
	if err := f.rt.Exit(f.running("hog").ID, 137, runtime.ReasonOOMKilled); err != nil {
		t.Fatal(err)
	}
	f.sync("hog")
	term := f.pod("hog").Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.Reason != "OOMKilled" || term.ExitCode != 137 {
		t.Fatalf("terminated = %+v; want OOMKilled 137", term)
	}
}

func TestMissingImageErrImagePullThenBackOff(t *testing.T) {
	f := newFixture(t, newPod("bad", func(p *api.Pod) { p.Spec.Containers[0].Image = "registry.invalid/does-not-exist:1" }))
	wait := f.sync("bad")
	w := f.pod("bad").Status.ContainerStatuses[0].State.Waiting
	if w == nil || w.Reason != "ErrImagePull" {
		t.Fatalf("waiting = %+v; want ErrImagePull", w)
	}
	f.now = f.now.Add(wait)
	f.sync("bad")
	w = f.pod("bad").Status.ContainerStatuses[0].State.Waiting
	if w == nil || w.Reason != "ImagePullBackOff" {
		t.Fatalf("waiting = %+v; want ImagePullBackOff", w)
	}
	if f.pod("bad").Status.Phase != api.PodPending {
		t.Fatalf("phase %q; want Pending", f.pod("bad").Status.Phase)
	}
}

func TestConfigMapEnvAndSubPathVolume(t *testing.T) {
	cm := &api.ConfigMap{Data: map[string]string{"index.html": "<h1>hello</h1>", "greeting": "hi"}}
	cm.Name, cm.Namespace = "page", "default"
	pod := newPod("nginx", func(p *api.Pod) {
		p.Spec.Volumes = []api.Volume{{Name: "html", ConfigMap: &api.ConfigMapVolumeSource{Name: "page"}}}
		c := &p.Spec.Containers[0]
		c.VolumeMounts = []api.VolumeMount{{Name: "html", MountPath: "/usr/share/nginx/html/index.html", SubPath: "index.html"}}
		c.Env = []api.EnvVar{
			{Name: "GREETING", ValueFrom: &api.EnvVarSource{ConfigMapKeyRef: &api.KeySelector{Name: "page", Key: "greeting"}}},
			{Name: "POD", ValueFrom: &api.EnvVarSource{FieldRef: &api.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "MSG", Value: "$(GREETING) from $(POD)"},
		}
	})
	f := newFixture(t, cm, pod)
	f.sync("nginx")
	var out strings.Builder
	id := f.running("nginx").ID
	if _, err := f.rt.Exec(context.Background(), id, runtime.ExecOptions{Cmd: []string{"env"}, Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GREETING=hi", "POD=nginx", "MSG=hi from nginx"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("env lacks %q:\n%s", want, out.String())
		}
	}
	file := filepath.Join(f.w.podDir(pod.UID), "volumes", "html", "index.html")
	b, err := os.ReadFile(file)
	if err != nil || string(b) != "<h1>hello</h1>" {
		t.Fatalf("volume file %s = %q, %v", file, b, err)
	}
}

func TestMissingConfigMapKeyIsCreateContainerConfigError(t *testing.T) {
	f := newFixture(t, newPod("p", func(p *api.Pod) {
		p.Spec.Containers[0].Env = []api.EnvVar{{Name: "X", ValueFrom: &api.EnvVarSource{ConfigMapKeyRef: &api.KeySelector{Name: "nope", Key: "k"}}}}
	}))
	f.sync("p")
	w := f.pod("p").Status.ContainerStatuses[0].State.Waiting
	if w == nil || w.Reason != "CreateContainerConfigError" || !strings.Contains(w.Message, "nope") {
		t.Fatalf("waiting = %+v; want CreateContainerConfigError naming the ConfigMap", w)
	}
	if n := len(f.containers("p")); n != 0 {
		t.Fatalf("%d containers created despite a config error", n)
	}
}

func TestDeletingPodStopsContainersAndRemovesPod(t *testing.T) {
	f := newFixture(t, newPod("web"))
	f.sync("web")
	p := api.Clone(f.pod("web"))
	now := api.NewTime(f.now)
	grace := int64(1)
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	if _, err := f.w.Sync(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	f.w.WaitStops()
	if n := len(f.containers("web")); n != 0 {
		t.Fatalf("%d containers left after delete", n)
	}
	if _, err := f.c.Get(context.Background(), api.MustKindOf(&api.Pod{}), "default", "web"); !api.IsNotFound(err) {
		t.Fatalf("pod still in the API after the node stopped it: %v", err)
	}
}

// downRuntime is a runtime that cannot be reached (containerd restarting).
type downRuntime struct{ runtime.Runtime }

func (downRuntime) ListContainers(context.Context, map[string]string) ([]runtime.ContainerStatus, error) {
	return nil, runtime.ErrUnavailable
}

// A stop that fails (the runtime is down) is tried again after a backoff
// that grows, not at once: the chaos soak saw an agent retry 27,000 times
// a second while containerd restarted.
func TestFailedStopRetriesAfterBackoff(t *testing.T) {
	f := newFixture(t, newPod("web"))
	enqueued := make(chan time.Time, 4)
	f.w = New(Config{NodeName: "node-1", NodeIP: "10.0.0.1", Client: f.c, Runtime: downRuntime{f.rt},
		VolumeDir: t.TempDir(), Now: func() time.Time { return f.now },
		Enqueue: func(ns, name string) { enqueued <- time.Now() }})
	t.Cleanup(f.w.Close)
	p := api.Clone(f.pod("web"))
	now := api.NewTime(f.now)
	p.DeletionTimestamp = &now
	for failures := 1; failures <= 3; failures++ {
		synced := time.Now()
		if _, err := f.w.Sync(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-enqueued:
			if waited, want := at.Sub(synced), stopRetry.Delay(failures); waited < want {
				t.Errorf("failure %d: enqueued again after %v; want at least %v", failures, waited, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("failure %d: the failed stop was not retried within 10s", failures)
		}
	}
}

func TestCleanupRemovesContainersOfVanishedPods(t *testing.T) {
	f := newFixture(t, newPod("a"), newPod("b"))
	f.sync("a")
	f.sync("b")
	if err := f.w.Cleanup(context.Background(), map[string]bool{"uid-a": true}); err != nil {
		t.Fatal(err)
	}
	if len(f.containers("a")) != 1 || len(f.containers("b")) != 0 {
		t.Fatalf("after cleanup: a has %d, b has %d containers; want 1 and 0", len(f.containers("a")), len(f.containers("b")))
	}
}

func TestAdoptionAfterRestartStartsNoDuplicate(t *testing.T) {
	f := newFixture(t, newPod("web"))
	f.sync("web")
	// A new worker (a restarted agent) over the same runtime.
	f.w = New(Config{NodeName: "node-1", NodeIP: "10.0.0.1", Client: f.c, Runtime: f.rt, VolumeDir: t.TempDir(), Now: func() time.Time { return f.now }})
	f.sync("web")
	if n := len(f.containers("web")); n != 1 {
		t.Fatalf("%d containers after restart; want the adopted one only", n)
	}
}

func TestExpand(t *testing.T) {
	vals := map[string]string{"A": "1", "B": "2"}
	for in, want := range map[string]string{"$(A)-$(B)": "1-2", "$$(A)": "$(A)", "$(C)": "$(C)", "plain": "plain", "$(A": "$(A"} {
		if got := expand(in, vals); got != want {
			t.Errorf("expand(%q) = %q; want %q", in, got, want)
		}
	}
}

// probeFixture is a fixture whose probe changes arrive on a channel.
func probeFixture(t *testing.T, hook func(cmd []string) int, objs ...api.Object) (*fixture, chan string) {
	f := newFixture(t, objs...)
	changed := make(chan string, 16)
	rc := rtfake.DefaultConfig()
	rc.Now = func() time.Time { return f.now }
	rc.ExecHook = func(id string, opts runtime.ExecOptions) (int, error) { return hook(opts.Cmd), nil }
	f.rt = rtfake.New(rc)
	f.w = New(Config{NodeName: "node-1", NodeIP: "127.0.0.1", Client: f.c, Runtime: f.rt, VolumeDir: t.TempDir(),
		BaseBackoff: 10 * time.Second, Now: func() time.Time { return f.now },
		Enqueue: func(ns, name string) { changed <- name }})
	t.Cleanup(f.w.Close)
	return f, changed
}

func waitChange(t *testing.T, ch chan string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no probe result change within 10s")
	}
}

func TestReadinessProbeGatesReady(t *testing.T) {
	var mu sync.Mutex
	ready := 1
	hook := func(cmd []string) int { mu.Lock(); defer mu.Unlock(); return ready }
	f, changed := probeFixture(t, hook, newPod("web", func(p *api.Pod) {
		p.Spec.Containers[0].ReadinessProbe = &api.Probe{Exec: &api.ExecAction{Command: []string{"cat", "/ready"}}, PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1}
	}))
	f.sync("web")
	if f.pod("web").Status.ContainerStatuses[0].Ready {
		t.Fatal("ready before the readiness probe passed")
	}
	waitChange(t, changed) // first check fails: unknown → failure
	mu.Lock()
	ready = 0
	mu.Unlock()
	waitChange(t, changed) // next check passes
	f.sync("web")
	p := f.pod("web")
	if !p.Status.ContainerStatuses[0].Ready {
		t.Fatalf("not ready after the probe passed: %+v", p.Status.ContainerStatuses[0])
	}
	for _, c := range p.Status.Conditions {
		if c.Type == api.PodReady && c.Status != api.ConditionTrue {
			t.Fatalf("pod Ready condition %s", c.Status)
		}
	}
}

func TestLivenessProbeFailureRestartsContainer(t *testing.T) {
	f, changed := probeFixture(t, func([]string) int { return 1 }, newPod("web", func(p *api.Pod) {
		p.Spec.Containers[0].LivenessProbe = &api.Probe{Exec: &api.ExecAction{Command: []string{"false"}}, PeriodSeconds: 1, FailureThreshold: 1}
	}))
	f.sync("web")
	first := f.running("web").ID
	waitChange(t, changed)
	f.sync("web") // kills the unhealthy container
	f.sync("web") // restarts it (first restart is immediate)
	cs := f.pod("web").Status.ContainerStatuses[0]
	if cs.RestartCount != 1 || cs.State.Running == nil || f.running("web").ID == first {
		t.Fatalf("after a failed liveness probe: %+v; want a new running container with 1 restart", cs)
	}
}

func TestCleanupPodRemovesAForceDeletedPodOnly(t *testing.T) {
	f := newFixture(t, newPod("a"), newPod("b"))
	f.sync("a")
	f.sync("b")
	if err := f.w.CleanupPod(context.Background(), "default", "b"); err != nil {
		t.Fatal(err)
	}
	if len(f.containers("a")) != 1 || len(f.containers("b")) != 0 {
		t.Fatalf("after CleanupPod(b): a has %d, b has %d containers; want 1 and 0", len(f.containers("a")), len(f.containers("b")))
	}
	// Nothing left: a second call is a no-op.
	if err := f.w.CleanupPod(context.Background(), "default", "b"); err != nil {
		t.Fatal(err)
	}
}

// On a simulated node nothing listens, yet HTTP and TCP probes pass (a
// helm chart's probes, a course Deployment's), until the pod's fault
// annotation makes one fail: then liveness restarts the container as on a
// real node.
func TestSimulatedProbes(t *testing.T) {
	f, _ := probeFixture(t, func([]string) int { return 1 }, newPod("web", func(p *api.Pod) {
		c := &p.Spec.Containers[0]
		c.ReadinessProbe = &api.Probe{HTTPGet: &api.HTTPGetAction{Path: "/", Port: api.IntOrString{IntVal: 1}}, PeriodSeconds: 1, FailureThreshold: 1}
		c.LivenessProbe = &api.Probe{TCPSocket: &api.TCPSocketAction{Port: api.IntOrString{IntVal: 1}}, PeriodSeconds: 1, FailureThreshold: 1}
	}))
	cfg := f.w.cfg
	f.w.Close()
	cfg.Simulated = true
	f.w = New(cfg)
	t.Cleanup(f.w.Close)
	f.sync("web")
	first := f.running("web").ID
	// Port 1: nothing could answer for real.
	probeIs := func(k probeKind, want probeResult) {
		t.Helper()
		testwait.Until(t, 10*time.Second, func() (bool, string) {
			r, msg, _ := f.w.probes.result(first, k)
			return r == want, fmt.Sprintf("%s probe: result %d (%s), want %d", k, r, msg, want)
		})
	}
	probeIs(probeReadiness, resultSuccess)
	f.sync("web")
	if cs := f.pod("web").Status.ContainerStatuses[0]; !cs.Ready {
		t.Fatalf("simulated readiness probe passed but the container is not ready: %+v", cs)
	}

	p := f.pod("web")
	p.Annotations = map[string]string{api.AnnotationSimulatedProbeFailure: "liveness"}
	if _, err := f.c.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	f.sync("web") // reads the fault
	probeIs(probeLiveness, resultFailure)
	f.sync("web") // kills the unhealthy container
	f.sync("web") // restarts it (first restart is immediate)
	cs := f.pod("web").Status.ContainerStatuses[0]
	if cs.RestartCount != 1 || cs.State.Running == nil || f.running("web").ID == first {
		t.Fatalf("after the simulated liveness failure: %+v; want a new running container with 1 restart", cs)
	}
}

// kubectl debug: an ephemeral container added to a running pod starts in
// the pod (its own status, never ready), is not restarted when it ends
// (even under restartPolicy Always), and leaves the pod Ready.
func TestEphemeralContainerStartsOnceAndIsNeverRestarted(t *testing.T) {
	// Added through pods/ephemeralcontainers (the fake client's plain
	// update refuses it, as the API server does): preloaded.
	f := newFixture(t, newPod("web", func(p *api.Pod) {
		p.Spec.EphemeralContainers = []api.EphemeralContainer{{Container: api.Container{Name: "dbg", Image: "busybox:1.36", Command: []string{"sh"}}}}
	}))
	f.sync("web")
	f.sync("web")
	var dbg runtime.ContainerStatus
	for _, c := range f.containers("web") {
		if c.Labels[runtime.LabelContainerName] == "dbg" {
			dbg = c
		}
	}
	if dbg.State != runtime.StateRunning {
		t.Fatalf("ephemeral container %+v, want running", dbg)
	}
	p := f.pod("web")
	es := p.Status.EphemeralContainerStatuses
	if len(es) != 1 || es[0].Name != "dbg" || es[0].State.Running == nil || es[0].Ready || es[0].ContainerID != "containerd://"+dbg.ID {
		t.Fatalf("ephemeral container statuses %+v", es)
	}
	if len(p.Status.ContainerStatuses) != 1 || !allReady(p) {
		t.Errorf("the pod's own containers: %+v, ready %v", p.Status.ContainerStatuses, allReady(p))
	}
	if err := f.rt.Exit(dbg.ID, 0, ""); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(time.Minute)
	f.sync("web")
	f.sync("web")
	if n := len(f.containers("web")); n != 2 {
		t.Errorf("%d containers after the ephemeral one ended; want 2 (no restart)", n)
	}
	es = f.pod("web").Status.EphemeralContainerStatuses
	if len(es) != 1 || es[0].State.Terminated == nil || es[0].State.Terminated.Reason != "Completed" || es[0].RestartCount != 0 {
		t.Errorf("ephemeral status after exit %+v, want Terminated Completed", es)
	}
}

func allReady(p *api.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == api.PodReady {
			return c.Status == api.ConditionTrue
		}
	}
	return false
}
