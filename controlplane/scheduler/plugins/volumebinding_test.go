package plugins

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/controlplane/scheduler/framework"
	"skiff.dev/skiff/internal/testwait"
)

func vbClaim(name, class, volume string) *api.PersistentVolumeClaim {
	c := &api.PersistentVolumeClaim{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"}}
	c.Spec.AccessModes = []string{api.ReadWriteOnce}
	c.Spec.StorageClassName = &class
	c.Spec.Resources.Requests = api.ResourceList{api.ResourceStorage: resource.MustParse("1Gi")}
	c.Spec.VolumeName = volume
	if volume != "" {
		c.Status.Phase = api.ClaimBound
	}
	return c
}

func vbVolume(name, class, size, node string) *api.PersistentVolume {
	pv := &api.PersistentVolume{ObjectMeta: api.ObjectMeta{Name: name}}
	pv.Spec.Capacity = api.ResourceList{api.ResourceStorage: resource.MustParse(size)}
	pv.Spec.AccessModes = []string{api.ReadWriteOnce}
	pv.Spec.StorageClassName = class
	pv.Spec.HostPath = &api.HostPathVolumeSource{Path: "/mnt/" + name}
	if node != "" {
		pv.Spec.NodeAffinity = &api.VolumeNodeAffinity{Required: &api.NodeSelector{NodeSelectorTerms: []api.NodeSelectorTerm{term(req(api.LabelHostname, "In", node))}}}
	}
	pv.Status.Phase = api.VolumeAvailable
	return pv
}

func wffc(name, provisioner string, topo ...string) *api.StorageClass {
	mode := api.VolumeBindingWaitForFirstConsumer
	sc := &api.StorageClass{ObjectMeta: api.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
	if len(topo) > 0 {
		sc.AllowedTopologies = []api.TopologySelectorTerm{{MatchLabelExpressions: []api.TopologySelectorLabelRequirement{{Key: api.LabelHostname, Values: topo}}}}
	}
	return sc
}

func usesClaims(names ...string) func(*api.Pod) {
	return func(p *api.Pod) {
		for _, n := range names {
			p.Spec.Volumes = append(p.Spec.Volumes, api.Volume{Name: n, PersistentVolumeClaim: &api.PersistentVolumeClaimVolumeSource{ClaimName: n}})
		}
	}
}

// runningVolumeBinding is the plugin with its informers synced on a fake
// API holding objs.
func runningVolumeBinding(t *testing.T, objs ...api.Object) (*VolumeBinding, *fake.Client) {
	t.Helper()
	c := fake.New(objs...)
	pl := NewVolumeBinding(c, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go pl.Run(ctx, func() {})
	if !pl.WaitForSync(ctx) {
		t.Fatal("informers did not sync")
	}
	return pl, c
}

func TestVolumeBindingFilter(t *testing.T) {
	none := ""
	noClass := vbClaim("noclass", "", "")
	noClass.Spec.StorageClassName = &none
	selected := vbClaim("selected", "local-path", "")
	selected.Annotations = map[string]string{api.AnnotationSelectedNode: "n2"}
	deleting := vbClaim("deleting", "local-path", "")
	deleting.Finalizers = []string{api.FinalizerPVCProtection}
	pl, c := runningVolumeBinding(t,
		api.LocalPathClass(), wffc("local-storage", api.NoProvisioner), wffc("zoned", "example.com/disk", "n1"),
		&api.StorageClass{ObjectMeta: api.ObjectMeta{Name: "now"}, Provisioner: api.NoProvisioner},
		vbVolume("pv-n1", "local-storage", "5Gi", "n1"), vbVolume("pv-bound-n2", "", "1Gi", "n2"),
		vbClaim("on-n2", "", "pv-bound-n2"), vbClaim("lost", "", "pv-gone"), vbClaim("new", "local-path", ""),
		vbClaim("static", "local-storage", ""), vbClaim("zoned", "zoned", ""), vbClaim("immediate", "now", ""), noClass,
		selected, deleting)
	if err := c.Delete(context.Background(), api.MustKindOf(&api.PersistentVolumeClaim{}), "default", "deleting", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwaitDeleting(t, pl, "deleting")
	n1, n2 := nodeInfo(testNode("n1", nil)), nodeInfo(testNode("n2", nil))
	for _, tc := range []struct {
		name           string
		claims         []string
		n1, n2         framework.Code
		reason         string // of a rejected node
		preFilterError string
		skip           bool // PreFilter says Skip: Filter does not run
	}{
		{name: "no claims", skip: true},
		{name: "bound to n2's volume", claims: []string{"on-n2"}, n1: framework.UnschedulableAndUnresolvable, n2: framework.Success, reason: ReasonNodeConflict},
		{name: "volume gone", claims: []string{"lost"}, n1: framework.UnschedulableAndUnresolvable, n2: framework.UnschedulableAndUnresolvable, reason: ReasonPVNotExist},
		{name: "local-path provisions anywhere", claims: []string{"new"}, n1: framework.Success, n2: framework.Success},
		{name: "a static local volume on n1 only", claims: []string{"static"}, n1: framework.Success, n2: framework.UnschedulableAndUnresolvable, reason: ReasonBindConflict},
		{name: "allowedTopologies", claims: []string{"zoned"}, n1: framework.Success, n2: framework.UnschedulableAndUnresolvable, reason: ReasonBindConflict},
		{name: "provisioning for n2 already", claims: []string{"selected"}, n1: framework.UnschedulableAndUnresolvable, n2: framework.Success, reason: ReasonBindConflict},
		{name: "bound on n2 and a static volume on n1", claims: []string{"on-n2", "static"}, n1: framework.UnschedulableAndUnresolvable, n2: framework.UnschedulableAndUnresolvable},
		{name: "missing claim", claims: []string{"nope"}, preFilterError: `persistentvolumeclaim "nope" not found`},
		{name: "claim being deleted", claims: []string{"deleting"}, preFilterError: `persistentvolumeclaim "deleting" is being deleted`},
		{name: "unbound immediate", claims: []string{"immediate"}, preFilterError: ReasonUnboundImmediate},
		{name: "unbound without a class", claims: []string{"noclass"}, preFilterError: ReasonUnboundImmediate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("p", usesClaims(tc.claims...))
			state := framework.NewCycleState()
			st := pl.PreFilter(context.Background(), state, pod)
			if tc.preFilterError != "" {
				checkStatus(t, st, framework.UnschedulableAndUnresolvable, tc.preFilterError)
				return
			}
			if tc.skip {
				if st.Code() != framework.Skip {
					t.Fatalf("PreFilter: %v %q, want Skip", st.Code(), st.Message())
				}
				return
			}
			if !st.IsSuccess() {
				t.Fatalf("PreFilter: %v", st.Message())
			}
			for _, nc := range []struct {
				ni   *framework.NodeInfo
				want framework.Code
			}{{n1, tc.n1}, {n2, tc.n2}} {
				got := pl.Filter(context.Background(), state, pod, nc.ni)
				if got.Code() != nc.want {
					t.Errorf("%s: %v %q, want %v", nc.ni.Node.Name, got.Code(), got.Message(), nc.want)
				}
				if got.IsRejected() && tc.reason != "" && got.Reasons()[0] != tc.reason {
					t.Errorf("%s: reasons %q, want %q", nc.ni.Node.Name, got.Reasons(), tc.reason)
				}
			}
		})
	}
}

// testwaitDeleting waits until the plugin's cache shows the claim deleting.
func testwaitDeleting(t *testing.T, pl *VolumeBinding, name string) {
	t.Helper()
	testwait.For(t, 10*time.Second, "the cache to show claim "+name+" deleting", func() bool {
		o, ok := pl.claims.Get("default", name)
		return ok && o.GetObjectMeta().DeletionTimestamp != nil
	})
}

// Two pods, one free static volume: Reserve hands it to the first only;
// PreBind writes the volume's claimRef, then waits for the binding the
// persistent volume controller completes; a claim to provision gets the
// node annotation. Unreserve frees what Reserve held.
func TestVolumeBindingReserveAndPreBind(t *testing.T) {
	pl, c := runningVolumeBinding(t, wffc("local-storage", api.NoProvisioner), api.LocalPathClass(),
		vbVolume("pv1", "local-storage", "5Gi", "n1"), vbClaim("a", "local-storage", ""), vbClaim("b", "local-storage", ""), vbClaim("new", "local-path", ""))
	pl.BindTimeout = 5 * time.Second
	ctx := context.Background()
	n1 := nodeInfo(testNode("n1", nil))
	cycle := func(pod *api.Pod) (*framework.CycleState, *framework.Status) {
		state := framework.NewCycleState()
		if st := pl.PreFilter(ctx, state, pod); !st.IsSuccess() {
			return state, st
		}
		if st := pl.Filter(ctx, state, pod, n1); !st.IsSuccess() {
			return state, st
		}
		return state, pl.Reserve(ctx, state, pod, "n1")
	}
	podA, podB := testPod("pa", usesClaims("a")), testPod("pb", usesClaims("b"))
	stateA, st := cycle(podA)
	if !st.IsSuccess() {
		t.Fatalf("pod a: %v", st.Message())
	}
	if _, st := cycle(podB); st.IsSuccess() {
		t.Fatal("pod b got the volume pod a holds")
	}
	// PreBind writes pv1's claimRef; play the controller's part once it is there.
	done := make(chan error, 1)
	go func() { done <- bindWhenReserved(ctx, c, "pv1", "a") }()
	if st := pl.PreBind(ctx, stateA, podA, "n1"); !st.IsSuccess() {
		t.Fatalf("PreBind: %v", st.Message())
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	pv, _ := client.Get[*api.PersistentVolume](ctx, c, "", "pv1")
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != "a" || pv.Annotations[api.AnnotationBoundByController] != "yes" {
		t.Errorf("pv1 after PreBind: claimRef %+v, annotations %v", pv.Spec.ClaimRef, pv.Annotations)
	}

	// A local-path claim: the node annotation, and a wait that times out
	// when no provisioner answers.
	podN := testPod("pn", usesClaims("new"))
	stateN, st := cycle(podN)
	if !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	pl.BindTimeout = 100 * time.Millisecond
	if st := pl.PreBind(ctx, stateN, podN, "n1"); st.IsSuccess() || st.Message() != "binding volumes: context deadline exceeded" {
		t.Errorf("PreBind with no provisioner: %v", st.Message())
	}
	claim, _ := client.Get[*api.PersistentVolumeClaim](ctx, c, "default", "new")
	if claim.Annotations[api.AnnotationSelectedNode] != "n1" {
		t.Errorf("claim annotations %v", claim.Annotations)
	}
	pl.Unreserve(ctx, stateN, podN, "n1")
}

// bindWhenReserved waits (watching the API) until volume's claimRef names
// claim, then binds the claim as the persistent volume controller would.
func bindWhenReserved(ctx context.Context, c *fake.Client, volume, claim string) error {
	w, err := c.Watch(ctx, api.MustKindOf(&api.PersistentVolume{}), "", api.ListOptions{})
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.Events() {
		pv, ok := ev.Object.(*api.PersistentVolume)
		if !ok || pv.Name != volume || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != claim {
			continue
		}
		cl, err := client.Get[*api.PersistentVolumeClaim](ctx, c, "default", claim)
		if err != nil {
			return err
		}
		cl.Spec.VolumeName = volume
		if cl, err = client.Update(ctx, c, cl); err != nil {
			return err
		}
		cl.Status.Phase = api.ClaimBound
		_, err = c.UpdateStatus(ctx, cl)
		return err
	}
	return w.Err()
}
