package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"skiff.dev/skiff/agent/dra/gpudriver"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/fabric"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/cli"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/controlplane/kueue"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/node"
)

// All-or-nothing placement and the GPU fabric on real containerd (issue
// 11's "Done when": gang, waitForPodsReady, and homework task 3's labels
// and nvidia-smi): an in-process control plane and nodes started as
// `skiff agent --gpus sim:...` does (node.Start), their pods run by
// containerd in the test's namespace.

// gangStartNode starts node name on the test's containerd with the
// simulated GPUs of spec and labels (a cluster file's), serving logs.
func gangStartNode(t *testing.T, cp *controlplane.ControlPlane, e *ctrdEnv, name, spec string, labels map[string]string) *runningAgent {
	t.Helper()
	cfg := testNodeConfig(nil, name, filepath.Join(t.TempDir(), name), nil)
	cfg.GPUs, cfg.Labels = spec, labels
	cfg.Runtime, cfg.ContainerdAddress, cfg.ContainerdNamespace = node.RuntimeContainerd, e.addr, e.ns
	cfg.Listen, cfg.Credentials = "127.0.0.1:0", nodeCredentials(t, cp, name, "127.0.0.1")
	return startNode(t, cp, cfg)
}

// gangWaitGPUs waits until node name offers gpus GPUs.
func gangWaitGPUs(t *testing.T, c client.Interface, name string, gpus int64) *api.Node {
	t.Helper()
	var n *api.Node
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		var err error
		if n, err = client.Get[*api.Node](context.Background(), c, "", name); err != nil {
			return false, err.Error()
		}
		return gpuAllocatable(n) == gpus && n.Annotations[gputopology.AnnotationTopology] != "", fmt.Sprintf("node %s allocatable %v", name, n.Status.Allocatable)
	})
	return n
}

// skiffCLI runs the skiff CLI in process against cp.
func skiffCLI(t *testing.T, cp *controlplane.ControlPlane) func(args ...string) (string, error) {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := client.WriteKubeconfig(cfgPath, cp.ClientConfig()); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cli.Main(ctx, append([]string{"--kubeconfig", cfgPath}, args...), &out, &errOut); err != nil {
			return out.String() + errOut.String(), err
		}
		return out.String(), nil
	}
}

// applyYAML writes doc to a file and `skiff apply -f`s it.
func applyYAML(t *testing.T, sk func(...string) (string, error), doc string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := sk("apply", "-f", f); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
}

