package scenario

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/fabric"
)

// Expectation is what should hold once a step settled. Pods (with one of
// OnNode, InDomain, OnNodeWith, NotOnNode, Pending, Running, Count) speaks of
// the pods of one object; Apart, Together and MaxFragmentedGPUs of the
// cluster. Exactly one kind is given.
type Expectation struct {
	// Configs it holds under (names); none: every configuration.
	Configs []string `json:"configs,omitempty"`

	// Pods: KIND/NAME of a pod or of what made it: pod/x, job/job-b,
	// deployment/web, replicaset/..., statefulset/... (in the scenario's
	// namespace, or NAMESPACE/KIND/NAME). Its pods are the ones not being
	// deleted; a reference with none fails.
	Pods string `json:"pods,omitempty"`
	// OnNode: every one of them is on this node.
	OnNode string `json:"onNode,omitempty"`
	// NotOnNode: none of them is on this node.
	NotOnNode string `json:"notOnNode,omitempty"`
	// InDomain: every one is on a node of this NVLink domain
	// (skiff.dev/nvlink-domain, from the cluster file).
	InDomain string `json:"inDomain,omitempty"`
	// OnNodeWith: every one is on a node with these labels.
	OnNodeWith map[string]string `json:"onNodeWith,omitempty"`
	// Pending: every one is Pending, on no node (true), or none is (false).
	Pending *bool `json:"pending,omitempty"`
	// Running: every one is Running (true), or none is (false).
	Running *bool `json:"running,omitempty"`
	// Count: there are exactly this many.
	Count *int `json:"count,omitempty"`

	// Apart: no node holds pods of two of these (KIND/NAME each, as
	// Pods).
	Apart []string `json:"apart,omitempty"`
	// Together: the pods of all of these are on one node.
	Together []string `json:"together,omitempty"`
	// MaxFragmentedGPUs: at most this many free GPUs lie on partly used
	// nodes.
	MaxFragmentedGPUs *int64 `json:"maxFragmentedGPUs,omitempty"`
}

// validateExpectation checks one expectation's shape.
func validateExpectation(p string, e *Expectation, bad func(string, string, ...any)) {
	kinds := 0
	for _, set := range []bool{e.Pods != "", len(e.Apart) > 0, len(e.Together) > 0, e.MaxFragmentedGPUs != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		bad(p, "an expectation has exactly one of pods, apart, together and maxFragmentedGPUs")
	}
	for i, c := range e.Configs {
		if err := checkConfigName(c); err != nil {
			bad(fmt.Sprintf("%s.configs[%d]", p, i), "%v", err)
		}
	}
	tests := 0
	for _, set := range []bool{e.OnNode != "", e.NotOnNode != "", e.InDomain != "", len(e.OnNodeWith) > 0, e.Pending != nil, e.Running != nil, e.Count != nil} {
		if set {
			tests++
		}
	}
	switch {
	case e.Pods != "" && tests == 0:
		bad(p, "pods needs a test: onNode, notOnNode, inDomain, onNodeWith, pending, running or count")
	case e.Pods == "" && tests > 0:
		bad(p, "onNode, notOnNode, inDomain, onNodeWith, pending, running and count test the pods of pods:")
	}
	if e.Pods != "" {
		if _, err := parseRef(e.Pods, true, "default"); err != nil {
			bad(p+".pods", "%v", err)
		}
	}
	for name, refs := range map[string][]string{"apart": e.Apart, "together": e.Together} {
		if len(refs) == 1 {
			bad(p+"."+name, "name at least two")
		}
		for i, r := range refs {
			if _, err := parseRef(r, true, "default"); err != nil {
				bad(fmt.Sprintf("%s.%s[%d]", p, name, i), "%v", err)
			}
		}
	}
	if e.Count != nil && *e.Count < 0 {
		bad(p+".count", "%d: must not be negative", *e.Count)
	}
	if e.MaxFragmentedGPUs != nil && *e.MaxFragmentedGPUs < 0 {
		bad(p+".maxFragmentedGPUs", "%d: must not be negative", *e.MaxFragmentedGPUs)
	}
}

