package authz

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
)

// RuleAllows reports whether rule r allows a, as Kubernetes'
// rbac.RuleAllows.
func RuleAllows(a Attributes, r *api.PolicyRule) bool {
	if a.ResourceRequest {
		combined := a.Resource
		if a.Subresource != "" {
			combined += "/" + a.Subresource
		}
		return verbMatches(r, a.Verb) && groupMatches(r, a.APIGroup) &&
			resourceMatches(r, combined, a.Subresource) && nameMatches(r, a.Name)
	}
	return verbMatches(r, a.Verb) && urlMatches(r, a.Path)
}

func verbMatches(r *api.PolicyRule, verb string) bool {
	for _, v := range r.Verbs {
		if v == api.VerbAll || v == verb {
			return true
		}
	}
	return false
}

func groupMatches(r *api.PolicyRule, group string) bool {
	for _, g := range r.APIGroups {
		if g == api.APIGroupAll || g == group {
			return true
		}
	}
	return false
}

// resourceMatches: "*", the exact resource or "RESOURCE/SUB", or "*/SUB"
// for any resource's subresource SUB.
func resourceMatches(r *api.PolicyRule, combined, sub string) bool {
	for _, res := range r.Resources {
		switch {
		case res == api.ResourceAll, res == combined:
			return true
		case sub != "" && len(res) == len(sub)+2 && strings.HasPrefix(res, "*/") && strings.HasSuffix(res, sub):
			return true
		}
	}
	return false
}

func nameMatches(r *api.PolicyRule, name string) bool {
	return len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name)
}

// urlMatches: "*", the exact path, or a prefix ending in "*".
func urlMatches(r *api.PolicyRule, path string) bool {
	for _, u := range r.NonResourceURLs {
		switch {
		case u == api.URLAll, u == path:
			return true
		case strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimRight(u, "*")):
			return true
		}
	}
	return false
}

// FullAuthority is what setting an aggregationRule requires: every verb on
// every resource and URL (an aggregated role can gather anything).
var FullAuthority = []api.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// ConfirmNoEscalation is Kubernetes' ConfirmNoEscalation: nil when owner
// (the rules u holds where the object goes) covers rules, else the error
// that lists what u lacks:
//
//	user "alice" (groups=["students" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:
//	{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}
func ConfirmNoEscalation(u User, owner []api.PolicyRule, resolutionErrs []error, rules []api.PolicyRule) error {
	ok, missing := api.Covers(owner, rules)
	if ok {
		return nil
	}
	var descs []string
	for _, r := range compactRules(missing) {
		if d := CompactString(r); !slices.Contains(descs, d) {
			descs = append(descs, d)
		}
	}
	sort.Strings(descs)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.Name, u.Groups, strings.Join(descs, "\n"))
	if len(resolutionErrs) > 0 {
		msg += fmt.Sprintf("; resolution errors: %v", resolutionErrs)
	}
	return fmt.Errorf("%s", msg)
}

// compactRules merges the broken-down rules that differ only in their
// verbs, as Kubernetes' CompactRules does for simple resource rules.
func compactRules(rules []api.PolicyRule) []api.PolicyRule {
	var out []api.PolicyRule
	index := map[string]int{}
	for _, r := range rules {
		if len(r.APIGroups) != 1 || len(r.Resources) != 1 || len(r.NonResourceURLs) > 0 {
			out = append(out, r)
			continue
		}
		key := r.APIGroups[0] + "\x00" + r.Resources[0] + "\x00" + strings.Join(r.ResourceNames, ",")
		if i, ok := index[key]; ok {
			for _, v := range r.Verbs {
				if !slices.Contains(out[i].Verbs, v) {
					out[i].Verbs = append(out[i].Verbs, v)
				}
			}
			continue
		}
		index[key] = len(out)
		c := r
		c.Verbs = slices.Clone(r.Verbs)
		out = append(out, c)
	}
	return out
}

// CompactString is Kubernetes' rbacv1helpers.CompactString:
// {APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}.
func CompactString(r api.PolicyRule) string {
	var parts []string
	var args []any
	for _, f := range []struct {
		name string
		v    []string
	}{{"APIGroups", r.APIGroups}, {"Resources", r.Resources}, {"NonResourceURLs", r.NonResourceURLs}, {"ResourceNames", r.ResourceNames}, {"Verbs", r.Verbs}} {
		if len(f.v) > 0 {
			parts = append(parts, f.name+":%q")
			args = append(args, f.v)
		}
	}
	return fmt.Sprintf("{"+strings.Join(parts, ", ")+"}", args...)
}

// AggregatedRules are the rules an aggregated ClusterRole should hold, as
// Kubernetes' clusterrole-aggregation controller computes them: the rules
// of every other ClusterRole one of its selectors matches, in name order,
// each once. all lists every ClusterRole; ok is false when target has no
// aggregationRule or a selector does not parse.
func AggregatedRules(target *api.ClusterRole, all []*api.ClusterRole) (rules []api.PolicyRule, ok bool, err error) {
	if target.AggregationRule == nil {
		return nil, false, nil
	}
	var sels []labels.Selector
	for i := range target.AggregationRule.ClusterRoleSelectors {
		s, err := target.AggregationRule.ClusterRoleSelectors[i].AsSelector()
		if err != nil {
			return nil, false, fmt.Errorf("clusterrole %q: aggregationRule: %w", target.Name, err)
		}
		sels = append(sels, s)
	}
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b *api.ClusterRole) int { return strings.Compare(a.Name, b.Name) })
	rules = []api.PolicyRule{}
	for _, r := range sorted {
		if r.Name == target.Name || !slices.ContainsFunc(sels, func(s labels.Selector) bool { return s.Matches(labels.Set(r.Labels)) }) {
			continue
		}
		for _, pr := range r.Rules {
			if !slices.ContainsFunc(rules, func(x api.PolicyRule) bool { return samePolicyRule(x, pr) }) {
				rules = append(rules, pr)
			}
		}
	}
	return rules, true, nil
}

func samePolicyRule(a, b api.PolicyRule) bool {
	return slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.ResourceNames, b.ResourceNames) && slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}

// SameRules reports whether two rule lists are equal, in order.
func SameRules(a, b []api.PolicyRule) bool { return slices.EqualFunc(a, b, samePolicyRule) }
