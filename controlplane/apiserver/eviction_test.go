package apiserver

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The eviction subresource with a PodDisruptionBudget: the status the
// disruption controller would write is written by the test; evictions
// spend it and are refused with kube-apiserver's 429 once it is spent.
func TestEvictionHonoursDisruptionBudget(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	app := map[string]string{"app": "web"}
	for _, n := range []string{"web-a", "web-b", "web-c"} {
		p := pod(n, app)
		p.Spec.NodeName = "n1"
		out, err := e.local.Create(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		r := out.(*api.Pod)
		r.Status.Phase = api.PodRunning
		r.Status.Conditions = []api.PodCondition{{Type: api.PodReady, Status: api.ConditionTrue}}
		if _, err := e.local.UpdateStatus(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	two := intstr.FromInt32(2)
	out, err := e.local.Create(ctx, &api.PodDisruptionBudget{ObjectMeta: api.ObjectMeta{Name: "web-pdb", Namespace: "default"},
		Spec: api.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &api.LabelSelector{MatchLabels: app}}})
	if err != nil {
		t.Fatal(err)
	}
	evict := func(name string) (int, string) {
		code, b := e.do("POST", "/api/v1/namespaces/default/pods/"+name+"/eviction",
			`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"`+name+`","namespace":"default"}}`)
		return code, string(b)
	}
	// The controller has not looked at the budget yet: wait (429).
	if code, b := evict("web-a"); code != 429 || !strings.Contains(b, "The disruption budget web-pdb is still being processed by the server.") {
		t.Fatalf("eviction before the budget's status: %d %s", code, b)
	}
	pdb := out.(*api.PodDisruptionBudget)
	pdb.Status = api.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 1, CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3}
	if _, err := e.local.UpdateStatus(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	if code, b := evict("web-a"); code != 201 {
		t.Fatalf("first eviction: %d %s", code, b)
	}
	a, err := client.Get[*api.Pod](ctx, e.local, "default", "web-a")
	if err != nil || a.DeletionTimestamp == nil {
		t.Fatalf("web-a not deleting after its eviction: %v", err)
	}
	if !hasCondition(a, api.PodDisruptionTarget, "EvictionByEvictionAPI") {
		t.Errorf("web-a conditions %+v, want DisruptionTarget EvictionByEvictionAPI", a.Status.Conditions)
	}
	got, err := client.Get[*api.PodDisruptionBudget](ctx, e.local, "default", "web-pdb")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.DisruptionsAllowed != 0 || got.Status.DisruptedPods["web-a"].IsZero() {
		t.Errorf("budget after one eviction: %+v", got.Status)
	}
	code, b := evict("web-b")
	if code != 429 {
		t.Fatalf("second eviction: %d %s, want 429", code, b)
	}
	st := decode[api.Status](t, []byte(b))
	if st.Reason != api.ReasonTooManyRequests || st.Message != "Cannot evict pod as it would violate the pod's disruption budget." ||
		st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != "DisruptionBudget" ||
		st.Details.Causes[0].Message != "The disruption budget web-pdb does not allow evicting pods currently" {
		t.Errorf("refusal %s", b)
	}
	// Once the controller counted web-a out, the cause has the numbers.
	got.Status.CurrentHealthy = 2
	if _, err := e.local.UpdateStatus(ctx, got); err != nil {
		t.Fatal(err)
	}
	if code, b := evict("web-b"); code != 429 || !strings.Contains(b, "The disruption budget web-pdb needs 2 healthy pods and has 2 currently") {
		t.Errorf("refusal after the controller's count: %d %s", code, b)
	}
	// A pod that is not running is not protected.
	pending := pod("web-new", app)
	if _, err := e.local.Create(ctx, pending); err != nil {
		t.Fatal(err)
	}
	if code, b := evict("web-new"); code != 201 {
		t.Errorf("eviction of a Pending pod: %d %s", code, b)
	}
}

func hasCondition(p *api.Pod, typ, reason string) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == typ && c.Status == api.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}
