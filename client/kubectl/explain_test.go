package kubectl

import (
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

func ownedBy(kind, name, uid string) []api.OwnerReference {
	yes := true
	return []api.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: &yes}}
}

func readyCondition(ok bool) []api.PodCondition {
	s := api.ConditionFalse
	if ok {
		s = api.ConditionTrue
	}
	return []api.PodCondition{{Type: api.PodReady, Status: s}}
}

// Each node of the explanation says what the controller's rules decide
// there: a running pod, a node left out by the nodeSelector, a taint the
// template does not tolerate, a pod still Pending with the scheduler's
// message, a pod whose image cannot be pulled.
func TestExplainDaemonSet(t *testing.T) {
	node := func(name string, labels map[string]string, taints ...api.Taint) *api.Node {
		return &api.Node{ObjectMeta: api.ObjectMeta{Name: name, Labels: labels}, Spec: api.NodeSpec{Taints: taints}}
	}
	gpu := map[string]string{"gpu": "yes"}
	ds := &api.DaemonSet{ObjectMeta: api.ObjectMeta{Name: "agent", Namespace: "kube-system", UID: "ds"},
		Spec: api.DaemonSetSpec{Template: api.PodTemplateSpec{Spec: api.PodSpec{NodeSelector: gpu,
			Containers: []api.Container{{Name: "agent", Image: "agent:1"}}}}}}
	pod := func(name, node string, st api.PodStatus) *api.Pod {
		p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "kube-system", OwnerReferences: ownedBy("DaemonSet", "agent", "ds")}, Status: st}
		if node != "" {
			p.Spec.NodeName = node
		} else {
			p.Spec.Affinity = &api.Affinity{NodeAffinity: &api.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &api.NodeSelector{
				NodeSelectorTerms: []api.NodeSelectorTerm{{MatchFields: []api.NodeSelectorRequirement{{Key: "metadata.name", Operator: "In", Values: []string{"d-pending"}}}}}}}}
		}
		return p
	}
	c := fake.New(ds,
		node("a-ready", gpu), node("b-plain", nil), node("c-tainted", gpu, api.Taint{Key: "dedicated", Value: "ml", Effect: api.TaintEffectNoSched}),
		node("d-pending", gpu), node("e-pull", gpu), node("f-new", gpu),
		pod("agent-a", "a-ready", api.PodStatus{Phase: api.PodRunning, Conditions: readyCondition(true)}),
		pod("agent-d", "", api.PodStatus{Phase: api.PodPending, Conditions: []api.PodCondition{{Type: api.PodScheduled, Status: api.ConditionFalse, Message: "0/6 nodes are available: 1 Insufficient cpu."}}}),
		pod("agent-e", "e-pull", api.PodStatus{Phase: api.PodPending, ContainerStatuses: []api.ContainerStatus{{Name: "agent",
			State: api.ContainerState{Waiting: &api.ContainerStateWaiting{Reason: "ErrImagePull", Message: "pull agent:1: not found"}}}}}),
		// Another DaemonSet's pod is not this one's.
		&api.Pod{ObjectMeta: api.ObjectMeta{Name: "other", Namespace: "kube-system", OwnerReferences: ownedBy("DaemonSet", "x", "other")}, Spec: api.PodSpec{NodeName: "f-new"}},
	)
	rows, err := ExplainDaemonSet(t.Context(), c, ds, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"a-ready":   {"agent-a", "Running, Ready on a-ready"},
		"b-plain":   {"", "not eligible: node doesn't match nodeSelector gpu=yes"},
		"c-tainted": {"", "not eligible: untolerated taint {dedicated: ml} (NoSchedule)"},
		"d-pending": {"agent-d", "Pending, not scheduled: 0/6 nodes are available: 1 Insufficient cpu."},
		"e-pull":    {"agent-e", "container agent waiting (ErrImagePull): pull agent:1: not found"},
		"f-new":     {"", "no pod yet"},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v, want one per node", rows)
	}
	for _, r := range rows {
		w := want[r.Name]
		if r.Pod != w[0] || !strings.Contains(r.Status, w[1]) {
			t.Errorf("%s: pod %q status %q, want pod %q status with %q", r.Name, r.Pod, r.Status, w[0], w[1])
		}
	}
}

// With OrderedReady, the ordinals after one that is not Running and Ready
// say they wait for it; each says what its claim does.
func TestExplainStatefulSet(t *testing.T) {
	three := int32(3)
	set := &api.StatefulSet{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default", UID: "sts"},
		Spec: api.StatefulSetSpec{Replicas: &three, VolumeClaimTemplates: []api.PersistentVolumeClaim{{ObjectMeta: api.ObjectMeta{Name: "www"}}}}}
	c := fake.New(set,
		&api.Pod{ObjectMeta: api.ObjectMeta{Name: "web-0", Namespace: "default", OwnerReferences: ownedBy("StatefulSet", "web", "sts")},
			Spec: api.PodSpec{NodeName: "n1"}, Status: api.PodStatus{Phase: api.PodRunning, Conditions: readyCondition(true)}},
		&api.Pod{ObjectMeta: api.ObjectMeta{Name: "web-1", Namespace: "default", OwnerReferences: ownedBy("StatefulSet", "web", "sts")},
			Spec: api.PodSpec{NodeName: "n2"}, Status: api.PodStatus{Phase: api.PodRunning, Conditions: readyCondition(false)}},
		&api.PersistentVolumeClaim{ObjectMeta: api.ObjectMeta{Name: "www-web-0", Namespace: "default"}, Status: api.PersistentVolumeClaimStatus{Phase: "Bound"}},
		&api.PersistentVolumeClaim{ObjectMeta: api.ObjectMeta{Name: "www-web-1", Namespace: "default"}, Status: api.PersistentVolumeClaimStatus{Phase: "Pending"}},
	)
	rows, err := ExplainStatefulSet(t.Context(), c, set, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"web-0: Running, Ready on n1; claim www-web-0 Bound",
		"web-1: Running, not Ready: a container's readiness probe has not passed; claim www-web-1 Pending",
		"web-2: not made yet: waiting for web-1 to be Running and Ready (podManagementPolicy OrderedReady); claim www-web-2 not made yet",
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v", rows)
	}
	for i, r := range rows {
		if got := r.Name + ": " + r.Status; !strings.HasPrefix(got, want[i]) {
			t.Errorf("row %d: %q, want %q", i, got, want[i])
		}
	}
	// Parallel: nothing waits for anything.
	set.Spec.PodManagementPolicy = api.ParallelPodManagement
	rows, _ = ExplainStatefulSet(t.Context(), c, set, time.Now())
	if !strings.HasPrefix(rows[2].Status, "not made yet: the statefulset controller makes it") {
		t.Errorf("parallel web-2: %q", rows[2].Status)
	}
}
