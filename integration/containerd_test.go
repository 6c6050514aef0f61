package integration

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/runtime"
)

// The node agent issue's "done when", on real containerd: two in-process
// agents (n1, n2) share the test's containerd namespace; each labels its
// containers with its node name and only manages its own.
//
//  1. A 3-replica busybox Deployment reaches 3/3 Running over both nodes.
//  2. Killing a container's main process restarts it; restartCount counts it.
//  3. An agent stopped abruptly and started again adopts its containers:
//     same container IDs, no duplicates.
//  4. An agent gone for good: its node turns NotReady and its pods come
//     back on the other node.
func TestTwoAgentsOnContainerd(t *testing.T) {
	e := newCtrdEnv(t)
	cp, c := startControlPlane(t, func(cfg *controlplane.Config) {
		cfg.NodeMonitorGracePeriod, cfg.PodEvictionTimeout = 3*time.Second, 2*time.Second
	})
	dirs := map[string]string{"n1": t.TempDir(), "n2": t.TempDir()}
	rts := map[string]runtime.Runtime{"n1": e.runtime(t), "n2": e.runtime(t)}
	agents := map[string]*runningAgent{}
	for _, n := range []string{"n1", "n2"} {
		agents[n] = startAgent(t, cp, rts[n], n, dirs[n], nil)
	}
	ctx := context.Background()

	d := deployment("default", "web", 3, api.Container{Name: "main", Image: "busybox:1.36", ImagePullPolicy: "IfNotPresent",
		Command: []string{"sh", "-c", "echo started; sleep 3600"}})
	if _, err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	var pods []*api.Pod
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		pods = listPods(t, c, "default", "app=web")
		return len(pods) == 3 && runningPods(pods) == 3, podSummary(pods)
	})
	nodes := map[string]int{}
	for _, p := range pods {
		nodes[p.Spec.NodeName]++
	}
	if len(nodes) != 2 {
		t.Errorf("3 replicas on nodes %v; want them spread over n1 and n2", nodes)
	}

	// 1. Kill the main process of one container: the agent restarts it.
	victim := pods[0]
	id := containerIDOf(t, victim)
	st, err := rts[victim.Spec.NodeName].ContainerStatus(ctx, id)
	if err != nil || st.Pid == 0 {
		t.Fatalf("status of container %s: %+v, %v", id, st, err)
	}
	if err := syscall.Kill(int(st.Pid), syscall.SIGKILL); err != nil {
		t.Fatalf("kill pid %d: %v", st.Pid, err)
	}
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		p, err := client.Get[*api.Pod](ctx, c, "default", victim.Name)
		if err != nil {
			return false, err.Error()
		}
		cs := p.Status.ContainerStatuses
		// lastState reports the killed run, as Kubernetes does (exit 137).
		return len(cs) == 1 && cs[0].RestartCount == 1 && cs[0].Ready && cs[0].State.Running != nil &&
				cs[0].LastTerminationState.Terminated != nil && cs[0].LastTerminationState.Terminated.ExitCode == 137,
			podSummary([]*api.Pod{p})
	})

	// 2. kill -9 of an agent, then a restart: it adopts what runs.
	node := victim.Spec.NodeName
	before := containersByPod(t, ctx, rts[node], node)
	agents[node].kill(t)
	restarted := time.Now()
	rts[node] = e.runtime(t) // a new process has a new connection
	agents[node] = startAgent(t, cp, rts[node], node, dirs[node], nil)
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		n, err := client.Get[*api.Node](ctx, c, "", node)
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == api.NodeReady {
				hb := cond.LastHeartbeatTime.Time
				return cond.Status == api.ConditionTrue && hb.After(restarted.Add(time.Second)),
					fmt.Sprintf("Ready=%s heartbeat %v (restarted %v)", cond.Status, hb, restarted)
			}
		}
		return false, "no Ready condition"
	})
	after := containersByPod(t, ctx, rts[node], node)
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("containers by pod after the agent restart:\n%v\nbefore:\n%v\n(want the same, no duplicates)", after, before)
	}
	pods = listPods(t, c, "default", "app=web")
	if len(pods) != 3 || runningPods(pods) != 3 {
		t.Errorf("after the agent restart: %s; want the same 3 running pods", podSummary(pods))
	}
	for _, p := range pods {
		if p.Name == victim.Name && (len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount != 1) {
			t.Errorf("restart count of %s lost in the agent restart: %s", p.Name, podSummary([]*api.Pod{p}))
		}
	}

	// 3. The agent of the other node dies for good.
	lost := "n1"
	other := "n2"
	agents[lost].kill(t)
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		n, err := client.Get[*api.Node](ctx, c, "", lost)
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == api.NodeReady {
				return cond.Status != api.ConditionTrue, fmt.Sprintf("node %s Ready=%s", lost, cond.Status)
			}
		}
		return false, "no Ready condition"
	})
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		pods = listPods(t, c, "default", "app=web")
		onOther := 0
		for _, p := range pods {
			if p.Spec.NodeName == other && p.DeletionTimestamp == nil && p.Status.Phase == api.PodRunning && allReady(p) {
				onOther++
			}
		}
		return len(pods) == 3 && onOther == 3, podSummary(pods)
	})
}

