package kueue

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

// Fixtures: a namespace, flavors, queues and Jobs asking for GPUs.

func flavor(name string) *api.ResourceFlavor {
	return &api.ResourceFlavor{ObjectMeta: api.ObjectMeta{Name: name}}
}

type quota struct {
	nominal, borrowing, lending string
}

func clusterQueue(name, cohort string, gpus quota, mutate ...func(*api.ClusterQueue)) *api.ClusterQueue {
	rq := api.FlavorResourceQuota{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse(gpus.nominal)}
	if gpus.borrowing != "" {
		q := resource.MustParse(gpus.borrowing)
		rq.BorrowingLimit = &q
	}
	if gpus.lending != "" {
		q := resource.MustParse(gpus.lending)
		rq.LendingLimit = &q
	}
	cq := &api.ClusterQueue{ObjectMeta: api.ObjectMeta{Name: name}, Spec: api.ClusterQueueSpec{
		CohortName: cohort, NamespaceSelector: &api.LabelSelector{},
		ResourceGroups: []api.QueueResourceGroup{{CoveredResources: []string{"nvidia.com/gpu"},
			Flavors: []api.FlavorQuotas{{Name: "default-flavor", Resources: []api.FlavorResourceQuota{rq}}}}}}}
	for _, f := range mutate {
		f(cq)
	}
	return cq
}

func localQueue(name, cq string) *api.LocalQueue {
	return &api.LocalQueue{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"}, Spec: api.LocalQueueSpec{ClusterQueue: cq}}
}

type jobSpec struct {
	name, queue string
	gpus        int
	priority    string // a PriorityClass name
}

func gpuJob(js jobSpec) *api.Job {
	t, one := true, int32(1)
	j := &api.Job{ObjectMeta: api.ObjectMeta{Name: js.name, Namespace: "default", Labels: map[string]string{api.QueueNameLabel: js.queue}},
		Spec: api.JobSpec{Parallelism: &one, Completions: &one, Suspend: &t, Template: api.PodTemplateSpec{Spec: api.PodSpec{
			RestartPolicy: "Never", PriorityClassName: js.priority,
			Containers: []api.Container{{Name: "c", Image: "cuda", Resources: api.ResourceRequirements{
				Limits: api.ResourceList{"nvidia.com/gpu": resource.MustParse(fmt.Sprint(js.gpus))}}}}}}}}
	return j
}

// world is a fake cluster with a manager over it and a clock.
type world struct {
	t   testing.TB
	c   *fake.Client
	m   *Manager
	now time.Time
}

func newWorld(t testing.TB, objs ...api.Object) *world {
	w := &world{t: t, now: time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)}
	objs = append([]api.Object{&api.Namespace{ObjectMeta: api.ObjectMeta{Name: "default"}}, flavor("default-flavor"),
		&api.PriorityClass{ObjectMeta: api.ObjectMeta{Name: "high"}, Value: 1000},
		&api.PriorityClass{ObjectMeta: api.ObjectMeta{Name: "low"}, Value: 10}}, objs...)
	w.c = fake.New(objs...)
	w.c.SetClock(func() time.Time { return w.now })
	w.m = NewForTest(w.c, DefaultConfig(), nil, func() time.Time { return w.now })
	return w
}

// submit creates jobs one second apart (their creation orders them).
func (w *world) submit(jobs ...jobSpec) {
	for _, js := range jobs {
		w.now = w.now.Add(time.Second)
		if _, err := w.c.Create(context.Background(), gpuJob(js)); err != nil {
			w.t.Fatal(err)
		}
	}
}

// settle runs the job side and the cycle until nothing changes (bounded).
func (w *world) settle() {
	ctx := context.Background()
	for range 6 {
		jobs, _, _ := w.c.List(ctx, jobKind, "", api.ListOptions{})
		for _, j := range jobs {
			if err := w.m.ReconcileJob(ctx, "default/"+j.GetObjectMeta().Name); err != nil && !isRequeue(err) {
				w.t.Fatalf("ReconcileJob %s: %v", j.GetObjectMeta().Name, err)
			}
		}
		if err := w.m.Schedule(ctx); err != nil && !isRequeue(err) {
			w.t.Fatalf("Schedule: %v", err)
		}
	}
}

