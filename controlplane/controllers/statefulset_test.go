package controllers

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

// StatefulSet controller tests: the tutorial's web (serviceName nginx, a
// claim template www), reconciled by hand; the test plays the scheduler
// and the nodes (run, ready, gone).

type stsFixture struct {
	t   *testing.T
	c   *fake.Client
	ev  *events
	sc  *StatefulSetController
	key string
	clk time.Time
}

func newWeb(replicas int32, opts ...func(*api.StatefulSet)) *api.StatefulSet {
	s := &api.StatefulSet{
		ObjectMeta: api.ObjectMeta{Name: "web", Namespace: ns},
		Spec: api.StatefulSetSpec{
			Replicas:    &replicas,
			ServiceName: "nginx",
			Selector:    &api.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}},
			Template: api.PodTemplateSpec{
				ObjectMeta: api.ObjectMeta{Labels: map[string]string{"app": "nginx"}},
				Spec: api.PodSpec{Containers: []api.Container{{Name: "nginx", Image: "registry.k8s.io/nginx-slim:0.21",
					VolumeMounts: []api.VolumeMount{{Name: "www", MountPath: "/usr/share/nginx/html"}}}}},
			},
			VolumeClaimTemplates: []api.PersistentVolumeClaim{{
				ObjectMeta: api.ObjectMeta{Name: "www"},
				Spec: api.PersistentVolumeClaimSpec{AccessModes: []string{"ReadWriteOnce"},
					Resources: api.VolumeResourceRequirements{Requests: api.ResourceList{"storage": resource.MustParse("1Gi")}}},
			}},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func newSTSFixture(t *testing.T, set *api.StatefulSet) *stsFixture {
	t.Helper()
	f := &stsFixture{t: t, c: fake.New(), ev: &events{}, key: api.KeyOf(set), clk: t0}
	f.c.StopPodsAtOnce(false)
	f.c.SetClock(func() time.Time { return f.clk })
	if _, err := f.c.Create(t.Context(), set); err != nil {
		t.Fatalf("create statefulset: %v", err)
	}
	f.sc = NewStatefulSetController(f.c, fakeLister{f.c, statefulSetKind()}, fakeLister{f.c, podKind()},
		fakeLister{f.c, controllerRevisionKind()}, fakeLister{f.c, api.MustKindOf(&api.PersistentVolumeClaim{})}, f.ev, testLogger(t))
	f.sc.now = func() time.Time { return f.clk }
	return f
}

func (f *stsFixture) reconcile() {
	f.t.Helper()
	err := f.sc.Reconcile(f.t.Context(), f.key)
	var ra *client.RequeueAfterError
	if err != nil && !errors.As(err, &ra) {
		f.t.Fatalf("reconcile: %v", err)
	}
}

func (f *stsFixture) set() *api.StatefulSet { return get[*api.StatefulSet](f.t, f.c, ns, "web") }

// live lists the pods not being deleted, by name.
func (f *stsFixture) live() []string {
	var out []string
	for _, p := range list[*api.Pod](f.t, f.c, ns) {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

func (f *stsFixture) claims() []string {
	var out []string
	for _, c := range list[*api.PersistentVolumeClaim](f.t, f.c, ns) {
		out = append(out, c.Name)
	}
	slices.Sort(out)
	return out
}

// ready makes a pod Running and Ready, as its node would.
func (f *stsFixture) ready(name string) {
	f.t.Helper()
	p := get[*api.Pod](f.t, f.c, ns, name)
	p.Status.Phase = api.PodRunning
	p.Status.Conditions = []api.PodCondition{{Type: api.PodReady, Status: api.ConditionTrue, LastTransitionTime: api.NewTime(f.clk)}}
	if _, err := f.c.UpdateStatus(f.t.Context(), p); err != nil {
		f.t.Fatal(err)
	}
}

// gone removes the pods being deleted, as their nodes would.
func (f *stsFixture) gone() {
	f.t.Helper()
	for _, p := range list[*api.Pod](f.t, f.c, ns) {
		if p.DeletionTimestamp != nil {
			if err := f.c.Delete(f.t.Context(), podKind(), ns, p.Name, api.DeleteOptions{GracePeriodSeconds: ptr[int64](0)}); err != nil {
				f.t.Fatal(err)
			}
		}
	}
}

func TestStatefulSetOrderedReady(t *testing.T) {
	f := newSTSFixture(t, newWeb(2))
	f.reconcile()
	if got := f.live(); !slices.Equal(got, []string{"web-0"}) {
		t.Fatalf("pods %v, want web-0 alone first", got)
	}
	if got := f.claims(); !slices.Equal(got, []string{"www-web-0"}) {
		t.Fatalf("claims %v, want www-web-0", got)
	}
	p := get[*api.Pod](t, f.c, ns, "web-0")
	rev := f.set().Status.UpdateRevision
	if p.Spec.Hostname != "web-0" || p.Spec.Subdomain != "nginx" || p.Labels[api.LabelStatefulSetPodName] != "web-0" ||
		p.Labels[api.LabelPodIndex] != "0" || p.Labels[api.LabelControllerRevisionHash] != rev || !strings.HasPrefix(rev, "web-") {
		t.Errorf("pod identity: hostname %q subdomain %q labels %v (revision %q)", p.Spec.Hostname, p.Spec.Subdomain, p.Labels, rev)
	}
	if len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].Name != "www" || p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "www-web-0" {
		t.Errorf("pod volumes %+v", p.Spec.Volumes)
	}
	c := get[*api.PersistentVolumeClaim](t, f.c, ns, "www-web-0")
	if c.Labels["app"] != "nginx" || len(c.OwnerReferences) != 0 {
		t.Errorf("claim labels %v owners %v (Retain: no owner)", c.Labels, c.OwnerReferences)
	}
	evs := f.ev.take()
	if !slices.Contains(evs, "Normal SuccessfulCreate create Claim www-web-0 Pod web-0 in StatefulSet web success") ||
		!slices.Contains(evs, "Normal SuccessfulCreate create Pod web-0 in StatefulSet web successful") {
		t.Errorf("events %q", evs)
	}
	f.reconcile() // web-0 not Ready: web-1 waits
	if got := f.live(); len(got) != 1 {
		t.Fatalf("pods %v: web-1 made before web-0 was Ready", got)
	}
	f.ready("web-0")
	f.reconcile()
	if got := f.live(); !slices.Equal(got, []string{"web-0", "web-1"}) {
		t.Fatalf("pods %v, want web-1 once web-0 is Ready", got)
	}
	f.ready("web-1")
	f.reconcile()
	st := f.set().Status
	if st.Replicas != 2 || st.ReadyReplicas != 2 || st.AvailableReplicas != 2 || st.UpdatedReplicas != 2 || st.CurrentReplicas != 2 ||
		st.CurrentRevision != st.UpdateRevision || st.ObservedGeneration != 1 {
		t.Errorf("status %+v", st)
	}

	// A deleted pod comes back with the same name and claim.
	if err := f.c.Delete(t.Context(), podKind(), ns, "web-0", api.DeleteOptions{GracePeriodSeconds: ptr[int64](0)}); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	if got := f.live(); !slices.Equal(got, []string{"web-0", "web-1"}) || !slices.Equal(f.claims(), []string{"www-web-0", "www-web-1"}) {
		t.Fatalf("after delete pod web-0: pods %v claims %v", got, f.claims())
	}

	// Scale down: the highest ordinal goes; its claim stays (Retain).
	f.ready("web-0")
	s := f.set()
	s.Spec.Replicas = ptr[int32](1)
	if _, err := f.c.Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	f.gone()
	if got := f.live(); !slices.Equal(got, []string{"web-0"}) || !slices.Equal(f.claims(), []string{"www-web-0", "www-web-1"}) {
		t.Fatalf("after scale to 1: pods %v claims %v", got, f.claims())
	}
}

func TestStatefulSetParallel(t *testing.T) {
	f := newSTSFixture(t, newWeb(3, func(s *api.StatefulSet) { s.Spec.PodManagementPolicy = api.ParallelPodManagement }))
	f.reconcile()
	if got := f.live(); !slices.Equal(got, []string{"web-0", "web-1", "web-2"}) {
		t.Fatalf("pods %v, want all three at once", got)
	}
}

func TestStatefulSetRollingUpdateWithPartition(t *testing.T) {
	f := newSTSFixture(t, newWeb(3, func(s *api.StatefulSet) {
		s.Spec.UpdateStrategy = api.StatefulSetUpdateStrategy{Type: api.RollingUpdate, RollingUpdate: &api.RollingUpdateStatefulSetStrategy{Partition: ptr[int32](1)}}
	}))
	for _, n := range []string{"web-0", "web-1", "web-2"} {
		f.reconcile()
		f.ready(n)
	}
	f.reconcile()
	old := f.set().Status.CurrentRevision
	s := f.set()
	s.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/nginx-slim:0.24"
	if _, err := f.c.Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	// From the highest ordinal down to the partition, one at a time.
	for _, n := range []string{"web-2", "web-1"} {
		f.reconcile()
		f.gone()
		f.reconcile()
		p := get[*api.Pod](t, f.c, ns, n)
		if p.Spec.Containers[0].Image != "registry.k8s.io/nginx-slim:0.24" {
			t.Fatalf("%s at %s, want the new image", n, p.Spec.Containers[0].Image)
		}
		f.ready(n)
	}
	f.reconcile()
	p0 := get[*api.Pod](t, f.c, ns, "web-0")
	st := f.set().Status
	if p0.Spec.Containers[0].Image != "registry.k8s.io/nginx-slim:0.21" || p0.Labels[api.LabelControllerRevisionHash] != old {
		t.Errorf("web-0 below the partition was updated: %s", p0.Spec.Containers[0].Image)
	}
	if st.CurrentRevision != old || st.UpdatedReplicas != 2 || st.CurrentReplicas != 1 {
		t.Errorf("status %+v, want current revision kept, 2 updated, 1 current", st)
	}
	// Partition 0 finishes the rollout, and the update revision becomes current.
	s = f.set()
	s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr[int32](0)
	if _, err := f.c.Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	f.gone()
	f.reconcile()
	f.ready("web-0")
	f.reconcile()
	if st := f.set().Status; st.CurrentRevision != st.UpdateRevision || st.CurrentReplicas != 3 {
		t.Errorf("after partition 0: status %+v", st)
	}
}

func TestStatefulSetOnDelete(t *testing.T) {
	f := newSTSFixture(t, newWeb(1, func(s *api.StatefulSet) { s.Spec.UpdateStrategy = api.StatefulSetUpdateStrategy{Type: api.OnDelete} }))
	f.reconcile()
	f.ready("web-0")
	s := f.set()
	s.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	if _, err := f.c.Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	if p := get[*api.Pod](t, f.c, ns, "web-0"); p.DeletionTimestamp != nil {
		t.Fatal("OnDelete deleted web-0 for a template change")
	}
	if err := f.c.Delete(t.Context(), podKind(), ns, "web-0", api.DeleteOptions{GracePeriodSeconds: ptr[int64](0)}); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	if p := get[*api.Pod](t, f.c, ns, "web-0"); p.Spec.Containers[0].Image != "nginx:2" {
		t.Errorf("web-0 made again at %s, want the new template", p.Spec.Containers[0].Image)
	}
}

func TestStatefulSetClaimRetentionPolicy(t *testing.T) {
	f := newSTSFixture(t, newWeb(2, func(s *api.StatefulSet) {
		s.Spec.PodManagementPolicy = api.ParallelPodManagement
		s.Spec.PersistentVolumeClaimRetentionPolicy = &api.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: api.DeletePVC, WhenScaled: api.DeletePVC}
	}))
	f.reconcile()
	f.ready("web-0")
	f.ready("web-1")
	f.reconcile()
	set := f.set()
	for _, n := range []string{"www-web-0", "www-web-1"} {
		c := get[*api.PersistentVolumeClaim](t, f.c, ns, n)
		if !api.IsControlledBy(c, set.UID) {
			t.Errorf("claim %s owners %v, want the set (whenDeleted: Delete)", n, c.OwnerReferences)
		}
	}
	web1 := get[*api.Pod](t, f.c, ns, "web-1")
	set.Spec.Replicas = ptr[int32](1)
	if _, err := f.c.Update(t.Context(), set); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	c := get[*api.PersistentVolumeClaim](t, f.c, ns, "www-web-1")
	if !api.IsControlledBy(c, web1.UID) {
		t.Errorf("condemned web-1's claim owners %v, want web-1 (whenScaled: Delete: the garbage collector removes it with the pod)", c.OwnerReferences)
	}
	if got := f.live(); !slices.Equal(got, []string{"web-0"}) {
		t.Errorf("pods %v after scale to 1", got)
	}
}

func TestStatefulSetFailedPodRecreated(t *testing.T) {
	f := newSTSFixture(t, newWeb(1))
	f.reconcile()
	p := get[*api.Pod](t, f.c, ns, "web-0")
	p.Status.Phase = api.PodFailed
	if _, err := f.c.UpdateStatus(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	f.reconcile() // deleted (no grace: it is finished)
	f.reconcile() // and made again
	if n := get[*api.Pod](t, f.c, ns, "web-0"); n.UID == p.UID {
		t.Fatal("the failed web-0 was not replaced")
	}
}

func TestParentAndOrdinal(t *testing.T) {
	for name, want := range map[string]int{"web-0": 0, "web-12": 12, "my-db-3": 3, "web": -1, "web-x": -1} {
		if _, got := parentAndOrdinal(name); got != want {
			t.Errorf("%s: ordinal %d, want %d", name, got, want)
		}
	}
	if parent, _ := parentAndOrdinal("my-db-3"); parent != "my-db" {
		t.Errorf("parent %q", parent)
	}
}
