package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testenv"
	"skiff.dev/skiff/internal/testwait"
)

// Homework task 4 (examples/homework/task4-*.yaml) on real containerd:
// `skiff server` (the queue manager on, as by default) and one `skiff
// agent` with a simulated DGX A100. With the ClusterQueue's GPU quota of 2
// and three one-GPU Jobs, two run and the third is Pending with Kueue's
// words and position 0 in its queues; a kill -9 of the server changes none
// of that (the same two admitted after the restart, nothing admitted
// twice, a Job queued after the restart waits behind the third); once the
// first Job finishes, the third is admitted and runs.
//
// The queues are the example file unchanged. The Jobs are the example's
// with one change, made here and not in the example: instead of
// `sleep 30` each container waits for a file on a hostPath directory of
// its own that the test creates, so the test decides when a Job finishes
// (the namespace's Pod Security level is lifted to privileged for it).
const task4Image = "nvidia/cuda:12.4.1-base-ubuntu22.04"

func TestHomeworkTask4QueueOnContainerd(t *testing.T) {
	e := newCtrdEnv(t)
	rt := e.runtime(t)
	arch, err := testenv.Busybox(task4Image, "docker.io/library/busybox:1.36").Archive()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.ImportImage(context.Background(), bytes.NewReader(arch)); err != nil {
		t.Fatalf("import %s: %v", task4Image, err)
	}
	s := startSoakCluster(t, e, 1)
	ctx := context.Background()
	c := s.c

	gates := t.TempDir()
	createAll(t, c, readExample(t, "task4-queues.yaml"))
	nsObj, err := client.Get[*api.Namespace](ctx, c, "", "default")
	if err != nil {
		t.Fatal(err)
	}
	if nsObj.Labels == nil {
		nsObj.Labels = map[string]string{}
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "privileged" // the hostPath gates
	if _, err := c.Update(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	jobs := gatedTask4Jobs(t, readExample(t, "task4-jobs.yaml"), gates)
	for _, j := range jobs { // in the example's order: train-1 is queued first
		createAll(t, c, []api.Object{j})
	}

	// state: the Jobs of the admitted, unfinished Workloads, and the
	// pending Workloads by Job name.
	state := func() (admitted []string, pending map[string]*api.Workload, why string) {
		wls, _, err := client.List[*api.Workload](ctx, c, "default", api.ListOptions{})
		if err != nil {
			return nil, nil, err.Error()
		}
		pending = map[string]*api.Workload{}
		var b strings.Builder
		for _, wl := range wls {
			job := ownerJob(wl)
			fmt.Fprintf(&b, "%s (job %s):", wl.Name, job)
			for _, cd := range wl.Status.Conditions {
				fmt.Fprintf(&b, " %s=%s(%s)", cd.Type, cd.Status, cd.Message)
			}
			b.WriteString("\n")
			switch {
			case apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadFinished):
				// done: Admitted stays True, as in Kueue, but it holds no quota
			case apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadAdmitted):
				admitted = append(admitted, job)
			default:
				pending[job] = wl
			}
		}
		slices.Sort(admitted)
		return admitted, pending, b.String()
	}
	const wantMsg = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 1 more needed"
	running := func(job string) (bool, string) {
		ps := listPods(t, c, "default", api.JobNameLabel+"="+job)
		return len(ps) == 1 && ps[0].Status.Phase == api.PodRunning, job + ": " + podSummary(ps)
	}
	// check waits until exactly the Jobs admitted run, each pending one has
	// no pod and Kueue's Pending words, and the visibility API lists the
	// pending ones in that order (positions 0, 1, ... in both queues).
	check := func(phase string, wantAdmitted, wantPending []string) {
		t.Helper()
		testwait.Until(t, 30*time.Second, func() (bool, string) {
			admitted, pending, why := state()
			if !slices.Equal(admitted, wantAdmitted) || len(pending) != len(wantPending) {
				return false, why
			}
			for _, j := range wantPending {
				wl := pending[j]
				if wl == nil {
					return false, why
				}
				qr := apimeta.FindStatusCondition(wl.Status.Conditions, api.WorkloadQuotaReserved)
				if qr == nil || qr.Status != api.ConditionFalse || qr.Reason != "Pending" || qr.Message != wantMsg {
					return false, why
				}
				if ps := listPods(t, c, "default", api.JobNameLabel+"="+j); len(ps) != 0 {
					return false, j + " has pods: " + podSummary(ps)
				}
			}
			for _, j := range admitted {
				if ok, w := running(j); !ok {
					return false, w
				}
			}
			return true, ""
		})
		_, pending, _ := state()
		pw := pendingWorkloads(t, c, "gpu-queue")
		var got, want []string
		for _, p := range pw {
			got = append(got, fmt.Sprintf("%s %s %d %d", p.Metadata.Name, p.LocalQueueName, p.PositionInClusterQueue, p.PositionInLocalQueue))
		}
		for i, j := range wantPending {
			want = append(want, fmt.Sprintf("%s gpu-jobs %d %d", pending[j].Name, i, i))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: pendingworkloads (name, local queue, positions in ClusterQueue and LocalQueue) %q, want %q", phase, got, want)
		}
	}
	check("before the kill", []string{"train-1", "train-2"}, []string{"train-3"})
	podsBefore := jobPodUIDs(t, c)

	// kill -9 of the server, started again on the same data.
	if err := s.kill9(s.server); err != nil {
		t.Fatal(err)
	}
	s.start(s.server)
	if err := s.waitAPI(ctx, s.server); err != nil {
		t.Fatal(err)
	}
	// A fourth Job queued after the restart (a copy of train-3): once its
	// Workload is Pending with Kueue's words, the restarted queue manager
	// has run admission cycles on the rebuilt quota, and train-3 stays
	// first in line.
	probe := api.Clone(jobs[2].(*api.Job))
	probe.ObjectMeta = api.ObjectMeta{Name: "train-4", Namespace: "default", Labels: probe.Labels}
	probe.Spec.Template.Spec.Volumes[0].HostPath.Path = filepath.Join(gates, "train-4")
	if err := os.MkdirAll(probe.Spec.Template.Spec.Volumes[0].HostPath.Path, 0o755); err != nil {
		t.Fatal(err)
	}
	createAll(t, c, []api.Object{probe})
	check("after the restart", []string{"train-1", "train-2"}, []string{"train-3", "train-4"})
	if got := jobPodUIDs(t, c); !maps.Equal(got, podsBefore) {
		t.Errorf("after the restart the Jobs' pods are %v, want the same %v (nothing started twice)", got, podsBefore)
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		cq, err := client.Get[*api.ClusterQueue](ctx, c, "", "gpu-queue")
		if err != nil {
			return false, err.Error()
		}
		return cq.Status.AdmittedWorkloads == 2 && cq.Status.PendingWorkloads == 2,
			fmt.Sprintf("ClusterQueue admitted %d pending %d, want 2 and 2", cq.Status.AdmittedWorkloads, cq.Status.PendingWorkloads)
	})

	// train-1 finishes: its GPU goes to train-3, the first in line.
	release := func(jobs ...string) {
		t.Helper()
		for _, j := range jobs {
			if err := os.WriteFile(filepath.Join(gates, j, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	release("train-1")
	check("after train-1 finished", []string{"train-2", "train-3"}, []string{"train-4"})
	release("train-2", "train-3", "train-4")
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		var why []string
		for _, j := range []string{"train-1", "train-2", "train-3", "train-4"} {
			job, err := client.Get[*api.Job](ctx, c, "default", j)
			if err != nil {
				return false, err.Error()
			}
			if !api.IsJobFinished(job) || job.Status.Succeeded != 1 {
				why = append(why, fmt.Sprintf("%s: succeeded %d, finished %v", j, job.Status.Succeeded, api.IsJobFinished(job)))
			}
			if ps := listPods(t, c, "default", api.JobNameLabel+"="+j); len(ps) != 1 {
				why = append(why, fmt.Sprintf("%s has %d pods, want 1: %s", j, len(ps), podSummary(ps)))
			}
		}
		return len(why) == 0, strings.Join(why, "; ")
	})
}

func readExample(t *testing.T, name string) []api.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", "homework", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []api.Object
	for _, d := range api.DecodeStream(data) {
		if d.Err != nil {
			t.Fatalf("%s: %v", name, d.Err)
		}
		out = append(out, d.Object)
	}
	return out
}

