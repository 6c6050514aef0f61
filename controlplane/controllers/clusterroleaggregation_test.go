package controllers

import (
	"context"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

// The example of Kubernetes' RBAC docs: a ClusterRole "monitoring"
// aggregates the roles labelled rbac.example.com/aggregate-to-monitoring;
// a matching role's rules land in it, in name order, each once; a role
// without the label does not.
func TestClusterRoleAggregation(t *testing.T) {
	label := "rbac.example.com/aggregate-to-monitoring"
	monitoring := &api.ClusterRole{ObjectMeta: api.ObjectMeta{Name: "monitoring"},
		AggregationRule: &api.AggregationRule{ClusterRoleSelectors: []api.LabelSelector{{MatchLabels: map[string]string{label: "true"}}}}}
	endpoints := &api.ClusterRole{ObjectMeta: api.ObjectMeta{Name: "monitoring-endpoints", Labels: map[string]string{label: "true"}},
		Rules: []api.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services", "endpointslices", "pods"}, Verbs: []string{"get", "list", "watch"}}}}
	again := &api.ClusterRole{ObjectMeta: api.ObjectMeta{Name: "monitoring-again", Labels: map[string]string{label: "true"}},
		Rules: []api.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "endpointslices", "pods"}, Verbs: []string{"get", "list", "watch"}},
			{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
		}}
	other := &api.ClusterRole{ObjectMeta: api.ObjectMeta{Name: "secret-reader"},
		Rules: []api.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}}
	c := fake.New(monitoring, endpoints, again, other)
	a := NewClusterRoleAggregationController(c, newStaticLister(monitoring, endpoints, again, other), testLogger(t))
	if keys := a.Keys(); len(keys) != 1 || keys[0] != "monitoring" {
		t.Fatalf("keys %v, want the aggregated role only", keys)
	}
	if err := a.Reconcile(context.Background(), "monitoring"); err != nil {
		t.Fatal(err)
	}
	got := get[*api.ClusterRole](t, c, "", "monitoring").Rules
	want := []api.PolicyRule{again.Rules[0], again.Rules[1]} // monitoring-again sorts first; its first rule equals endpoints'
	if len(got) != 2 || !samePolicy(got[0], want[0]) || !samePolicy(got[1], want[1]) {
		t.Fatalf("aggregated rules %+v, want %+v", got, want)
	}
	// Settled: a second pass writes nothing.
	c.ClearActions()
	a = NewClusterRoleAggregationController(c, newStaticLister(get[*api.ClusterRole](t, c, "", "monitoring"), endpoints, again, other), testLogger(t))
	if err := a.Reconcile(context.Background(), "monitoring"); err != nil {
		t.Fatal(err)
	}
	if w := writes(c); len(w) != 0 {
		t.Fatalf("writes when settled: %v", w)
	}
}

func samePolicy(a, b api.PolicyRule) bool {
	return equal(a.Verbs, b.Verbs) && equal(a.APIGroups, b.APIGroups) && equal(a.Resources, b.Resources) && equal(a.NonResourceURLs, b.NonResourceURLs)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
