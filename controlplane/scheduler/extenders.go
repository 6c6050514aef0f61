package scheduler

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/kube-scheduler/config/v1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/config"
	"skiff.dev/skiff/controlplane/scheduler/extender"
	"skiff.dev/skiff/controlplane/scheduler/framework"
	"skiff.dev/skiff/controlplane/scheduler/plugins"
)

// Scheduler extenders (package extender) in a cycle, where kube-scheduler
// asks them:
//
//	after the Filter plugins   each filter extender interested in the pod,
//	                           in order, on the nodes still feasible; the
//	                           nodes it rejects get its reason
//	after the Score plugins    each prioritizer: its 0..10 score × 10 ×
//	                           its weight is added to every node's total
//	preemption                 each preempt extender may drop candidate
//	                           nodes and victims
//	binding                    a bind extender interested in the pod binds
//	                           it instead of DefaultBinder
//
// An extender that fails (cannot be reached, answers an error) is skipped
// when ignorable; otherwise the attempt fails with its error, as
// kube-scheduler (the pod stays Pending: FailedScheduling, PodScheduled
// False with reason SchedulerError). A prioritize error is never fatal.
// Its answers show in `describe pod` and `trace pod` beside the plugins'
// ("extender URL" in the filter and score tables).

// ReasonSchedulerError is the PodScheduled reason of an attempt that
// failed with an error (Kubernetes' v1.PodReasonSchedulerError).
const ReasonSchedulerError = "SchedulerError"

// extenderLabel names an extender in the explanation tables.
func extenderLabel(e *extender.Extender) string { return "extender " + e.Name() }

// withExtenderResources returns cfg with the extenders' managed resources
// marked ignoredByScheduler added to NodeResourcesFit's ignoredResources
// in every profile (cfg itself is not changed).
func withExtenderResources(cfg *config.Config, exts []*extender.Extender) *config.Config {
	var ignored []string
	for _, e := range exts {
		ignored = append(ignored, e.IgnoredResources()...)
	}
	if len(ignored) == 0 {
		return cfg
	}
	out := *cfg
	out.Profiles = slices.Clone(cfg.Profiles)
	for i := range out.Profiles {
		p := &out.Profiles[i]
		p.PluginConfig = slices.Clone(p.PluginConfig)
		for j := range p.PluginConfig {
			if a, ok := p.PluginConfig[j].Args.(*v1.NodeResourcesFitArgs); ok && p.PluginConfig[j].Name == plugins.NodeResourcesFitName {
				a = a.DeepCopyObject().(*v1.NodeResourcesFitArgs)
				a.IgnoredResources = append(a.IgnoredResources, ignored...)
				p.PluginConfig[j].Args = a
			}
		}
	}
	return &out
}

// runExtenderFilters asks the filter extenders about the feasible nodes
// and records, in res, the nodes each rejected (with its reason). It
// returns the nodes still feasible.
func (a *algorithm) runExtenderFilters(ctx context.Context, pod *api.Pod, feasible []*framework.NodeInfo, res *CycleResult) ([]*framework.NodeInfo, error) {
	for _, e := range a.extenders {
		if len(feasible) == 0 {
			break
		}
		if !e.IsFilter() || !e.IsInterested(pod) {
			continue
		}
		nodes := make([]*api.Node, len(feasible))
		for i, ni := range feasible {
			nodes[i] = ni.Node
		}
		fr, err := e.Filter(ctx, pod, nodes)
		if err != nil {
			if e.IsIgnorable() {
				res.ExtenderErrors = append(res.ExtenderErrors, fmt.Sprintf("%s: %v (ignorable: skipped)", extenderLabel(e), err))
				continue
			}
			return nil, err
		}
		label := extenderLabel(e)
		idx := slices.Index(res.FilterPlugins, label)
		if idx < 0 {
			res.FilterPlugins = append(res.FilterPlugins, label)
			idx = len(res.FilterPlugins) - 1
		}
		keep := map[string]bool{}
		for _, n := range fr.Feasible {
			keep[n] = true
		}
		var next []*framework.NodeInfo
		for _, ni := range feasible {
			name := ni.Node.Name
			if keep[name] {
				next = append(next, ni)
				continue
			}
			st := extenderStatus(e, fr, name)
			for i := range res.Nodes {
				if res.Nodes[i].Node == name {
					res.Nodes[i].Plugin, res.Nodes[i].Status = idx, st
				}
			}
		}
		feasible = next
	}
	return feasible, nil
}