func createAll(t *testing.T, c client.Interface, objs []api.Object) {
	t.Helper()
	for _, o := range objs {
		if _, err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("create %s %s: %v", o.GetTypeMeta().Kind, o.GetObjectMeta().Name, err)
		}
	}
}

// gatedTask4Jobs returns the example's Jobs with `sleep 30` replaced by a
// wait for gates/<job>/go (a hostPath volume per Job).
func gatedTask4Jobs(t *testing.T, objs []api.Object, gates string) []api.Object {
	t.Helper()
	for _, o := range objs {
		j, ok := o.(*api.Job)
		if !ok {
			t.Fatalf("task4-jobs.yaml holds a %T, want only Jobs", o)
		}
		spec := &j.Spec.Template.Spec
		cmd := spec.Containers[0].Command
		if len(cmd) != 3 || !strings.HasSuffix(cmd[2], " && sleep 30") {
			t.Fatalf("job %s command %q: the example changed, update this test", j.Name, cmd)
		}
		dir := filepath.Join(gates, j.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd[2] = strings.TrimSuffix(cmd[2], "sleep 30") + "until [ -e /gate/go ]; do sleep 0.2; done"
		spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, api.VolumeMount{Name: "gate", MountPath: "/gate"})
		spec.Volumes = append(spec.Volumes, api.Volume{Name: "gate", HostPath: &api.HostPathVolumeSource{Path: dir}})
		zero := int64(0)
		spec.TerminationGracePeriodSeconds = &zero
	}
	return objs
}

func ownerJob(wl *api.Workload) string {
	for _, r := range wl.OwnerReferences {
		if r.Kind == "Job" {
			return r.Name
		}
	}
	return ""
}

// jobPodUIDs maps each Job of the namespace to the uids of its pods.
func jobPodUIDs(t *testing.T, c client.Interface) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range listPods(t, c, "default", api.JobNameLabel) {
		out[p.Labels[api.JobNameLabel]] += p.UID + " "
	}
	return out
}

type visibilityPending struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	LocalQueueName         string `json:"localQueueName"`
	PositionInClusterQueue int32  `json:"positionInClusterQueue"`
	PositionInLocalQueue   int32  `json:"positionInLocalQueue"`
}

// pendingWorkloads asks Kueue's visibility API of the ClusterQueue.
func pendingWorkloads(t *testing.T, c *client.Client, cq string) []visibilityPending {
	t.Helper()
	resp, err := c.Do(context.Background(), http.MethodGet, "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/"+cq+"/pendingworkloads", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pendingworkloads: %s: %s", resp.Status, b)
	}
	var out struct {
		Items []visibilityPending `json:"items"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("pendingworkloads: %v: %s", err, b)
	}
	return out.Items
}