func (e *Expectation) appliesTo(config string) bool {
	return len(e.Configs) == 0 || slices.Contains(e.Configs, config)
}

// String is the expectation as a line: "job/job-b onNode node-2".
func (e *Expectation) String() string {
	var parts []string
	switch {
	case e.Pods != "":
		parts = append(parts, e.Pods)
		add := func(k, v string) { parts = append(parts, k+" "+v) }
		if e.OnNode != "" {
			add("onNode", e.OnNode)
		}
		if e.NotOnNode != "" {
			add("notOnNode", e.NotOnNode)
		}
		if e.InDomain != "" {
			add("inDomain", e.InDomain)
		}
		if len(e.OnNodeWith) > 0 {
			var kv []string
			for k, v := range e.OnNodeWith {
				kv = append(kv, k+"="+v)
			}
			sort.Strings(kv)
			add("onNodeWith", strings.Join(kv, ","))
		}
		if e.Pending != nil {
			add("pending", fmt.Sprint(*e.Pending))
		}
		if e.Running != nil {
			add("running", fmt.Sprint(*e.Running))
		}
		if e.Count != nil {
			add("count", fmt.Sprint(*e.Count))
		}
	case len(e.Apart) > 0:
		parts = append(parts, "apart ["+strings.Join(e.Apart, ", ")+"]")
	case len(e.Together) > 0:
		parts = append(parts, "together ["+strings.Join(e.Together, ", ")+"]")
	case e.MaxFragmentedGPUs != nil:
		parts = append(parts, fmt.Sprintf("maxFragmentedGPUs %d", *e.MaxFragmentedGPUs))
	}
	return strings.Join(parts, " ")
}

// check returns "" when the expectation holds in st, else what was
// found instead.
func (e *Expectation) check(st *state, ns string) string {
	switch {
	case e.Pods != "":
		return e.checkPods(st, ns)
	case len(e.Apart) > 0:
		return checkApart(st, ns, e.Apart)
	case len(e.Together) > 0:
		return checkTogether(st, ns, e.Together)
	case e.MaxFragmentedGPUs != nil:
		if u := st.usage(); u.Fragmented > *e.MaxFragmentedGPUs {
			return fmt.Sprintf("%d GPUs are fragmented (%s)", u.Fragmented, u)
		}
	}
	return ""
}

// podsOf are the pods of a reference, not being deleted.
func (st *state) podsOf(ref, ns string) ([]*api.Pod, error) {
	r, err := parseRef(ref, true, ns)
	if err != nil {
		return nil, err
	}
	want := ownerKey(r.Kind.Kind, r.Namespace, r.Name)
	var out []*api.Pod
	for _, p := range st.pods {
		if p.DeletionTimestamp == nil && slices.Contains(st.ownerChain(p), want) {
			out = append(out, p)
		}
	}
	if len(out) == 0 && r.Kind.Kind != "Pod" && !slices.Contains([]string{"Job", "ReplicaSet", "Deployment"}, r.Kind.Kind) {
		return nil, fmt.Errorf("%s: a scenario follows the pods of pods, Jobs, ReplicaSets and Deployments", ref)
	}
	return out, nil
}

// where lists pods as "NAME on NODE" ("NAME Pending").
func where(pods []*api.Pod) string {
	var out []string
	for _, p := range pods {
		switch {
		case p.Spec.NodeName == "":
			out = append(out, p.Name+" Pending")
		default:
			out = append(out, p.Name+" on "+p.Spec.NodeName)
		}
	}
	return strings.Join(out, ", ")
}

