package kubectl

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"skiff.dev/skiff/api"
)

// AccessList is the table `kubectl auth can-i --list` prints from a
// SelfSubjectRulesReview's status, row by row, as kubectl builds it
// (k8s.io/kubectl/pkg/cmd/auth/cani.go): every rule broken down into one
// rule per group and resource (and per resource name, per non-resource
// URL), the rules of one group, resource and name merged with their verbs
// in first-seen order, sorted by the rule's protobuf String().
func AccessList(st api.SubjectRulesReviewStatus) []api.PolicyRule {
	var broken []api.PolicyRule
	for _, r := range st.ResourceRules {
		broken = append(broken, breakdownRule(api.PolicyRule{Verbs: r.Verbs, APIGroups: r.APIGroups,
			Resources: r.Resources, ResourceNames: r.ResourceNames})...)
	}
	for _, r := range st.NonResourceRules {
		broken = append(broken, breakdownRule(api.PolicyRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})...)
	}
	rules := compactRules(broken)
	keys := make([]string, len(rules))
	for i, r := range rules {
		keys[i] = policyRuleString(r)
	}
	idx := make([]int, len(rules))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return keys[idx[a]] < keys[idx[b]] })
	out := make([]api.PolicyRule, len(rules))
	for i, j := range idx {
		out[i] = rules[j]
	}
	return out
}

// AccessRow is one row of AccessList's table: RESOURCES, NON-RESOURCE
// URLS, RESOURCE NAMES and VERBS, tab-separated as kubectl prints them
// ("pods.apps/log", "[]", "[web]", "[get list]").
func AccessRow(r api.PolicyRule) string {
	return fmt.Sprintf("%s\t%v\t%v\t%v", combineResourceGroup(r.Resources, r.APIGroups), r.NonResourceURLs, r.ResourceNames, r.Verbs)
}

// AccessHeader is the header of AccessList's table.
const AccessHeader = "Resources\tNon-Resource URLs\tResource Names\tVerbs"

// breakdownRule is k8s.io/component-helpers/auth/rbac's BreakdownRule.
func breakdownRule(rule api.PolicyRule) []api.PolicyRule {
	var sub []api.PolicyRule
	for _, g := range rule.APIGroups {
		for _, res := range rule.Resources {
			if len(rule.ResourceNames) == 0 {
				sub = append(sub, api.PolicyRule{APIGroups: []string{g}, Resources: []string{res}, Verbs: rule.Verbs})
				continue
			}
			for _, n := range rule.ResourceNames {
				sub = append(sub, api.PolicyRule{APIGroups: []string{g}, Resources: []string{res}, Verbs: rule.Verbs, ResourceNames: []string{n}})
			}
		}
	}
	for _, u := range rule.NonResourceURLs {
		sub = append(sub, api.PolicyRule{NonResourceURLs: []string{u}, Verbs: rule.Verbs})
	}
	return sub
}

type simpleResource struct {
	group, resource, name string
	hasName               bool
}

// compactRules is kubectl's rbac CompactRules: rules of one group, one
// resource and at most one name are merged (verbs added in order, once);
// the others are kept as they are, before the merged ones.
func compactRules(rules []api.PolicyRule) []api.PolicyRule {
	var out []api.PolicyRule
	merged := map[simpleResource]*api.PolicyRule{}
	var order []simpleResource
	for _, r := range rules {
		if len(r.ResourceNames) > 1 || len(r.NonResourceURLs) > 0 || len(r.APIGroups) != 1 || len(r.Resources) != 1 {
			out = append(out, r)
			continue
		}
		k := simpleResource{group: r.APIGroups[0], resource: r.Resources[0]}
		if len(r.ResourceNames) == 1 {
			k.name, k.hasName = r.ResourceNames[0], true
		}
		m, ok := merged[k]
		if !ok {
			c := api.PolicyRule{Verbs: slices.Clone(r.Verbs), APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames}
			merged[k], order = &c, append(order, k)
			continue
		}
		for _, v := range r.Verbs {
			if !slices.Contains(m.Verbs, v) {
				m.Verbs = append(m.Verbs, v)
			}
		}
	}
	for _, k := range order {
		out = append(out, *merged[k])
	}
	return out
}

// policyRuleString is rbacv1.PolicyRule's generated String(), kubectl's
// sort key.
func policyRuleString(r api.PolicyRule) string {
	return fmt.Sprintf("&PolicyRule{Verbs:%v,APIGroups:%v,Resources:%v,ResourceNames:%v,NonResourceURLs:%v,}",
		r.Verbs, r.APIGroups, r.Resources, r.ResourceNames, r.NonResourceURLs)
}

// combineResourceGroup is kubectl's describe.CombineResourceGroup:
// "deployments.apps", "pods/log", "deployments.apps/scale".
func combineResourceGroup(resources, groups []string) string {
	if len(resources) == 0 {
		return ""
	}
	res, sub, hasSub := strings.Cut(resources[0], "/")
	if len(groups) > 0 && groups[0] != "" {
		res += "." + groups[0]
	}
	if hasSub {
		res += "/" + sub
	}
	return res
}
