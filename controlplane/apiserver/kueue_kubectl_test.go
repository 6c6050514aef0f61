package apiserver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/controllers"
	"skiff.dev/skiff/controlplane/kueue"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
)

// tableFields splits a table's lines into their fields (header first).
func tableFields(out string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

// The real kubectl with Kueue's quick start, unchanged, and the queue
// manager and the job controller running: apply the setup, `create -f`
// the sample job (generateName) four times; three fit the ClusterQueue's
// 9 CPUs, the fourth waits. kubectl prints Kueue's columns, the positions
// in -o wide, the visibility API through get --raw, and Kueue's v1beta1
// deprecation warning.
func TestKubectlKueueQuickStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 2)
	go func() { done <- controllers.Run(ctx, e.local, e.local, controllers.Options{}) }()
	go func() { done <- kueue.New(e.local, kueue.DefaultConfig(), nil, nil).Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	examples := filepath.Join("..", "..", "examples", "kueue")

	out := c.Must(t, "", "apply", "-f", filepath.Join(examples, "single-clusterqueue-setup.yaml"))
	if strings.TrimSpace(out) != "resourceflavor.kueue.x-k8s.io/default-flavor created\nclusterqueue.kueue.x-k8s.io/cluster-queue created\nlocalqueue.kueue.x-k8s.io/user-queue created" {
		t.Fatalf("apply setup:\n%s", out)
	}
	var jobs []string
	for range 4 {
		out := strings.TrimSpace(c.Must(t, "", "create", "-f", filepath.Join(examples, "sample-job.yaml")))
		name, ok := strings.CutSuffix(strings.TrimPrefix(out, "job.batch/"), " created")
		if !ok || !strings.HasPrefix(name, "sample-job-") {
			t.Fatalf("create -f sample-job.yaml: %q", out)
		}
		jobs = append(jobs, name)
	}
	workloadOf := func(job string) *api.Workload {
		j, err := client.Get[*api.Job](t.Context(), e.local, "default", job)
		if err != nil {
			return nil
		}
		wl, err := client.Get[*api.Workload](t.Context(), e.local, "default", kueue.WorkloadName(job, j.UID))
		if err != nil {
			return nil
		}
		return wl
	}
	testwait.For(t, 20*time.Second, "three workloads admitted and the fourth pending", func() bool {
		admitted, pending := 0, 0
		for _, j := range jobs {
			wl := workloadOf(j)
			switch {
			case wl == nil:
			case apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadAdmitted):
				admitted++
			case apimeta.IsStatusConditionFalse(wl.Status.Conditions, api.WorkloadQuotaReserved):
				pending++
			}
		}
		cq, err := client.Get[*api.ClusterQueue](t.Context(), e.local, "", "cluster-queue")
		return admitted == 3 && pending == 1 && err == nil && cq.Status.AdmittedWorkloads == 3 && cq.Status.PendingWorkloads == 1
	})
	last := workloadOf(jobs[3])
	for _, j := range jobs[:3] {
		if got, _ := client.Get[*api.Job](t.Context(), e.local, "default", j); got.Spec.Suspend == nil || *got.Spec.Suspend {
			t.Errorf("admitted job %s is still suspended", j)
		}
	}
	if c := apimeta.FindStatusCondition(last.Status.Conditions, api.WorkloadQuotaReserved); c.Message != "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, 3 more needed" {
		t.Errorf("pending message %q", c.Message)
	}

	tests := []struct {
		name string
		args []string
		want [][]string // rows of fields, header first; "*" matches anything
	}{
		{"clusterqueues", []string{"get", "clusterqueues"}, [][]string{{"NAME", "COHORT", "PENDING", "WORKLOADS"}, {"cluster-queue", "1"}}},
		{"clusterqueues wide", []string{"get", "cq", "-o", "wide"}, [][]string{{"NAME", "COHORT", "STRATEGY", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS"}, {"cluster-queue", "BestEffortFIFO", "1", "3"}}},
		{"localqueues", []string{"get", "localqueues"}, [][]string{{"NAME", "CLUSTERQUEUE", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS"}, {"user-queue", "cluster-queue", "1", "3"}}},
		// Pending: no reservation, no Admitted condition yet (empty cells, as Kueue's).
		{"the pending workload, wide", []string{"get", "workloads", last.Name, "-o", "wide"}, [][]string{
			{"NAME", "QUEUE", "RESERVED", "IN", "ADMITTED", "FINISHED", "AGE", "POSITION", "IN", "CLUSTERQUEUE", "POSITION", "IN", "LOCALQUEUE"},
			{last.Name, "user-queue", "*", "0", "0"}}},
		{"an admitted workload", []string{"get", "kwl", workloadOf(jobs[0]).Name}, [][]string{
			{"NAME", "QUEUE", "RESERVED", "IN", "ADMITTED", "FINISHED", "AGE"}, {workloadOf(jobs[0]).Name, "user-queue", "cluster-queue", "True", "*"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tableFields(c.Must(t, "", tt.args...))
			if len(got) != len(tt.want) {
				t.Fatalf("%d rows, want %d: %q", len(got), len(tt.want), got)
			}
			for i := range got {
				if !matchFields(got[i], tt.want[i]) {
					t.Errorf("row %d: %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
	// Several kinds at once, as the lab types it.
	if out := c.Must(t, "", "get", "clusterqueues,localqueues,workloads"); !strings.Contains(out, "clusterqueue.kueue.x-k8s.io/cluster-queue") ||
		!strings.Contains(out, "localqueue.kueue.x-k8s.io/user-queue") || strings.Count(out, "workload.kueue.x-k8s.io/job-sample-job-") != 4 {
		t.Errorf("get clusterqueues,localqueues,workloads:\n%s", out)
	}
	// The visibility API, as Kueue's docs read it.
	raw := c.Must(t, "", "get", "--raw", "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue/pendingworkloads")
	var sum pendingSummary
	if err := json.Unmarshal([]byte(raw), &sum); err != nil || len(sum.Items) != 1 || sum.Items[0].Metadata.Name != last.Name || sum.Items[0].LocalQueueName != "user-queue" {
		t.Errorf("pendingworkloads: %v\n%s", err, raw)
	}
	// A v1beta1 object: applied, and kubectl prints Kueue's warning.
	lq := "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata:\n  name: old-queue\n  namespace: default\nspec:\n  clusterQueue: cluster-queue\n"
	r := c.Run(t, lq, "apply", "-f", "-")
	if r.Err != nil || strings.TrimSpace(r.Stdout) != "localqueue.kueue.x-k8s.io/old-queue created" ||
		!strings.Contains(r.Stderr, "Warning: This version is deprecated. Use v1beta2 instead.") {
		t.Errorf("apply v1beta1: %v\nstdout: %s\nstderr: %s", r.Err, r.Stdout, r.Stderr)
	}
	// The example files are the upstream ones: nothing skiff-specific.
	for _, f := range []string{"single-clusterqueue-setup.yaml", "sample-job.yaml"} {
		b, err := os.ReadFile(filepath.Join(examples, f))
		if err != nil || strings.Contains(string(b), "skiff") {
			t.Errorf("%s: %v (mentions skiff)", f, err)
		}
	}
}

func matchFields(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if want[i] != "*" && got[i] != want[i] {
			return false
		}
	}
	return true
}