func isRequeue(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "requeue after") }

func (w *world) workload(job string) *api.Workload {
	j, err := w.c.Get(context.Background(), jobKind, "default", job)
	if err != nil {
		w.t.Fatal(err)
	}
	o, err := w.c.Get(context.Background(), workloadKind, "default", WorkloadName(job, j.GetObjectMeta().UID))
	if err != nil {
		w.t.Fatalf("workload of %s: %v", job, err)
	}
	return o.(*api.Workload)
}

func (w *world) job(name string) *api.Job {
	j, err := w.c.Get(context.Background(), jobKind, "default", name)
	if err != nil {
		w.t.Fatal(err)
	}
	return j.(*api.Job)
}

// admitted lists the jobs whose workloads hold quota, sorted.
func (w *world) admitted(jobs ...jobSpec) []string {
	var out []string
	for _, js := range jobs {
		if holdsQuota(w.workload(js.name)) {
			out = append(out, js.name)
		}
	}
	slices.Sort(out)
	return out
}

// finish completes a job as the job controller would.
func (w *world) finish(name string) {
	j := w.job(name)
	j.Status.Conditions = append(j.Status.Conditions, api.JobCondition{Type: api.JobComplete, Status: api.ConditionTrue})
	if _, err := w.c.UpdateStatus(context.Background(), j); err != nil {
		w.t.Fatal(err)
	}
}

func pendingMessage(wl *api.Workload) string {
	c := apimeta.FindStatusCondition(wl.Status.Conditions, api.WorkloadQuotaReserved)
	if c == nil || c.Status != "False" || c.Reason != api.WorkloadPending {
		return ""
	}
	return c.Message
}