func (e *Expectation) checkPods(st *state, ns string) string {
	pods, err := st.podsOf(e.Pods, ns)
	if err != nil {
		return err.Error()
	}
	if e.Count != nil && len(pods) != *e.Count {
		return fmt.Sprintf("%d pods, want %d (%s)", len(pods), *e.Count, where(pods))
	}
	if len(pods) == 0 {
		if e.Count != nil {
			return ""
		}
		return "no pods"
	}
	nodes := map[string]*api.Node{}
	for _, n := range st.nodes {
		nodes[n.Name] = n
	}
	var wrong []*api.Pod
	for _, p := range pods {
		n := nodes[p.Spec.NodeName]
		ok := true
		if e.OnNode != "" {
			ok = ok && p.Spec.NodeName == e.OnNode
		}
		if e.NotOnNode != "" {
			ok = ok && p.Spec.NodeName != e.NotOnNode
		}
		if e.InDomain != "" {
			ok = ok && n != nil && n.Labels[fabric.LabelDomain] == e.InDomain
		}
		for k, v := range e.OnNodeWith {
			ok = ok && n != nil && n.Labels[k] == v
		}
		if e.Pending != nil {
			ok = ok && (p.Spec.NodeName == "" && p.Status.Phase == api.PodPending) == *e.Pending
		}
		if e.Running != nil {
			ok = ok && (p.Status.Phase == api.PodRunning) == *e.Running
		}
		if !ok {
			wrong = append(wrong, p)
		}
	}
	if len(wrong) == 0 {
		return ""
	}
	return "found " + describePods(wrong, nodes)
}

// describePods says where each pod is, with its node's NVLink domain.
func describePods(pods []*api.Pod, nodes map[string]*api.Node) string {
	var out []string
	for _, p := range pods {
		s := p.Name + " " + p.Status.Phase
		if p.Spec.NodeName != "" {
			s = p.Name + " on " + p.Spec.NodeName
			if n := nodes[p.Spec.NodeName]; n != nil && n.Labels[fabric.LabelDomain] != "" {
				s += " (" + n.Labels[fabric.LabelDomain] + ")"
			}
			if p.Status.Phase != api.PodRunning {
				s += " " + p.Status.Phase
			}
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// nodesOf maps each reference to the nodes its bound pods are on; a
// reference without pods is an error.
func nodesOf(st *state, ns string, refs []string) ([]map[string]bool, error) {
	var out []map[string]bool
	var errs []error
	for _, ref := range refs {
		pods, err := st.podsOf(ref, ns)
		if err == nil && len(pods) == 0 {
			err = fmt.Errorf("%s has no pods", ref)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m := map[string]bool{}
		for _, p := range pods {
			if p.Spec.NodeName == "" {
				errs = append(errs, fmt.Errorf("%s: pod %s is Pending", ref, p.Name))
			}
			m[p.Spec.NodeName] = true
		}
		out = append(out, m)
	}
	return out, errors.Join(errs...)
}

func checkApart(st *state, ns string, refs []string) string {
	sets, err := nodesOf(st, ns, refs)
	if err != nil {
		return strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	var shared []string
	for i := range sets {
		for j := i + 1; j < len(sets); j++ {
			for n := range sets[i] {
				if sets[j][n] {
					shared = append(shared, fmt.Sprintf("%s and %s share node %s", refs[i], refs[j], n))
				}
			}
		}
	}
	sort.Strings(shared)
	return strings.Join(shared, "; ")
}

func checkTogether(st *state, ns string, refs []string) string {
	sets, err := nodesOf(st, ns, refs)
	if err != nil {
		return strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	all := map[string]bool{}
	for _, s := range sets {
		for n := range s {
			all[n] = true
		}
	}
	if len(all) == 1 {
		return ""
	}
	var parts []string
	for i, s := range sets {
		var ns []string
		for n := range s {
			ns = append(ns, n)
		}
		sort.Strings(ns)
		parts = append(parts, refs[i]+" on "+strings.Join(ns, ", "))
	}
	return "not on one node: " + strings.Join(parts, "; ")
}
