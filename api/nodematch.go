package api

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// Which nodes a pod may go to, as Kubernetes' component-helpers
// (scheduling/corev1): the rules the scheduler's NodeAffinity and
// TaintToleration plugins filter with, the DaemonSet controller decides
// with, and `describe daemonset` explains with. Pure functions of the
// pod spec and the node.

// NodeSelectorMatches reports whether node carries every label of sel.
func NodeSelectorMatches(sel map[string]string, node *Node) bool {
	for k, v := range sel {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// RequiredNodeAffinityMatches reports whether node satisfies spec's
// nodeSelector and required node affinity.
func RequiredNodeAffinityMatches(spec *PodSpec, node *Node) bool {
	if !NodeSelectorMatches(spec.NodeSelector, node) {
		return false
	}
	return spec.Affinity == nil || RequiredTermsMatch(spec.Affinity.NodeAffinity, node)
}

// RequiredTermsMatch reports whether node matches one of a's required
// terms (or a has none).
func RequiredTermsMatch(a *NodeAffinity, node *Node) bool {
	if a == nil || a.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for i := range a.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if a.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[i].Matches(node) {
			return true
		}
	}
	return false
}

// Matches reports whether node matches every expression and field of the
// term. A term with neither matches nothing, as in Kubernetes. matchFields
// supports metadata.name.
func (t *NodeSelectorTerm) Matches(node *Node) bool {
	if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
		return false
	}
	for i := range t.MatchExpressions {
		r := &t.MatchExpressions[i]
		v, ok := node.Labels[r.Key]
		if !r.matches(v, ok) {
			return false
		}
	}
	for i := range t.MatchFields {
		r := &t.MatchFields[i]
		if r.Key != "metadata.name" || !r.matches(node.Name, true) {
			return false
		}
	}
	return true
}

// matches applies one operator to a label value (has: whether the label
// exists). Gt and Lt compare integers; a value that is not one matches
// nothing.
func (r *NodeSelectorRequirement) matches(value string, has bool) bool {
	switch r.Operator {
	case "In":
		return has && slices.Contains(r.Values, value)
	case "NotIn":
		return !has || !slices.Contains(r.Values, value)
	case "Exists":
		return has
	case "DoesNotExist":
		return !has
	case "Gt", "Lt":
		if !has || len(r.Values) != 1 {
			return false
		}
		got, err1 := strconv.ParseInt(value, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == "Gt" {
			return got > want
		}
		return got < want
	}
	return false
}

// Tolerates reports whether the toleration matches a taint: the effects
// match (empty matches all), the keys match (an empty key with Exists
// matches every key), and the operator is Exists or the values are equal.
func (tol *Toleration) Tolerates(t *Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key != t.Key && !(tol.Key == "" && tol.Operator == "Exists") {
		return false
	}
	switch tol.Operator {
	case "Exists":
		return true
	case "", "Equal":
		return tol.Value == t.Value
	}
	return false
}

// TolerationsTolerate reports whether any toleration matches the taint.
func TolerationsTolerate(tols []Toleration, t *Taint) bool {
	for i := range tols {
		if tols[i].Tolerates(t) {
			return true
		}
	}
	return false
}

// DaemonTolerations are what the DaemonSet controller adds to every daemon
// pod (Kubernetes' AddOrUpdateDaemonPodTolerations): a node problem never
// evicts or keeps out a daemon pod.
func DaemonTolerations(hostNetwork bool) []Toleration {
	tols := []Toleration{
		{Key: TaintNotReady, Operator: "Exists", Effect: TaintEffectNoExec},
		{Key: TaintUnreachable, Operator: "Exists", Effect: TaintEffectNoExec},
		{Key: TaintDiskPressure, Operator: "Exists", Effect: TaintEffectNoSched},
		{Key: TaintMemoryPressure, Operator: "Exists", Effect: TaintEffectNoSched},
		{Key: TaintPIDPressure, Operator: "Exists", Effect: TaintEffectNoSched},
		{Key: TaintUnschedulable, Operator: "Exists", Effect: TaintEffectNoSched},
	}
	if hostNetwork {
		tols = append(tols, Toleration{Key: TaintNetworkUnavailable, Operator: "Exists", Effect: TaintEffectNoSched})
	}
	return tols
}

// AddDaemonTolerations adds each daemon toleration to spec, replacing an
// equal one (same key, operator, value, effect), as Kubernetes'
// AddOrUpdateTolerationInPodSpec.
func AddDaemonTolerations(spec *PodSpec) {
	for _, t := range DaemonTolerations(spec.HostNetwork) {
		i := slices.IndexFunc(spec.Tolerations, func(o Toleration) bool {
			return o.Key == t.Key && o.Effect == t.Effect && o.Value == t.Value && (o.Operator == t.Operator || (o.Operator == "" && t.Operator == "Equal"))
		})
		if i >= 0 {
			spec.Tolerations[i] = t
		} else {
			spec.Tolerations = append(spec.Tolerations, t)
		}
	}
}

// DaemonPodFits decides, for a daemon pod's spec (the DaemonSet's
// template with the daemon tolerations: AddDaemonTolerations) and a node,
// whether a pod should run there (shouldRun) and whether one that runs
// there may stay (shouldContinue), as Kubernetes' NodeShouldRunDaemonPod,
// and why not, in words, when shouldRun is false.
func DaemonPodFits(spec *PodSpec, node *Node) (shouldRun, shouldContinue bool, why string) {
	if spec.NodeName != "" && spec.NodeName != node.Name {
		return false, false, fmt.Sprintf("the template's spec.nodeName is %s", spec.NodeName)
	}
	for _, k := range slices.Sorted(maps.Keys(spec.NodeSelector)) {
		if got, ok := node.Labels[k]; !ok || got != spec.NodeSelector[k] {
			return false, false, fmt.Sprintf("node doesn't match nodeSelector %s=%s", k, spec.NodeSelector[k])
		}
	}
	if spec.Affinity != nil && !RequiredTermsMatch(spec.Affinity.NodeAffinity, node) {
		return false, false, "node doesn't match the template's required node affinity"
	}
	var untolerated *Taint
	noExecute := false
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect != TaintEffectNoSched && t.Effect != TaintEffectNoExec {
			continue
		}
		if TolerationsTolerate(spec.Tolerations, t) {
			continue
		}
		if untolerated == nil {
			untolerated = t
		}
		noExecute = noExecute || t.Effect == TaintEffectNoExec
	}
	if untolerated != nil {
		return false, !noExecute, fmt.Sprintf("untolerated taint {%s: %s} (%s)", untolerated.Key, untolerated.Value, untolerated.Effect)
	}
	return true, true, ""
}

// PodTargetNode is the node a pod is for: its spec.nodeName once bound,
// else the node its required affinity selects by name, as a DaemonSet's
// pods do ("" if none).
func PodTargetNode(p *Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			if f.Key == "metadata.name" && f.Operator == "In" && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}