// A PodGroup of 4 one-GPU pods on a node with 4 GPUs of which another pod
// holds one: no member is ever bound (nor Running) while only 3 GPUs are
// free, through at least one Permit timeout (3 assumed, rejected
// together); once the other pod is gone, all 4 run. Every change to a pod
// is watched, so a member bound for an instant would be seen.
func TestGangAllOrNothingOnContainerd(t *testing.T) {
	e := newCtrdEnv(t)
	gpuImportImage(t, e.runtime(t))
	cp, c := startControlPlane(t, nil)
	const nodeName = "gang-1"
	gangStartNode(t, cp, e, nodeName, "sim:rtx4090x4", nil)
	gangWaitGPUs(t, c, nodeName, 4)
	ctx := context.Background()

	hog := gpuPod("hog", 1, gpuSleep)
	hog.Spec.RestartPolicy = "Never"
	if _, err := c.Create(ctx, hog); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		ps := listPods(t, c, gpuNS, "")
		return runningPods(ps) == 1, podSummary(ps)
	})

	timeout := int32(3)
	pg := &api.PodGroup{ObjectMeta: api.ObjectMeta{Name: "train", Namespace: gpuNS}}
	pg.Spec.MinMember, pg.Spec.ScheduleTimeoutSeconds = 4, &timeout
	if _, err := c.Create(ctx, pg); err != nil {
		t.Fatalf("create podgroup: %v", err)
	}

	// The watch: every pod change from here on, in order.
	_, rv, err := client.List[*api.Pod](ctx, c, gpuNS, api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w, err := c.Watch(wctx, api.MustKindOf(&api.Pod{}), gpuNS, api.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	var violations []string
	var hogGone bool
	observed := 0
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ev := range w.Events() {
			p, ok := ev.Object.(*api.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			observed++
			switch {
			case p.Name == "hog" && ev.Type == api.Deleted:
				hogGone = true
			case api.PodGroupOf(p) == "train" && !hogGone && (p.Spec.NodeName != "" || p.Status.Phase == api.PodRunning):
				violations = append(violations, fmt.Sprintf("%s %s: node %q phase %s while the hog still holds a GPU", ev.Type, p.Name, p.Spec.NodeName, p.Status.Phase))
			}
			mu.Unlock()
		}
	}()

	for i := range 4 {
		p := gpuPod(fmt.Sprintf("train-%d", i), 1, gpuSleep)
		p.Labels[api.LabelPodGroup] = "train"
		p.Spec.RestartPolicy = "Never"
		if _, err := c.Create(ctx, p); err != nil {
			t.Fatalf("create %s: %v", p.Name, err)
		}
	}
	// At least one whole Permit round: three members assumed, the fourth
	// unschedulable, the three rejected on the timeout. Each poll checks the
	// members from the API too.
	rejected := regexp.MustCompile(`rejected due to timeout after waiting 3s at plugin Coscheduling`)
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		ps := listPods(t, c, gpuNS, api.LabelPodGroup+"=train")
		for _, p := range ps {
			if p.Spec.NodeName != "" || p.Status.Phase != api.PodPending {
				t.Fatalf("member %s placed while only 3 GPUs are free: %s", p.Name, podSummary(ps))
			}
		}
		var msgs []string
		for i := range 4 {
			for _, ev := range eventsFor(t, c, gpuNS, fmt.Sprintf("train-%d", i)) {
				if ev.Reason == "FailedScheduling" && rejected.MatchString(ev.Message) {
					return true, ""
				}
				msgs = append(msgs, ev.Reason+": "+ev.Message)
			}
		}
		return false, "no Permit timeout yet; events: " + strings.Join(msgs, " | ")
	})
	if ph := gangPhase(t, c); ph == api.PodGroupRunning || ph == api.PodGroupFinished {
		t.Errorf("podgroup phase %s with no member running", ph)
	}

	// Room appears: the hog goes, all four run.
	if err := c.Delete(ctx, api.MustKindOf(&api.Pod{}), gpuNS, "hog", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 40*time.Second, func() (bool, string) {
		ps := listPods(t, c, gpuNS, api.LabelPodGroup+"=train")
		return runningPods(ps) == 4, podSummary(ps)
	})
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		ph := gangPhase(t, c)
		return ph == api.PodGroupRunning, "podgroup phase " + ph
	})
	stop()
	<-watchDone
	mu.Lock()
	defer mu.Unlock()
	if !hogGone {
		t.Errorf("the watch never saw the hog deleted (%d events)", observed)
	}
	if len(violations) > 0 {
		t.Errorf("the gang ran partially:\n%s", strings.Join(violations, "\n"))
	}
	var nodes []string
	for _, p := range listPods(t, c, gpuNS, api.LabelPodGroup+"=train") {
		nodes = append(nodes, p.Spec.NodeName)
	}
	if !slices.Equal(nodes, []string{nodeName, nodeName, nodeName, nodeName}) {
		t.Errorf("members on %v", nodes)
	}
	t.Logf("%d pod changes watched, none placed a member early", observed)
}

func gangPhase(t *testing.T, c client.Interface) string {
	t.Helper()
	pg, err := client.Get[*api.PodGroup](context.Background(), c, gpuNS, "train")
	if err != nil {
		t.Fatal(err)
	}
	return pg.Status.Phase
}

