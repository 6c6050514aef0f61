package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/controlplane/kueue"
)

// homeworkQueue is homework task 4 run by the real queue manager over the
// fake: a GPU quota of 2, three one-GPU Jobs a, b, c; a and b admitted, c
// pending.
func homeworkQueue(t *testing.T) *fake.Client {
	t.Helper()
	gpuJob := func(name string) *api.Job {
		one, yes := int32(1), true
		return &api.Job{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{api.QueueNameLabel: "user-queue"}},
			Spec: api.JobSpec{Parallelism: &one, Completions: &one, Suspend: &yes, Template: api.PodTemplateSpec{Spec: api.PodSpec{RestartPolicy: "Never",
				Containers: []api.Container{{Name: "cuda", Image: "cuda", Resources: api.ResourceRequirements{Limits: api.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}}}}}
	}
	fc := fake.New(&api.Namespace{ObjectMeta: api.ObjectMeta{Name: "default"}},
		&api.ResourceFlavor{ObjectMeta: api.ObjectMeta{Name: "default-flavor"}},
		&api.ClusterQueue{ObjectMeta: api.ObjectMeta{Name: "cluster-queue"}, Spec: api.ClusterQueueSpec{NamespaceSelector: &api.LabelSelector{},
			ResourceGroups: []api.QueueResourceGroup{{CoveredResources: []string{"nvidia.com/gpu"},
				Flavors: []api.FlavorQuotas{{Name: "default-flavor", Resources: []api.FlavorResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("2")}}}}}}}},
		&api.LocalQueue{ObjectMeta: api.ObjectMeta{Name: "user-queue", Namespace: "default"}, Spec: api.LocalQueueSpec{ClusterQueue: "cluster-queue"}})
	clock := testNow.Add(-30 * time.Second)
	fc.SetClock(func() time.Time { return clock })
	m := kueue.NewForTest(fc, kueue.DefaultConfig(), nil, func() time.Time { return clock })
	ctx := context.Background()
	for _, job := range []string{"a", "b", "c"} { // one after the other, a second apart
		clock = clock.Add(time.Second)
		if _, err := fc.Create(ctx, gpuJob(job)); err != nil {
			t.Fatal(err)
		}
		if err := m.ReconcileJob(ctx, "default/"+job); err != nil {
			t.Fatal(err)
		}
		if err := m.Schedule(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.ReconcileJob(ctx, "default/"+job); err != nil && !strings.HasPrefix(err.Error(), "requeue after") {
			t.Fatal(err)
		}
	}
	return fc
}

func workloadOf(t *testing.T, fc *fake.Client, job string) string {
	t.Helper()
	j, err := fc.Get(context.Background(), api.MustKindOf(&api.Job{}), "default", job)
	if err != nil {
		t.Fatal(err)
	}
	return kueue.WorkloadName(job, j.GetObjectMeta().UID)
}

// get workloads -o wide fills the positions of the pending one only.
func TestGetWorkloadsPositions(t *testing.T) {
	fc := homeworkQueue(t)
	r := run(t, fc, "", "get", "workloads", "-o", "wide")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if h := strings.Join(strings.Fields(lines[0]), " "); h != "NAME QUEUE RESERVED IN ADMITTED FINISHED AGE POSITION IN CLUSTERQUEUE POSITION IN LOCALQUEUE" {
		t.Fatalf("header %q", h)
	}
	want := map[string]string{
		workloadOf(t, fc, "a"): "user-queue cluster-queue True 29s",
		workloadOf(t, fc, "b"): "user-queue cluster-queue True 28s",
		workloadOf(t, fc, "c"): "user-queue 27s 0 0",
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if w, ok := want[f[0]]; !ok || strings.Join(f[1:], " ") != w {
			t.Errorf("row %q, want %q", l, w)
		}
		delete(want, f[0])
	}
	if len(want) != 0 {
		t.Errorf("rows missing: %v", want)
	}
}

// describe workload and describe job say what ran short, who holds it and
// what would free it.
func TestDescribeQueuedWorkloadAndJob(t *testing.T) {
	fc := homeworkQueue(t)
	a, b, c := workloadOf(t, fc, "a"), workloadOf(t, fc, "b"), workloadOf(t, fc, "c")
	tests := []struct {
		name string
		args []string
		want []string
		not  []string
	}{
		{"pending workload", []string{"describe", "workload", c}, []string{
			"Queue Name:     user-queue",
			"Controlled By:  Job/c",
			"main:  1 pod(s), each nvidia.com/gpu: 1",
			"QuotaReserved  False   Pending  27s  couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 1 more needed",
			"Position:        0 in ClusterQueue cluster-queue, 0 in LocalQueue user-queue (from 0)",
			"nvidia.com/gpu in flavor default-flavor:  requested 1, nominal quota 2, in use 2, available 0: 1 more needed",
			"default/" + a + "  cluster-queue  1       0         29s ago",
			"default/" + b + "  cluster-queue  1       0         28s ago",
			"default/" + a + " finishing frees 1",
			"or raising nominalQuota of nvidia.com/gpu in flavor default-flavor of ClusterQueue cluster-queue from 2 to 3",
			"ClusterQueue cluster-queue never preempts within itself",
		}, nil},
		{"admitted workload", []string{"describe", "workload", a}, []string{
			"Cluster Queue:  cluster-queue", "Flavors:  nvidia.com/gpu: default-flavor", "Usage:    nvidia.com/gpu: 1",
			"Admitted       True    Admitted       29s  The workload is admitted",
		}, []string{"Why Pending:", "Position:"}},
		{"pending job", []string{"describe", "job", "c"}, []string{
			"Kueue:", "Local Queue:  user-queue", "Workload:     " + c + " (Pending)",
			"Message:      couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 1 more needed",
			"Why Pending:", "default/" + a + " finishing frees 1",
		}, nil},
		{"admitted job", []string{"describe", "job", "a"}, []string{"Workload:     " + a + " (Admitted by ClusterQueue cluster-queue)"}, []string{"Why Pending:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, fc, "", tt.args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.out, w) {
					t.Errorf("lacks %q:\n%s", w, r.out)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(r.out, w) {
					t.Errorf("has %q:\n%s", w, r.out)
				}
			}
		})
	}
}
