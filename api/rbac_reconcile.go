package api

import (
	"maps"
	"reflect"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// Reconciling a role or binding with an expected one, as Kubernetes'
// reconciliation package (k8s.io/component-helpers/auth/rbac/reconciliation)
// does for the bootstrap policy at kube-apiserver's start and for `kubectl
// auth reconcile`: missing rules, aggregation selectors, subjects, labels
// and annotations are added; extra ones stay unless removeExtra; an
// existing object annotated rbac.authorization.kubernetes.io/autoupdate:
// "false" is protected and left as it is.

// Protected reports whether an existing object opted out of reconciling.
func Protected(m *ObjectMeta) bool { return m.Annotations[AnnotationRBACAutoUpdate] == "false" }

// ReconcileRules returns existing's rules reconciled with expected's and
// whether they changed: missing ones appended, or with removeExtra exactly
// expected's.
func ReconcileRules(existing, expected []PolicyRule, removeExtra bool) ([]PolicyRule, bool) {
	_, missing := Covers(existing, expected)
	if removeExtra {
		_, extra := Covers(expected, existing)
		if len(missing) > 0 || len(extra) > 0 {
			return slices.Clone(expected), true
		}
		return existing, false
	}
	if len(missing) == 0 {
		return existing, false
	}
	return append(slices.Clone(existing), missing...), true
}

// ReconcileMeta merges expected's labels and annotations into existing's
// (existing's values win for a key both have, as Kubernetes' merge keeps
// the later map: existing) and reports whether they changed.
func ReconcileMeta(existing *ObjectMeta, expected *ObjectMeta) bool {
	l, a := merged(expected.Labels, existing.Labels), merged(expected.Annotations, existing.Annotations)
	changed := !maps.Equal(l, existing.Labels) || !maps.Equal(a, existing.Annotations)
	existing.Labels, existing.Annotations = l, a
	return changed
}

func merged(base, over map[string]string) map[string]string {
	if base == nil && over == nil {
		return nil
	}
	out := map[string]string{}
	maps.Copy(out, base)
	maps.Copy(out, over)
	return out
}

// ReconcileClusterRole reconciles cur (an existing ClusterRole, modified
// in place) with expected, and reports whether cur changed. When both are
// aggregated, rules cur holds beyond expected's are its aggregation
// controller's and stay.
func ReconcileClusterRole(cur, expected *ClusterRole, removeExtra bool) bool {
	changed := ReconcileMeta(&cur.ObjectMeta, &expected.ObjectMeta)
	bothAggregated := expected.AggregationRule != nil && cur.AggregationRule != nil
	if rules, ch := ReconcileRules(cur.Rules, expected.Rules, removeExtra && !bothAggregated); ch {
		cur.Rules, changed = rules, true
	}
	switch {
	case expected.AggregationRule == nil && cur.AggregationRule != nil:
		cur.AggregationRule, changed = nil, true
	case expected.AggregationRule != nil:
		want := expected.AggregationRule.ClusterRoleSelectors
		if cur.AggregationRule == nil {
			cur.AggregationRule = &AggregationRule{}
		}
		have := cur.AggregationRule.ClusterRoleSelectors
		if removeExtra && !reflect.DeepEqual(have, want) {
			cur.AggregationRule.ClusterRoleSelectors, changed = slices.Clone(want), true
			break
		}
		for _, s := range want {
			if !slices.ContainsFunc(have, func(h LabelSelector) bool { return reflect.DeepEqual(h, s) }) {
				cur.AggregationRule.ClusterRoleSelectors = append(cur.AggregationRule.ClusterRoleSelectors, s)
				changed = true
			}
		}
	}
	return changed
}

// ReconcileSubjects returns existing's subjects with expected's missing
// ones appended (with removeExtra: expected's), and whether they changed.
func ReconcileSubjects(existing, expected []Subject, removeExtra bool) ([]Subject, bool) {
	if removeExtra {
		if slices.Equal(existing, expected) {
			return existing, false
		}
		return slices.Clone(expected), true
	}
	out, changed := existing, false
	for _, s := range expected {
		if !slices.Contains(out, s) {
			out = append(slices.Clone(out), s)
			changed = true
		}
	}
	return out, changed
}

// Covers reports whether owner's rules allow everything servant's do, and
// which of servant's (broken down to one verb, resource and name each) they
// do not, as Kubernetes' validation.Covers (used as is).
func Covers(owner, servant []PolicyRule) (bool, []PolicyRule) {
	ok, missing := validation.Covers(toV1Rules(owner), toV1Rules(servant))
	return ok, fromV1Rules(missing)
}

func toV1Rules(rules []PolicyRule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(rules))
	for i, r := range rules {
		out[i] = rbacv1.PolicyRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames, NonResourceURLs: r.NonResourceURLs}
	}
	return out
}

func fromV1Rules(rules []rbacv1.PolicyRule) []PolicyRule {
	out := make([]PolicyRule, len(rules))
	for i, r := range rules {
		out[i] = PolicyRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames, NonResourceURLs: r.NonResourceURLs}
	}
	return out
}