// A Kueue job of two Indexed pods of which only index 0 ever turns ready
// (the readiness probe of index 1 never passes), with waitForPodsReady's
// timeout at 3 s: its Workload is evicted (Evicted, PodsReadyTimeout, with
// Kueue's message and event), the Job suspended and its pods deleted, the
// quota released, and after the backoff the workload is admitted again
// (requeueState.count 1) and its pods come back.
func TestKueueWaitForPodsReadyEvictsAndRequeues(t *testing.T) {
	e := newCtrdEnv(t)
	cp, c := startControlPlane(t, func(cfg *controlplane.Config) {
		k := kueue.DefaultConfig()
		k.WaitForPodsReady.Timeout = 3 * time.Second
		k.WaitForPodsReady.BackoffBase, k.WaitForPodsReady.BackoffMax = time.Second, 2*time.Second
		cfg.Kueue = &k
	})
	startAgent(t, cp, e.runtime(t), "kq-1", filepath.Join(t.TempDir(), "agent"), nil)
	sk := skiffCLI(t, cp)
	applyYAML(t, sk, `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: 1
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: lq}
spec: {clusterQueue: cq}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: half-ready
  labels: {kueue.x-k8s.io/queue-name: lq}
spec:
  parallelism: 2
  completions: 2
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: busybox:1.36
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "trap 'exit 0' TERM; [ \"$JOB_COMPLETION_INDEX\" = 0 ] && touch /tmp/ready; while true; do sleep 1; done"]
        readinessProbe:
          exec: {command: ["cat", "/tmp/ready"]}
          periodSeconds: 1
        resources:
          requests: {cpu: 100m}
`)
	ctx := context.Background()
	workload := func() *api.Workload {
		t.Helper()
		wls, _, err := client.List[*api.Workload](ctx, c, "default", api.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(wls) != 1 {
			return nil
		}
		return wls[0]
	}
	conds := func(wl *api.Workload) string {
		if wl == nil {
			return "no workload"
		}
		var s []string
		for _, c := range wl.Status.Conditions {
			s = append(s, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
		}
		return strings.Join(s, " ")
	}
	jobPods := func() []*api.Pod { return listPods(t, c, "default", api.JobNameLabel+"=half-ready") }

	// Admitted, both pods running, only one ready.
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		wl := workload()
		ps := jobPods()
		ready := 0
		for _, p := range ps {
			if allReady(p) {
				ready++
			}
		}
		return wl != nil && apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadAdmitted) && len(ps) == 2 && ready == 1,
			conds(wl) + "\npods: " + podSummary(ps)
	})
	var wl *api.Workload
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		wl = workload()
		return wl != nil && apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadEvicted), conds(wl)
	})
	ev := apimeta.FindStatusCondition(wl.Status.Conditions, api.WorkloadEvicted)
	if want := "Exceeded the PodsReady timeout default/" + wl.Name; ev.Reason != api.WorkloadEvictedByPodsReadyTimeout || ev.Message != want {
		t.Errorf("Evicted: reason %q message %q, want %q %q", ev.Reason, ev.Message, api.WorkloadEvictedByPodsReadyTimeout, want)
	}
	if wl.Status.RequeueState == nil || wl.Status.RequeueState.Count == nil || *wl.Status.RequeueState.Count != 1 {
		t.Errorf("requeueState %+v, want count 1", wl.Status.RequeueState)
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) { // events are recorded asynchronously
		var seen []string
		for _, e := range eventsFor(t, c, "default", wl.Name) {
			if e.Reason == "EvictedDueToPodsReadyTimeout" && e.Message == ev.Message {
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, "no EvictedDueToPodsReadyTimeout event on workload " + wl.Name + "; events: " + strings.Join(seen, " | ")
	})

	// The job stops: suspended, its pods gone, the quota released.
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		j, err := client.Get[*api.Job](ctx, c, "default", "half-ready")
		if err != nil {
			return false, err.Error()
		}
		wl := workload()
		var live []*api.Pod
		for _, p := range jobPods() {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		return j.Spec.Suspend != nil && *j.Spec.Suspend && len(live) == 0 && wl != nil && apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadRequeued),
			fmt.Sprintf("suspend %v, live pods %s\n%s", j.Spec.Suspend, podSummary(live), conds(wl))
	})

	// Requeued: admitted again after the backoff, its pods back.
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		wl := workload()
		j, err := client.Get[*api.Job](ctx, c, "default", "half-ready")
		if err != nil {
			return false, err.Error()
		}
		return wl != nil && apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadQuotaReserved) &&
				!apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadEvicted) &&
				j.Spec.Suspend != nil && !*j.Spec.Suspend && len(jobPods()) > 0,
			conds(wl) + fmt.Sprintf("\njob suspend %v pods %s", j.Spec.Suspend, podSummary(jobPods()))
	})
	if out, err := sk("get", "workloads"); err != nil || !strings.Contains(out, wl.Name) {
		t.Errorf("get workloads: %v\n%s", err, out)
	}
}