// containerIDOf is the runtime ID of the pod's first container.
func containerIDOf(t testing.TB, p *api.Pod) string {
	t.Helper()
	if len(p.Status.ContainerStatuses) == 0 {
		t.Fatalf("pod %s has no container status", p.Name)
	}
	_, id, ok := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	if !ok {
		t.Fatalf("pod %s: container ID %q", p.Name, p.Status.ContainerStatuses[0].ContainerID)
	}
	return id
}

// containersByPod lists, per pod uid, the IDs of the running containers of
// node, sorted: a duplicate shows up as a second ID.
func containersByPod(t testing.TB, ctx context.Context, rt runtime.Runtime, node string) map[string][]string {
	t.Helper()
	cs, err := rt.ListContainers(ctx, map[string]string{"skiff.dev/node": node})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]string{}
	for _, c := range cs {
		if c.State == runtime.StateRunning {
			uid := c.Labels[runtime.LabelPodUID]
			m[uid] = append(m[uid], c.ID)
		}
	}
	for _, ids := range m {
		slices.Sort(ids)
	}
	return m
}

// oneNode is a control plane and one agent on the test's containerd.
func oneNode(t *testing.T) (client.Interface, runtime.Runtime) {
	t.Helper()
	e := newCtrdEnv(t)
	cp, c := startControlPlane(t, nil)
	rt := e.runtime(t)
	startAgent(t, cp, rt, "n1", filepath.Join(t.TempDir(), "agent"), func(a *agent.Config) {
		a.BaseBackoff, a.MaxBackoff = time.Second, 4*time.Second
	})
	return c, rt
}

func createPod(t testing.TB, c client.Interface, p *api.Pod) {
	t.Helper()
	if p.Namespace == "" {
		p.Namespace = "default"
	}
	if _, err := c.Create(context.Background(), p); err != nil {
		t.Fatalf("create pod %s: %v", p.Name, err)
	}
}

func getPod(c client.Interface, name string) (*api.Pod, error) {
	return client.Get[*api.Pod](context.Background(), c, "default", name)
}

// A ConfigMap key mounted as one file with subPath, and another as an env
// var, are visible inside the container.
func TestConfigMapFileAndEnvInContainer(t *testing.T) {
	c, rt := oneNode(t)
	ctx := context.Background()
	cm := &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: "app-config", Namespace: "default"},
		Data: map[string]string{"app.conf": "mode=test\nport=8080\n", "level": "debug"}}
	if _, err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "reader"}}
	p.Spec.Volumes = []api.Volume{{Name: "cfg", ConfigMap: &api.ConfigMapVolumeSource{Name: "app-config"}}}
	p.Spec.Containers = []api.Container{{
		Name: "main", Image: "busybox:1.36", ImagePullPolicy: "IfNotPresent",
		Command:      []string{"sh", "-c", "cat /etc/app/app.conf; echo LOG_LEVEL=$LOG_LEVEL; sleep 3600"},
		VolumeMounts: []api.VolumeMount{{Name: "cfg", MountPath: "/etc/app/app.conf", SubPath: "app.conf"}},
		Env:          []api.EnvVar{{Name: "LOG_LEVEL", ValueFrom: &api.EnvVarSource{ConfigMapKeyRef: &api.KeySelector{Name: "app-config", Key: "level"}}}},
	}}
	createPod(t, c, p)
	var got *api.Pod
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		var err error
		if got, err = getPod(c, "reader"); err != nil {
			return false, err.Error()
		}
		return runningPods([]*api.Pod{got}) == 1, podSummary([]*api.Pod{got})
	})
	id := containerIDOf(t, got)
	exec := func(cmd ...string) string {
		var out, errb bytes.Buffer
		code, err := rt.Exec(ctx, id, runtime.ExecOptions{Cmd: cmd, Stdout: &out, Stderr: &errb})
		if err != nil || code != 0 {
			t.Fatalf("exec %v: exit %d, %v (stderr %q)", cmd, code, err, errb.String())
		}
		return out.String()
	}
	if out := exec("cat", "/etc/app/app.conf"); out != cm.Data["app.conf"] {
		t.Errorf("cat /etc/app/app.conf = %q; want %q", out, cm.Data["app.conf"])
	}
	if out := exec("ls", "/etc/app"); strings.TrimSpace(out) != "app.conf" {
		t.Errorf("ls /etc/app = %q; want only app.conf (subPath mounts one file)", out)
	}
	if out := exec("env"); !slices.Contains(strings.Split(out, "\n"), "LOG_LEVEL=debug") {
		t.Errorf("env in the container lacks LOG_LEVEL=debug:\n%s", out)
	}
	var logs bytes.Buffer
	if err := rt.Logs(ctx, id, runtime.LogOptions{Tail: -1}, &logs); err != nil {
		t.Fatal(err)
	}
	if want := cm.Data["app.conf"] + "LOG_LEVEL=debug\n"; logs.String() != want {
		t.Errorf("logs = %q; want %q", logs.String(), want)
	}
}