// extenderStatus is the status of a node an extender rejected: its
// reason, unresolvable when it says so.
func extenderStatus(e *extender.Extender, fr *extender.FilterResult, node string) *framework.Status {
	if msg, ok := fr.FailedAndUnresolvable[node]; ok {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, msg).WithPlugin(extenderLabel(e))
	}
	if msg, ok := fr.Failed[node]; ok {
		return framework.NewStatus(framework.Unschedulable, msg).WithPlugin(extenderLabel(e))
	}
	return framework.NewStatus(framework.Unschedulable, fmt.Sprintf("node(s) were rejected by extender %s", e.Name())).WithPlugin(extenderLabel(e))
}

// runExtenderPrioritizers adds each prioritizer's score (0..10, × 10 to
// the plugins' 0..100 scale, × its weight) to the nodes' totals, as a
// score row of its own.
func (a *algorithm) runExtenderPrioritizers(ctx context.Context, pod *api.Pod, feasible []*framework.NodeInfo, res *CycleResult) {
	for _, e := range a.extenders {
		if !e.IsPrioritizer() || !e.IsInterested(pod) {
			continue
		}
		nodes := make([]*api.Node, len(feasible))
		for i, ni := range feasible {
			nodes[i] = ni.Node
		}
		scores, err := e.Prioritize(ctx, pod, nodes)
		if err != nil {
			res.ExtenderErrors = append(res.ExtenderErrors, fmt.Sprintf("%s: prioritize: %v (ignored)", extenderLabel(e), err))
			continue
		}
		res.ScorePlugins = append(res.ScorePlugins, ScorePluginInfo{Name: extenderLabel(e), Weight: e.Weight()})
		for i := range res.Scores {
			raw := scores[res.Scores[i].Node]
			norm := raw * (framework.MaxNodeScore / 10)
			res.Scores[i].Raw = append(res.Scores[i].Raw, raw)
			res.Scores[i].Normalized = append(res.Scores[i].Normalized, norm)
			res.Scores[i].Total += norm * e.Weight()
		}
	}
}

// extenderPreemption lets the preempt extenders narrow the candidates:
// a node an extender leaves out is dropped, and on the others only the
// victims it names remain.
func (a *algorithm) extenderPreemption(ctx context.Context, pod *api.Pod, victims map[string][]*framework.PodInfo) (map[string][]*framework.PodInfo, error) {
	for _, e := range a.extenders {
		if !e.SupportsPreemption() || !e.IsInterested(pod) || len(victims) == 0 {
			continue
		}
		asked := map[string][]*api.Pod{}
		byUID := map[string]*framework.PodInfo{}
		for node, vs := range victims {
			for _, v := range vs {
				asked[node] = append(asked[node], v.Pod)
				byUID[v.Pod.UID] = v
			}
			if asked[node] == nil {
				asked[node] = []*api.Pod{}
			}
		}
		kept, err := e.ProcessPreemption(ctx, pod, asked)
		if err != nil {
			if e.IsIgnorable() {
				continue
			}
			return nil, err
		}
		next := map[string][]*framework.PodInfo{}
		for node, uids := range kept {
			vs := []*framework.PodInfo{}
			for _, uid := range uids {
				if v, ok := byUID[uid]; ok {
					vs = append(vs, v)
				}
			}
			next[node] = vs
		}
		victims = next
	}
	return victims, nil
}

// runBind binds through a bind extender interested in the pod, else
// through the profile's bind plugins.
func (s *Scheduler) runBind(ctx context.Context, t *task, pod *api.Pod) *framework.Status {
	for _, e := range s.extenders {
		if e.IsBinder() && e.IsInterested(pod) {
			if err := e.Bind(ctx, pod, t.node); err != nil {
				return framework.AsStatus(fmt.Errorf("extender %s: %w", e.Name(), err))
			}
			return nil
		}
	}
	return t.fwk.RunBind(ctx, t.state, pod, t.node)
}
