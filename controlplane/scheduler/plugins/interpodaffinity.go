package plugins

import (
	"context"
	"fmt"
	"log/slog"

	v1 "k8s.io/kube-scheduler/config/v1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/scheduler/config"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// InterPodAffinity places pods relative to other pods: near them
// (podAffinity) or away from them (podAntiAffinity), per topology domain
// (the nodes sharing a value of topologyKey: one node for
// kubernetes.io/hostname, a zone, an NVLink domain).
//
// Filter, for the required terms, with Kubernetes' words:
//
//	podAffinity       every term must have a matching pod in the node's
//	                  domain: "node(s) didn't match pod affinity rules"
//	                  (the first pod of a group that matches its own terms
//	                  may go anywhere that has the topology labels)
//	podAntiAffinity   no term may have a matching pod in the node's domain:
//	                  "node(s) didn't match pod anti-affinity rules"
//	existing pods'    no pod in the node's domain may have a required
//	anti-affinity     anti-affinity term that matches this pod:
//	                  "node(s) didn't satisfy existing pods anti-affinity rules"
//
// Score: each preferred term adds (affinity) or subtracts (anti-affinity)
// its weight for every matching pod in the node's domain, and so do the
// existing pods' preferred terms that match this pod, and their required
// affinity terms (hardPodAffinityWeight, InterPodAffinityArgs); scores are
// then scaled to 0..100 between the lowest and highest.
//
// The counts are made once per pod in PreFilter and PreScore over every
// node of the cycle's snapshot; preemption's what-ifs update them through
// AddPod and RemovePod.
type InterPodAffinity struct {
	hardWeight     int64
	ignoreExisting bool // ignorePreferredTermsOfExistingPods
	ns             *namespaces
	statusAffinity *framework.Status
	statusAnti     *framework.Status
	statusExisting *framework.Status
}

var (
	_ framework.PreFilterPlugin     = (*InterPodAffinity)(nil)
	_ framework.PreFilterExtensions = (*InterPodAffinity)(nil)
	_ framework.FilterPlugin        = (*InterPodAffinity)(nil)
	_ framework.PreScorePlugin      = (*InterPodAffinity)(nil)
	_ framework.ScorePlugin         = (*InterPodAffinity)(nil)
	_ framework.EventSourcePlugin   = (*InterPodAffinity)(nil)
)

// Kubernetes' words.
const (
	ReasonAffinityRulesNotMatch        = "node(s) didn't match pod affinity rules"
	ReasonAntiAffinityRulesNotMatch    = "node(s) didn't match pod anti-affinity rules"
	ReasonExistingAntiAffinityNotMatch = "node(s) didn't satisfy existing pods anti-affinity rules"
	interPodAffinityPreFilterKey       = framework.StateKey("PreFilter" + InterPodAffinityName)
	interPodAffinityPreScoreKey        = framework.StateKey("PreScore" + InterPodAffinityName)
)

// NewInterPodAffinity returns the plugin for args (nil: the defaults);
// c (may be nil) is watched for namespaces' labels (namespaceSelector).
func NewInterPodAffinity(args *v1.InterPodAffinityArgs, c client.Interface, log *slog.Logger) (*InterPodAffinity, error) {
	return NewInterPodAffinityShared(args, c, nil, log)
}

// NewInterPodAffinityShared is NewInterPodAffinity reading namespaces
// from f's informer (the scheduler's; the process's shared factory); nil
// f: an informer of its own.
func NewInterPodAffinityShared(args *v1.InterPodAffinityArgs, c client.Interface, f *client.InformerFactory, log *slog.Logger) (*InterPodAffinity, error) {
	if args == nil {
		args = config.DefaultArgs(InterPodAffinityName).(*v1.InterPodAffinityArgs)
	}
	valid, err := config.ValidArgs(InterPodAffinityName, args)
	if err != nil {
		return nil, err
	}
	a := valid.(*v1.InterPodAffinityArgs)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &InterPodAffinity{
		hardWeight: int64(*a.HardPodAffinityWeight), ignoreExisting: a.IgnorePreferredTermsOfExistingPods,
		ns:             newNamespaces(c, f, log),
		statusAffinity: framework.NewStatus(framework.UnschedulableAndUnresolvable, ReasonAffinityRulesNotMatch),
		statusAnti:     framework.NewStatus(framework.Unschedulable, ReasonAntiAffinityRulesNotMatch),
		statusExisting: framework.NewStatus(framework.Unschedulable, ReasonExistingAntiAffinityNotMatch),
	}, nil
}

// Name implements framework.Plugin.
func (*InterPodAffinity) Name() string { return InterPodAffinityName }

// Run implements framework.EventSourcePlugin: namespaces' labels.
func (pl *InterPodAffinity) Run(ctx context.Context, moved func()) { pl.ns.run(ctx, moved) }

// WaitForSync implements framework.EventSourcePlugin.
func (pl *InterPodAffinity) WaitForSync(ctx context.Context) bool { return pl.ns.waitForSync(ctx) }

type topologyPair struct{ key, value string }

// topologyCounts counts matching pods (or terms) per topology pair.
type topologyCounts map[topologyPair]int64

func (m topologyCounts) add(key string, node *api.Node, d int64) {
	if v, ok := node.Labels[key]; ok {
		p := topologyPair{key, v}
		if m[p] += d; m[p] == 0 {
			delete(m, p)
		}
	}
}

func (m topologyCounts) clone() topologyCounts {
	out := make(topologyCounts, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// affinityState is what PreFilter counts for one pod.
type affinityState struct {
	affinity, anti []*affinityTerm // the pod's required terms
	// affinityCounts: pods matching all of the pod's affinity terms, per
	// pair of each term; antiCounts: pods matching each anti-affinity term;
	// existingAnti: existing pods whose required anti-affinity matches the pod.
	affinityCounts, antiCounts, existingAnti topologyCounts
}

func (s *affinityState) Clone() framework.StateData {
	return &affinityState{affinity: s.affinity, anti: s.anti,
		affinityCounts: s.affinityCounts.clone(), antiCounts: s.antiCounts.clone(), existingAnti: s.existingAnti.clone()}
}

// PreFilter implements framework.PreFilterPlugin.
func (pl *InterPodAffinity) PreFilter(_ context.Context, state *framework.CycleState, pod *api.Pod) *framework.Status {
	s := &affinityState{affinityCounts: topologyCounts{}, antiCounts: topologyCounts{}, existingAnti: topologyCounts{}}
	if a := pod.Spec.Affinity; a != nil {
		var err error
		if a.PodAffinity != nil {
			if s.affinity, err = requiredTerms(pod, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, 0); err != nil {
				return framework.AsStatus(fmt.Errorf("pod affinity: %w", err))
			}
		}
		if a.PodAntiAffinity != nil {
			if s.anti, err = requiredTerms(pod, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, 0); err != nil {
				return framework.AsStatus(fmt.Errorf("pod anti-affinity: %w", err))
			}
		}
	}
	nodes := state.Nodes()
	_, withRequiredAnti := state.PodsWithAffinity()
	anyExisting := withRequiredAnti > 0
	if len(s.affinity) == 0 && len(s.anti) == 0 && !anyExisting {
		return framework.NewStatus(framework.Skip)
	}
	for _, ni := range nodes {
		if ni.Node == nil {
			continue
		}
		if ni.PodsWithRequiredAntiAffinity > 0 || len(s.affinity)+len(s.anti) > 0 {
			for _, p := range ni.Pods {
				if err := pl.count(s, pod, p, ni.Node, 1); err != nil {
					return framework.AsStatus(err)
				}
			}
		}
	}
	state.Write(interPodAffinityPreFilterKey, s)
	return nil
}

// count adds d for existing pod p on node to the state of pod.
func (pl *InterPodAffinity) count(s *affinityState, pod *api.Pod, p *framework.PodInfo, node *api.Node, d int64) error {
	if p.WithRequiredAntiAffinity {
		terms, err := requiredTerms(p.Pod, p.Pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, 0)
		if err != nil {
			return fmt.Errorf("anti-affinity of pod %s: %w", p.Key, err)
		}
		for _, t := range terms {
			if t.matches(pod, pl.ns) {
				s.existingAnti.add(t.topologyKey, node, d)
			}
		}
	}
	if len(s.affinity) > 0 && allMatch(s.affinity, p.Pod, pl.ns) {
		for _, t := range s.affinity {
			s.affinityCounts.add(t.topologyKey, node, d)
		}
	}
	for _, t := range s.anti {
		if t.matches(p.Pod, pl.ns) {
			s.antiCounts.add(t.topologyKey, node, d)
		}
	}
	return nil
}

func allMatch(terms []*affinityTerm, pod *api.Pod, ns namespaceLabels) bool {
	if len(terms) == 0 {
		return false
	}
	for _, t := range terms {
		if !t.matches(pod, ns) {
			return false
		}
	}
	return true
}

// AddPod implements framework.PreFilterExtensions.
func (pl *InterPodAffinity) AddPod(_ context.Context, state *framework.CycleState, pod *api.Pod, p *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	return pl.update(state, pod, p, ni, 1)
}

// RemovePod implements framework.PreFilterExtensions.
func (pl *InterPodAffinity) RemovePod(_ context.Context, state *framework.CycleState, pod *api.Pod, p *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	return pl.update(state, pod, p, ni, -1)
}

func (pl *InterPodAffinity) update(state *framework.CycleState, pod *api.Pod, p *framework.PodInfo, ni *framework.NodeInfo, d int64) *framework.Status {
	d0, ok := state.Read(interPodAffinityPreFilterKey)
	if !ok || ni.Node == nil {
		return nil
	}
	return framework.AsStatus(pl.count(d0.(*affinityState), pod, p, ni.Node, d))
}

// Filter implements framework.FilterPlugin.
func (pl *InterPodAffinity) Filter(_ context.Context, state *framework.CycleState, pod *api.Pod, ni *framework.NodeInfo) *framework.Status {
	d, ok := state.Read(interPodAffinityPreFilterKey)
	if !ok {
		return nil
	}
	s := d.(*affinityState)
	node := ni.Node
	if len(s.affinity) > 0 {
		exist := true
		for _, t := range s.affinity {
			v, ok := node.Labels[t.topologyKey]
			if !ok {
				return pl.statusAffinity // every topology label must be on the node
			}
			if s.affinityCounts[topologyPair{t.topologyKey, v}] <= 0 {
				exist = false
			}
		}
		// The first pod of a group with affinity to itself may go where no
		// pod matches yet, or it would wait forever.
		if !exist && !(len(s.affinityCounts) == 0 && allMatch(s.affinity, pod, pl.ns)) {
			return pl.statusAffinity
		}
	}
	if len(s.antiCounts) > 0 {
		for _, t := range s.anti {
			if v, ok := node.Labels[t.topologyKey]; ok && s.antiCounts[topologyPair{t.topologyKey, v}] > 0 {
				return pl.statusAnti
			}
		}
	}
	if len(s.existingAnti) > 0 {
		for k, v := range node.Labels {
			if s.existingAnti[topologyPair{k, v}] > 0 {
				return pl.statusExisting
			}
		}
	}
	return nil
}

// affinityScores sums weights per topology key and value.
type affinityScores map[string]map[string]int64

func (m affinityScores) add(t *affinityTerm, node *api.Node, sign int64) {
	v, ok := node.Labels[t.topologyKey]
	if !ok {
		return
	}
	if m[t.topologyKey] == nil {
		m[t.topologyKey] = map[string]int64{}
	}
	m[t.topologyKey][v] += sign * t.weight
}

func (s affinityScores) Clone() framework.StateData { return s }

// PreScore implements framework.PreScorePlugin.
func (pl *InterPodAffinity) PreScore(_ context.Context, state *framework.CycleState, pod *api.Pod, _ []*framework.NodeInfo) *framework.Status {
	var pref, antiPref []*affinityTerm
	var err error
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil {
			if pref, err = weightedTerms(pod, a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
				return framework.AsStatus(err)
			}
		}
		if a.PodAntiAffinity != nil {
			if antiPref, err = weightedTerms(pod, a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
				return framework.AsStatus(err)
			}
		}
	}
	own := len(pref)+len(antiPref) > 0
	if withAffinity, _ := state.PodsWithAffinity(); !own && withAffinity == 0 {
		return framework.NewStatus(framework.Skip) // nothing to score: no pass over every node
	}
	scores := affinityScores{}
	for _, ni := range state.Nodes() {
		if ni.Node == nil || (!own && ni.PodsWithAffinity == 0) {
			continue
		}
		for _, p := range ni.Pods {
			for _, t := range pref {
				if t.matches(p.Pod, pl.ns) {
					scores.add(t, ni.Node, 1)
				}
			}
			for _, t := range antiPref {
				if t.matches(p.Pod, pl.ns) {
					scores.add(t, ni.Node, -1)
				}
			}
			if p.WithAffinity {
				if err := pl.existingTerms(scores, pod, p.Pod, ni.Node); err != nil {
					return framework.AsStatus(err)
				}
			}
		}
	}
	if len(scores) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(interPodAffinityPreScoreKey, scores)
	return nil
}

// existingTerms scores the terms of an existing pod that match pod.
func (pl *InterPodAffinity) existingTerms(scores affinityScores, pod, existing *api.Pod, node *api.Node) error {
	a := existing.Spec.Affinity
	if a.PodAffinity != nil {
		if pl.hardWeight > 0 {
			terms, err := requiredTerms(existing, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, pl.hardWeight)
			if err != nil {
				return err
			}
			for _, t := range terms {
				if t.matches(pod, pl.ns) {
					scores.add(t, node, 1)
				}
			}
		}
		if !pl.ignoreExisting {
			terms, err := weightedTerms(existing, a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
			if err != nil {
				return err
			}
			for _, t := range terms {
				if t.matches(pod, pl.ns) {
					scores.add(t, node, 1)
				}
			}
		}
	}
	if a.PodAntiAffinity != nil && !pl.ignoreExisting {
		terms, err := weightedTerms(existing, a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		if err != nil {
			return err
		}
		for _, t := range terms {
			if t.matches(pod, pl.ns) {
				scores.add(t, node, -1)
			}
		}
	}
	return nil
}

// Score implements framework.ScorePlugin: the node's domains' sums.
func (pl *InterPodAffinity) Score(_ context.Context, state *framework.CycleState, _ *api.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	d, ok := state.Read(interPodAffinityPreScoreKey)
	if !ok {
		return 0, nil
	}
	var score int64
	for key, values := range d.(affinityScores) {
		if v, ok := ni.Node.Labels[key]; ok {
			score += values[v]
		}
	}
	return score, nil
}

// NormalizeScore implements framework.ScorePlugin: scaled between the
// lowest (0) and highest (100) score, as Kubernetes.
func (pl *InterPodAffinity) NormalizeScore(_ context.Context, state *framework.CycleState, _ *api.Pod, scores []framework.NodeScore) *framework.Status {
	if _, ok := state.Read(interPodAffinityPreScoreKey); !ok {
		return nil
	}
	var lo, hi int64
	for _, s := range scores {
		lo, hi = min(lo, s.Score), max(hi, s.Score)
	}
	for i := range scores {
		if hi > lo {
			scores[i].Score = framework.MaxNodeScore * (scores[i].Score - lo) / (hi - lo)
		} else {
			scores[i].Score = 0
		}
	}
	return nil
}