// Homework task 3's cluster file on four nodes: each node carries its
// NVLink domain as GPU feature discovery's nvidia.com/gpu.clique and
// skiff.dev/nvlink-domain (and its DRA ResourceSlice the clique as
// skiff.dev/gpuClique), and `nvidia-smi topo -m` in an 8-GPU pod on a
// node of nvl-b shows that node's eight GPUs on NVSwitch (NV12), none of
// another node's.
func TestFabricLabelsAndNvidiaSMIOnContainerd(t *testing.T) {
	e := newCtrdEnv(t)
	gpuImportImage(t, e.runtime(t))
	fab, err := fabric.Load("../examples/homework/task3/cluster-4x-a100.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cp, c := startControlPlane(t, nil)
	names := make([]string, fab.Nodes)
	for i := range fab.Nodes {
		names[i] = fmt.Sprintf("fab-%d", i+1)
		gangStartNode(t, cp, e, names[i], fab.GPUs, fab.NodeLabels(i+1))
	}
	ctx := context.Background()
	uuids := map[string][]string{} // node → its GPUs' UUIDs by index
	owner := map[string]string{}   // UUID → node
	for i, name := range names {
		n := gangWaitGPUs(t, c, name, 8)
		wantDomain, wantClique := "nvl-a", fabric.DefaultClusterUUID+".1"
		if i >= 2 {
			wantDomain, wantClique = "nvl-b", fabric.DefaultClusterUUID+".2"
		}
		if n.Labels[fabric.LabelDomain] != wantDomain || n.Labels[fabric.LabelClique] != wantClique || n.Labels[fabric.LabelInterconnect] != fabric.InfiniBand {
			t.Errorf("node %s labels %v, want domain %s clique %s", name, n.Labels, wantDomain, wantClique)
		}
		ng, err := gputopology.ParseNodeGPUs(n.Annotations[gputopology.AnnotationTopology])
		if err != nil {
			t.Fatal(err)
		}
		uuids[name] = make([]string, len(ng.Devices))
		for _, d := range ng.Devices {
			uuids[name][d.Index] = d.UUID
			if o, dup := owner[d.UUID]; dup {
				t.Fatalf("GPU %s on both %s and %s", d.UUID, o, name)
			}
			owner[d.UUID] = name
		}
		// The DRA driver publishes the node's clique on every GPU.
		testwait.Until(t, 20*time.Second, func() (bool, string) {
			rs, _, err := client.List[*api.ResourceSlice](ctx, c, "", api.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, s := range rs {
				if s.Spec.NodeName == nil || *s.Spec.NodeName != name || s.Spec.Driver != gpudriver.DriverName {
					continue
				}
				var bad []string
				for _, d := range s.Spec.Devices {
					if a := d.Attributes[gpudriver.AttrClique]; a.StringValue == nil || *a.StringValue != wantClique {
						bad = append(bad, d.Name)
					}
				}
				return len(s.Spec.Devices) == 8 && len(bad) == 0, fmt.Sprintf("slice %s: %d devices, without clique %s: %v", s.Name, len(s.Spec.Devices), wantClique, bad)
			}
			return false, "no ResourceSlice of " + name
		})
	}

	p := gpuPod("topo", 8, "nvidia-smi topo -m; nvidia-smi -L")
	p.Spec.RestartPolicy = "Never"
	p.Spec.NodeSelector = map[string]string{fabric.LabelDomain: "nvl-b"}
	if _, err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 40*time.Second, func() (bool, string) {
		var err error
		if p, err = client.Get[*api.Pod](ctx, c, gpuNS, "topo"); err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == api.PodSucceeded, podSummary([]*api.Pod{p})
	})
	if p.Spec.NodeName != "fab-3" && p.Spec.NodeName != "fab-4" {
		t.Fatalf("pod on %s, outside nvl-b", p.Spec.NodeName)
	}
	body, err := c.Stream(ctx, "/api/v1/namespaces/"+gpuNS+"/pods/topo/log")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	_, err = logs.ReadFrom(body)
	body.Close()
	if err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	// The matrix: GPU0..GPU7, X on the diagonal, NV12 everywhere else.
	for k := range 8 {
		cells := make([]string, 8)
		for m := range cells {
			cells[m] = "NV12"
			if m == k {
				cells[m] = "X"
			}
		}
		row := regexp.MustCompile(fmt.Sprintf(`(?m)^GPU%d\s+%s\s`, k, strings.Join(cells, `\s+`)))
		if !row.MatchString(out) {
			t.Errorf("nvidia-smi topo -m: no row GPU%d %v:\n%s", k, cells, out)
		}
	}
	if strings.Contains(out, "GPU8") {
		t.Errorf("nvidia-smi topo -m shows more than the node's 8 GPUs:\n%s", out)
	}
	listed := regexp.MustCompile(`(?m)^GPU \d+: .* \(UUID: (GPU-[0-9a-f-]+)\)$`).FindAllStringSubmatch(out, -1)
	if len(listed) != 8 {
		t.Fatalf("nvidia-smi -L lists %d GPUs, want 8:\n%s", len(listed), out)
	}
	for _, m := range listed {
		if owner[m[1]] != p.Spec.NodeName {
			t.Errorf("nvidia-smi -L in a pod on %s lists %s, a GPU of %q", p.Spec.NodeName, m[1], owner[m[1]])
		}
	}
}