// A container that allocates more than its memory limit is reported
// OOMKilled in the pod's status.
func TestOverMemoryLimitIsOOMKilled(t *testing.T) {
	c, _ := oneNode(t)
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "hog"}}
	p.Spec.RestartPolicy = api.RestartNever
	p.Spec.Containers = []api.Container{{
		Name: "main", Image: "busybox:1.36", ImagePullPolicy: "IfNotPresent",
		Command:   []string{"sh", "-c", `x=$(head -c 64m /dev/zero | tr "\0" a); echo survived`},
		Resources: api.ResourceRequirements{Limits: api.ResourceList{api.ResourceMemory: resource.MustParse("16Mi")}},
	}}
	createPod(t, c, p)
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		got, err := getPod(c, "hog")
		if err != nil {
			return false, err.Error()
		}
		cs := got.Status.ContainerStatuses
		ok := got.Status.Phase == api.PodFailed && len(cs) == 1 && cs[0].State.Terminated != nil &&
			cs[0].State.Terminated.Reason == "OOMKilled" && cs[0].State.Terminated.ExitCode == 137
		return ok, podSummary([]*api.Pod{got})
	})
}

// An image that cannot be pulled shows ErrImagePull, then ImagePullBackOff,
// with the reason in the pod's Events.
func TestMissingImagePullBackOff(t *testing.T) {
	c, _ := oneNode(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := c.Watch(ctx, api.MustKindOf(&api.Pod{}), "default", api.ListOptions{FieldSelector: "metadata.name=ghost"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	var reasons []string // waiting reasons in the order the watch saw them
	go func() {
		for ev := range w.Events() {
			p, ok := ev.Object.(*api.Pod)
			if !ok {
				continue
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Waiting != nil {
					mu.Lock()
					if len(reasons) == 0 || reasons[len(reasons)-1] != cs.State.Waiting.Reason {
						reasons = append(reasons, cs.State.Waiting.Reason)
					}
					mu.Unlock()
				}
			}
		}
	}()

	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "ghost"}}
	p.Spec.Containers = []api.Container{{Name: "main", Image: "registry.invalid/skiff/ghost:1", ImagePullPolicy: "IfNotPresent"}}
	createPod(t, c, p)
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		mu.Lock()
		seen := slices.Clone(reasons)
		mu.Unlock()
		i := slices.Index(seen, "ErrImagePull")
		return i >= 0 && slices.Contains(seen[i:], "ImagePullBackOff"), fmt.Sprintf("waiting reasons seen: %v", seen)
	})
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		var desc []string
		failed, backoff := false, false
		for _, e := range eventsFor(t, c, "default", "ghost") {
			desc = append(desc, e.Type+" "+e.Reason+": "+e.Message)
			failed = failed || (e.Type == "Warning" && e.Reason == "Failed" && strings.Contains(e.Message, "registry.invalid/skiff/ghost:1"))
			backoff = backoff || (e.Reason == "BackOff" && strings.Contains(e.Message, "registry.invalid/skiff/ghost:1"))
		}
		return failed && backoff, fmt.Sprintf("events of pod ghost: %q", desc)
	})
}