func TestAdmission(t *testing.T) {
	one := func(name, q string) jobSpec { return jobSpec{name: name, queue: q, gpus: 1} }
	tests := []struct {
		name   string
		queues []api.Object
		jobs   []jobSpec
		// then, optionally, finish these jobs and settle again
		finish []string
		want   []string
		// pending job -> its message
		pending map[string]string
	}{
		{
			name:    "quota 2: two of three admitted, the third pending with Kueue's message",
			queues:  []api.Object{clusterQueue("cluster-queue", "", quota{nominal: "2"}), localQueue("user-queue", "cluster-queue")},
			jobs:    []jobSpec{one("a", "user-queue"), one("b", "user-queue"), one("c", "user-queue")},
			want:    []string{"a", "b"},
			pending: map[string]string{"c": "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 1 more needed"},
		},
		{
			name:   "the first finishes: the third is admitted",
			queues: []api.Object{clusterQueue("cluster-queue", "", quota{nominal: "2"}), localQueue("user-queue", "cluster-queue")},
			jobs:   []jobSpec{one("a", "user-queue"), one("b", "user-queue"), one("c", "user-queue")},
			finish: []string{"a"},
			want:   []string{"b", "c"},
		},
		{
			name:   "more than the queue could ever hold",
			queues: []api.Object{clusterQueue("cluster-queue", "", quota{nominal: "2"}), localQueue("user-queue", "cluster-queue")},
			jobs:   []jobSpec{{name: "big", queue: "user-queue", gpus: 3}},
			pending: map[string]string{"big": "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor default-flavor, " +
				"previously considered podsets requests (0) + current podset request (3) > maximum capacity (2)"},
		},
		{
			name: "borrowing from the cohort",
			queues: []api.Object{clusterQueue("team-a", "research", quota{nominal: "1"}), clusterQueue("team-b", "research", quota{nominal: "2"}),
				localQueue("a", "team-a"), localQueue("b", "team-b")},
			jobs:    []jobSpec{one("a1", "a"), one("a2", "a"), one("a3", "a"), one("a4", "a")},
			want:    []string{"a1", "a2", "a3"},
			pending: map[string]string{"a4": "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 1 more needed"},
		},
		{
			name: "borrowing limit",
			queues: []api.Object{clusterQueue("team-a", "research", quota{nominal: "1", borrowing: "1"}), clusterQueue("team-b", "research", quota{nominal: "2"}),
				localQueue("a", "team-a"), localQueue("b", "team-b")},
			jobs:    []jobSpec{one("a1", "a"), one("a2", "a"), one("a3", "a")},
			want:    []string{"a1", "a2"},
			pending: map[string]string{"a3": "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 1 more needed"},
		},
		{
			name: "lending limit keeps quota for the owner",
			queues: []api.Object{clusterQueue("team-a", "research", quota{nominal: "1"}), clusterQueue("team-b", "research", quota{nominal: "2", lending: "1"}),
				localQueue("a", "team-a"), localQueue("b", "team-b")},
			jobs:    []jobSpec{one("a1", "a"), one("a2", "a"), one("a3", "a"), one("b1", "b")},
			want:    []string{"a1", "a2", "b1"},
			pending: map[string]string{"a3": "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 1 more needed"},
		},
		{
			name:   "BestEffortFIFO: a small job passes a big one that does not fit",
			queues: []api.Object{clusterQueue("cq", "", quota{nominal: "3"}), localQueue("q", "cq")},
			jobs:   []jobSpec{{name: "a", queue: "q", gpus: 2}, {name: "b", queue: "q", gpus: 2}, {name: "c", queue: "q", gpus: 1}},
			want:   []string{"a", "c"},
		},
		{
			name:   "StrictFIFO: the head blocks",
			queues: []api.Object{clusterQueue("cq", "", quota{nominal: "3"}, func(cq *api.ClusterQueue) { cq.Spec.QueueingStrategy = api.StrictFIFO }), localQueue("q", "cq")},
			jobs:   []jobSpec{{name: "a", queue: "q", gpus: 2}, {name: "b", queue: "q", gpus: 2}, {name: "c", queue: "q", gpus: 1}},
			want:   []string{"a"},
		},
		{
			name:   "priority first",
			queues: []api.Object{clusterQueue("cq", "", quota{nominal: "1"}, func(cq *api.ClusterQueue) { cq.Spec.StopPolicy = ptr(api.StopPolicyHold) }), localQueue("q", "cq")},
			jobs:   []jobSpec{{name: "a", queue: "q", gpus: 1, priority: "low"}, {name: "b", queue: "q", gpus: 1, priority: "high"}},
			want:   nil, // held: nothing admitted, positions decide (TestPositions)
		},
		{
			name: "namespace not selected",
			queues: []api.Object{clusterQueue("cq", "", quota{nominal: "1"}, func(cq *api.ClusterQueue) {
				cq.Spec.NamespaceSelector = &api.LabelSelector{MatchLabels: map[string]string{"team": "x"}}
			}), localQueue("q", "cq")},
			jobs:    []jobSpec{one("a", "q")},
			pending: map[string]string{"a": "workload namespace doesn't match ClusterQueue selector"},
		},
		{
			name: "resource not covered",
			queues: []api.Object{clusterQueue("cq", "", quota{nominal: "1"}, func(cq *api.ClusterQueue) {
				cq.Spec.ResourceGroups[0].CoveredResources = []string{"cpu"}
				cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].Name = "cpu"
			}), localQueue("q", "cq")},
			jobs:    []jobSpec{one("a", "q")},
			pending: map[string]string{"a": "couldn't assign flavors to pod set main: resource nvidia.com/gpu unavailable in ClusterQueue"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, tt.queues...)
			w.submit(tt.jobs...)
			w.settle()
			for _, name := range tt.finish {
				w.finish(name)
			}
			w.settle()
			if got := w.admitted(tt.jobs...); !slices.Equal(got, tt.want) {
				t.Errorf("admitted %v, want %v", got, tt.want)
			}
			for job, msg := range tt.pending {
				if got := pendingMessage(w.workload(job)); got != msg {
					t.Errorf("%s pending:\n got %q\nwant %q", job, got, msg)
				}
			}
			for _, js := range tt.jobs { // admitted jobs run, the others stay suspended
				j := w.job(js.name)
				running := j.Spec.Suspend != nil && !*j.Spec.Suspend
				if slices.Contains(tt.finish, js.name) {
					continue // finished: the job controller's to wind down
				}
				if want := slices.Contains(tt.want, js.name); running != want {
					t.Errorf("job %s running %v, want %v", js.name, running, want)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestQueueStatusAndPositions(t *testing.T) {
	w := newWorld(t, clusterQueue("cluster-queue", "", quota{nominal: "2"}), localQueue("user-queue", "cluster-queue"))
	jobs := []jobSpec{{name: "a", queue: "user-queue", gpus: 1}, {name: "b", queue: "user-queue", gpus: 1},
		{name: "c", queue: "user-queue", gpus: 1}, {name: "d", queue: "user-queue", gpus: 1, priority: "high"}}
	w.submit(jobs[:2]...)
	w.settle()
	w.submit(jobs[2:]...)
	w.settle()
	cqo, _ := w.c.Get(context.Background(), clusterQueueKind, "", "cluster-queue")
	cq := cqo.(*api.ClusterQueue)
	if s := cq.Status; s.PendingWorkloads != 2 || s.ReservingWorkloads != 2 || s.AdmittedWorkloads != 2 {
		t.Errorf("cluster queue status pending %d reserving %d admitted %d, want 2 2 2", s.PendingWorkloads, s.ReservingWorkloads, s.AdmittedWorkloads)
	}
	if u := cq.Status.FlavorsUsage; len(u) != 1 || u[0].Resources[0].Total.String() != "2" || u[0].Resources[0].Borrowed.String() != "0" {
		t.Errorf("flavorsUsage %+v, want 2 gpus, none borrowed", u)
	}
	lqo, _ := w.c.Get(context.Background(), localQueueKind, "default", "user-queue")
	if s := lqo.(*api.LocalQueue).Status; s.PendingWorkloads != 2 || s.AdmittedWorkloads != 2 {
		t.Errorf("local queue status pending %d admitted %d, want 2 2", s.PendingWorkloads, s.AdmittedWorkloads)
	}
	var wls []*api.Workload
	for _, js := range jobs {
		wls = append(wls, w.workload(js.name))
	}
	pos := Positions(wls, []*api.LocalQueue{localQueue("user-queue", "cluster-queue")})
	// d (high priority) is ahead of c, though created after it.
	for job, want := range map[string]int32{"d": 0, "c": 1} {
		p, ok := pos[api.Key("default", w.workload(job).Name)]
		if !ok || p.InClusterQueue != want || p.InLocalQueue != want || p.ClusterQueue != "cluster-queue" {
			t.Errorf("position of %s: %+v (found %v), want %d", job, p, ok, want)
		}
	}
	if _, ok := pos[api.Key("default", w.workload("a").Name)]; ok {
		t.Error("an admitted workload has a position")
	}
}

func TestPreemption(t *testing.T) {
	tests := []struct {
		name       string
		queues     []api.Object
		first      []jobSpec // admitted first
		then       jobSpec
		wantBefore []string // holding quota after the preemption is issued
		evicted    []string
		wantAfter  []string // after the victims' pods are gone
		reason     string
	}{
		{
			name: "withinClusterQueue LowerPriority",
			queues: []api.Object{clusterQueue("cq", "", quota{nominal: "1"}, func(cq *api.ClusterQueue) {
				cq.Spec.Preemption = &api.ClusterQueuePreemption{WithinClusterQueue: api.KueuePreemptLowerPriority}
			}), localQueue("q", "cq")},
			first:     []jobSpec{{name: "low", queue: "q", gpus: 1, priority: "low"}},
			then:      jobSpec{name: "high", queue: "q", gpus: 1, priority: "high"},
			evicted:   []string{"low"},
			wantAfter: []string{"high"},
			reason:    "prioritization in the ClusterQueue",
		},
		{
			name:      "no preemption policy: the high priority job waits",
			queues:    []api.Object{clusterQueue("cq", "", quota{nominal: "1"}), localQueue("q", "cq")},
			first:     []jobSpec{{name: "low", queue: "q", gpus: 1, priority: "low"}},
			then:      jobSpec{name: "high", queue: "q", gpus: 1, priority: "high"},
			wantAfter: []string{"low"},
		},
		{
			name: "reclaimWithinCohort",
			queues: []api.Object{
				clusterQueue("team-a", "research", quota{nominal: "1"}, func(cq *api.ClusterQueue) {
					cq.Spec.Preemption = &api.ClusterQueuePreemption{ReclaimWithinCohort: api.KueuePreemptAny}
				}),
				clusterQueue("team-b", "research", quota{nominal: "1"}), localQueue("a", "team-a"), localQueue("b", "team-b")},
			first:     []jobSpec{{name: "b1", queue: "b", gpus: 1}, {name: "b2", queue: "b", gpus: 1}},
			then:      jobSpec{name: "a1", queue: "a", gpus: 1},
			evicted:   []string{"b2"},
			wantAfter: []string{"a1", "b1"},
			reason:    "reclamation within the cohort",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, tt.queues...)
			w.submit(tt.first...)
			w.settle()
			w.submit(tt.then)
			w.settle()
			for _, name := range tt.evicted {
				wl := w.workload(name)
				c := apimeta.FindStatusCondition(wl.Status.Conditions, api.WorkloadEvicted)
				if c == nil || c.Reason != api.WorkloadEvictedByPreemption || !strings.Contains(c.Message, tt.reason) {
					t.Errorf("%s evicted: %+v, want Preempted due to %s", name, c, tt.reason)
				}
				if j := w.job(name); j.Spec.Suspend == nil || !*j.Spec.Suspend {
					t.Errorf("evicted job %s not suspended", name)
				}
			}
			all := append(slices.Clone(tt.first), tt.then)
			if got := w.admitted(all...); !slices.Equal(got, tt.wantAfter) {
				t.Errorf("holding quota %v, want %v", got, tt.wantAfter)
			}
			for _, name := range tt.evicted { // requeued: pending again, with the scheduler's reason
				wl := w.workload(name)
				rq := apimeta.FindStatusCondition(wl.Status.Conditions, api.WorkloadRequeued)
				if rq == nil || rq.Status != "True" || rq.Reason != api.WorkloadEvictedByPreemption || pendingMessage(wl) == "" {
					t.Errorf("%s after eviction: Requeued %+v, pending %q", name, rq, pendingMessage(wl))
				}
			}
		})
	}
}

// A manager started on the same store (after a kill -9) rebuilds usage
// from the stored Workloads: it admits nothing twice and nothing more.
func TestRestartRebuildsQuota(t *testing.T) {
	w := newWorld(t, clusterQueue("cluster-queue", "", quota{nominal: "2"}), localQueue("user-queue", "cluster-queue"))
	jobs := []jobSpec{{name: "a", queue: "user-queue", gpus: 1}, {name: "b", queue: "user-queue", gpus: 1}, {name: "c", queue: "user-queue", gpus: 1}}
	w.submit(jobs...)
	ctx := context.Background()
	for _, js := range jobs {
		if err := w.m.ReconcileJob(ctx, "default/"+js.name); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.m.Schedule(ctx); err != nil && !isRequeue(err) {
		t.Fatal(err)
	}
	reservedAt := map[string]string{}
	for _, js := range jobs[:2] {
		c := apimeta.FindStatusCondition(w.workload(js.name).Status.Conditions, api.WorkloadQuotaReserved)
		if c == nil || c.Status != "True" {
			t.Fatalf("%s not reserved before the restart", js.name)
		}
		reservedAt[js.name] = c.LastTransitionTime.String() + " " + admissionJSON(t, w.workload(js.name))
	}
	// "Crash" between admission and starting the jobs: a new manager on
	// the same store, ten seconds later.
	w.now = w.now.Add(10 * time.Second)
	w.m = NewForTest(w.c, DefaultConfig(), nil, func() time.Time { return w.now })
	w.settle()
	if got := w.admitted(jobs...); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after restart admitted %v, want [a b]", got)
	}
	for _, js := range jobs[:2] { // the same admission, not a second one
		c := apimeta.FindStatusCondition(w.workload(js.name).Status.Conditions, api.WorkloadQuotaReserved)
		if got := c.LastTransitionTime.String() + " " + admissionJSON(t, w.workload(js.name)); got != reservedAt[js.name] {
			t.Errorf("%s admitted again: %s, was %s", js.name, got, reservedAt[js.name])
		}
	}
	for _, js := range jobs[:2] {
		if j := w.job(js.name); j.Spec.Suspend == nil || *j.Spec.Suspend {
			t.Errorf("job %s not started after the restart", js.name)
		}
	}
	w.finish("a")
	w.settle()
	if got := w.admitted(jobs...); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("after a finished: admitted %v, want [b c]", got)
	}
}

// staleLister serves workloads from a copy taken earlier: an informer's
// cache that has not seen the manager's last writes yet.
type staleLister struct {
	lister
	workloads []api.Object
}

func (s staleLister) list(ctx context.Context, k *api.Kind) ([]api.Object, error) {
	if k == workloadKind {
		return s.workloads, nil
	}
	return s.lister.list(ctx, k)
}

// A cycle that runs before the cache shows the previous cycle's
// admissions counts them anyway (assumed): no quota is given twice.
func TestStaleCacheDoesNotAdmitTwice(t *testing.T) {
	w := newWorld(t, clusterQueue("cluster-queue", "", quota{nominal: "1"}), localQueue("user-queue", "cluster-queue"))
	jobs := []jobSpec{{name: "a", queue: "user-queue", gpus: 1}, {name: "b", queue: "user-queue", gpus: 1}}
	w.submit(jobs...)
	ctx := context.Background()
	for _, js := range jobs {
		if err := w.m.ReconcileJob(ctx, "default/"+js.name); err != nil {
			t.Fatal(err)
		}
	}
	before, _, _ := w.c.List(ctx, workloadKind, "", api.ListOptions{})
	if err := w.m.Schedule(ctx); err != nil && !isRequeue(err) {
		t.Fatal(err)
	}
	w.m.read = staleLister{lister: clientLister{w.c}, workloads: before}
	if err := w.m.Schedule(ctx); err != nil && !isRequeue(err) {
		t.Fatal(err)
	}
	if got := w.admitted(jobs...); len(got) != 1 {
		t.Fatalf("admitted %v with quota 1", got)
	}
}

func TestWaitForPodsReadyEvictsAndRequeues(t *testing.T) {
	w := newWorld(t, clusterQueue("cluster-queue", "", quota{nominal: "1"}), localQueue("user-queue", "cluster-queue"))
	w.submit(jobSpec{name: "a", queue: "user-queue", gpus: 1})
	w.settle()
	if got := w.admitted(jobSpec{name: "a"}); len(got) != 1 {
		t.Fatalf("not admitted: %v", got)
	}
	w.now = w.now.Add(DefaultConfig().WaitForPodsReady.Timeout + time.Second)
	w.settle()
	wl := w.workload("a")
	ev := apimeta.FindStatusCondition(wl.Status.Conditions, api.WorkloadEvicted)
	if ev == nil || ev.Reason != api.WorkloadEvictedByPodsReadyTimeout || ev.Message != "Exceeded the PodsReady timeout default/"+wl.Name {
		t.Fatalf("evicted condition %+v", ev)
	}
	if holdsQuota(wl) || wl.Status.RequeueState == nil || *wl.Status.RequeueState.Count != 1 {
		t.Fatalf("after the timeout: holds quota %v, requeueState %+v", holdsQuota(wl), wl.Status.RequeueState)
	}
	if j := w.job("a"); j.Spec.Suspend == nil || !*j.Spec.Suspend {
		t.Fatal("job not suspended after PodsReadyTimeout")
	}
	w.now = w.now.Add(DefaultConfig().WaitForPodsReady.BackoffBase - time.Second)
	w.settle()
	if holdsQuota(w.workload("a")) {
		t.Fatal("readmitted during the backoff")
	}
	w.now = w.now.Add(2 * time.Second)
	w.settle()
	if !holdsQuota(w.workload("a")) {
		t.Fatal("not readmitted after the backoff")
	}
}

func TestWorkloadName(t *testing.T) {
	n := WorkloadName("sample-job-abcde", "0b2e8c48-9f4d-4a0c-8d2b-6a1f0c9e4d11")
	if !strings.HasPrefix(n, "job-sample-job-abcde-") || len(n) != len("job-sample-job-abcde-")+5 {
		t.Fatalf("WorkloadName = %q", n)
	}
	if WorkloadName("x", "uid-1") == WorkloadName("x", "uid-2") {
		t.Fatal("a recreated job gets the same workload name")
	}
}

func admissionJSON(t testing.TB, wl *api.Workload) string {
	b, err := json.Marshal(wl.Status.Admission)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
