package controllers

import (
	"errors"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

// Disruption controller tests: a Deployment's ReplicaSet of 3 ready pods,
// a budget, the controller reconciled by hand on a fixed clock.

func newPDB(min, maxUnavailable string) *api.PodDisruptionBudget {
	p := &api.PodDisruptionBudget{
		ObjectMeta: api.ObjectMeta{Name: "web-pdb", Namespace: ns},
		Spec:       api.PodDisruptionBudgetSpec{Selector: &api.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	if min != "" {
		p.Spec.MinAvailable = intOrPercent(min)
	}
	if maxUnavailable != "" {
		p.Spec.MaxUnavailable = intOrPercent(maxUnavailable)
	}
	return p
}

func pdbFixture(t *testing.T, pdb *api.PodDisruptionBudget, podOpts ...podOpt) (*fake.Client, *DisruptionController, *events) {
	t.Helper()
	d := deployment(3, "nginx:1")
	rs := rsFor(d, 1, 3)
	objs := []api.Object{d, rs, pdb}
	for i, n := range []string{"web-a", "web-b", "web-c"} {
		var opts []podOpt
		if i == 0 {
			opts = podOpts
		}
		objs = append(objs, pod(rs, n, opts...))
	}
	c := fake.New(objs...)
	ev := &events{}
	dc := NewDisruptionController(c, fakeLister{c, pdbKind()}, fakeLister{c, podKind()}, fakeLister{c, replicaSetKind()},
		fakeLister{c, deploymentKind()}, fakeLister{c, statefulSetKind()}, ev, testLogger(t))
	dc.now = now
	return c, dc, ev
}

func reconcilePDB(t *testing.T, dc *DisruptionController) {
	t.Helper()
	var ra *client.RequeueAfterError
	if err := dc.Reconcile(t.Context(), ns+"/web-pdb"); err != nil && !errors.As(err, &ra) {
		t.Fatalf("reconcile: %v", err)
	}
}

func TestDisruptionBudgetStatus(t *testing.T) {
	for _, tc := range []struct {
		name                                string
		pdb                                 *api.PodDisruptionBudget
		opts                                []podOpt // on the first pod
		allowed, healthy, desired, expected int32
	}{
		{"minAvailable 2 of 3 ready", newPDB("2", ""), nil, 1, 3, 2, 3},
		{"minAvailable 3", newPDB("3", ""), nil, 0, 3, 3, 3},
		{"one pod not ready", newPDB("2", ""), []podOpt{notReady}, 0, 2, 2, 3},
		{"maxUnavailable 1 of the deployment's 3", newPDB("", "1"), nil, 1, 3, 2, 3},
		{"minAvailable 50% rounds up", newPDB("50%", ""), nil, 1, 3, 2, 3},
		{"a deleting pod is not healthy", newPDB("", "1"), []podOpt{terminating}, 0, 2, 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, dc, _ := pdbFixture(t, tc.pdb, tc.opts...)
			reconcilePDB(t, dc)
			st := get[*api.PodDisruptionBudget](t, c, ns, "web-pdb").Status
			if st.DisruptionsAllowed != tc.allowed || st.CurrentHealthy != tc.healthy || st.DesiredHealthy != tc.desired || st.ExpectedPods != tc.expected || st.ObservedGeneration != 1 {
				t.Errorf("status allowed %d healthy %d desired %d expected %d (observed %d), want %d %d %d %d",
					st.DisruptionsAllowed, st.CurrentHealthy, st.DesiredHealthy, st.ExpectedPods, st.ObservedGeneration, tc.allowed, tc.healthy, tc.desired, tc.expected)
			}
			cond := apimeta.FindStatusCondition(st.Conditions, api.DisruptionAllowedCondition)
			wantStatus, wantReason := metav1.ConditionFalse, api.InsufficientPodsReason
			if tc.allowed > 0 {
				wantStatus, wantReason = metav1.ConditionTrue, api.SufficientPodsReason
			}
			if cond == nil || cond.Status != wantStatus || cond.Reason != wantReason {
				t.Errorf("condition %+v, want %s %s", cond, wantStatus, wantReason)
			}
		})
	}
}

func TestDisruptionBudgetEvictedPods(t *testing.T) {
	c, dc, ev := pdbFixture(t, newPDB("2", ""))
	reconcilePDB(t, dc)
	// The eviction handler spent the disruption on web-a a minute ago; the
	// pod is not gone yet: it does not count as healthy.
	pdb := get[*api.PodDisruptionBudget](t, c, ns, "web-pdb")
	pdb.Status.DisruptionsAllowed = 0
	pdb.Status.DisruptedPods = map[string]api.Time{"web-a": api.NewTime(t0.Add(-time.Minute))}
	if _, err := c.UpdateStatus(t.Context(), pdb); err != nil {
		t.Fatal(err)
	}
	reconcilePDB(t, dc)
	st := get[*api.PodDisruptionBudget](t, c, ns, "web-pdb").Status
	if st.CurrentHealthy != 2 || st.DisruptionsAllowed != 0 || len(st.DisruptedPods) != 1 {
		t.Errorf("status %+v: the evicted pod counted", st)
	}
	// Two minutes after the eviction the pod is still there: it counts again.
	dc.now = func() time.Time { return t0.Add(90 * time.Second) }
	reconcilePDB(t, dc)
	st = get[*api.PodDisruptionBudget](t, c, ns, "web-pdb").Status
	if st.CurrentHealthy != 3 || st.DisruptionsAllowed != 1 || len(st.DisruptedPods) != 0 {
		t.Errorf("status %+v after the eviction expired", st)
	}
	if evs := ev.take(); len(evs) != 1 || evs[0] != "Warning NotDeleted Pod was expected by PDB lab/web-pdb to be deleted but it wasn't" {
		t.Errorf("events %q", evs)
	}
}

func TestDisruptionBudgetFailsSafe(t *testing.T) {
	// A pod whose controller has no scale (a Job's) with maxUnavailable.
	c, dc, ev := pdbFixture(t, newPDB("", "1"), func(p *api.Pod) {
		p.OwnerReferences = []api.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "pi", UID: "job-uid", Controller: ptr(true)}}
	})
	reconcilePDB(t, dc)
	st := get[*api.PodDisruptionBudget](t, c, ns, "web-pdb").Status
	cond := apimeta.FindStatusCondition(st.Conditions, api.DisruptionAllowedCondition)
	if st.DisruptionsAllowed != 0 || cond == nil || cond.Reason != api.SyncFailedReason || cond.Message != `found no controllers for pod "web-a"` {
		t.Errorf("status %+v condition %+v", st, cond)
	}
	if evs := ev.take(); len(evs) != 1 || evs[0] != `Warning CalculateExpectedPodCountFailed Failed to calculate the number of expected pods: found no controllers for pod "web-a"` {
		t.Errorf("events %q", evs)
	}
	pdb := get[*api.PodDisruptionBudget](t, c, ns, "web-pdb")
	if got := api.DisruptionDeniedMessage(pdb); got != `The disruption budget web-pdb does not allow evicting pods currently because it failed sync: found no controllers for pod "web-a"` {
		t.Errorf("denied message %q", got)
	}
}

func TestDisruptionBudgetSelectors(t *testing.T) {
	none := newPDB("1", "")
	none.Spec.Selector = nil
	c, dc, ev := pdbFixture(t, none)
	reconcilePDB(t, dc)
	if st := get[*api.PodDisruptionBudget](t, c, ns, "web-pdb").Status; st.ExpectedPods != 0 || st.DisruptionsAllowed != 0 {
		t.Errorf("no selector: status %+v, want no pods", st)
	}
	if evs := ev.take(); len(evs) != 1 || evs[0] != "Normal NoPods No matching pods found" {
		t.Errorf("events %q", evs)
	}
	all := newPDB("1", "")
	all.Spec.Selector = &api.LabelSelector{}
	c, dc, _ = pdbFixture(t, all)
	reconcilePDB(t, dc)
	if st := get[*api.PodDisruptionBudget](t, c, ns, "web-pdb").Status; st.ExpectedPods != 3 || st.DisruptionsAllowed != 2 {
		t.Errorf("{} selector: status %+v, want every pod of the namespace", st)
	}
}
