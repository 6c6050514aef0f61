package plugins

import (
	"context"
	"fmt"
	"log/slog"
	"math"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	v1 "k8s.io/kube-scheduler/config/v1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/scheduler/config"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// PodTopologySpread spreads the pods a selector matches evenly over
// topology domains (the nodes sharing a value of a label: a node, a zone,
// an NVLink domain), by the pod's topologySpreadConstraints:
//
//	skew = (matching pods in the node's domain + 1 if the pod matches itself)
//	       − (matching pods in the emptiest eligible domain)
//
// DoNotSchedule constraints filter: a node whose skew would pass maxSkew
// is out, "node(s) didn't match pod topology spread constraints"; one
// without the topology label is out for good, "... (missing required
// label)". With fewer eligible domains than minDomains the emptiest
// counts as 0. Eligible nodes are those matching the pod's nodeSelector
// and required node affinity (nodeAffinityPolicy Honor, the default) and,
// with nodeTaintsPolicy Honor, whose taints it tolerates.
//
// ScheduleAnyway constraints score: fewer matching pods in the node's
// domain is better, each constraint weighted by log(number of domains + 2),
// scaled so the best node gets 100.
//
// A pod without constraints gets the profile's default ones
// (PodTopologySpreadArgs): with defaultingType System, Kubernetes'
// "spread by node (maxSkew 3) and zone (maxSkew 5), ScheduleAnyway" for
// the pods of a Service, ReplicaSet or StatefulSet, selected as they
// select it;
// with List, defaultConstraints.
type PodTopologySpread struct {
	defaults        []api.TopologySpreadConstraint
	systemDefaulted bool
	owners          *spreadOwners // Services, ReplicaSets and StatefulSets, for default selectors
	statusSkew      *framework.Status
	statusNoLabel   *framework.Status
}

var (
	_ framework.PreFilterPlugin     = (*PodTopologySpread)(nil)
	_ framework.PreFilterExtensions = (*PodTopologySpread)(nil)
	_ framework.FilterPlugin        = (*PodTopologySpread)(nil)
	_ framework.PreScorePlugin      = (*PodTopologySpread)(nil)
	_ framework.ScorePlugin         = (*PodTopologySpread)(nil)
	_ framework.EventSourcePlugin   = (*PodTopologySpread)(nil)
)

// Kubernetes' words.
const (
	ReasonTopologySpreadNotMatch = "node(s) didn't match pod topology spread constraints"
	ReasonTopologyLabelMissing   = ReasonTopologySpreadNotMatch + " (missing required label)"
	spreadPreFilterKey           = framework.StateKey("PreFilter" + PodTopologySpreadName)
	spreadPreScoreKey            = framework.StateKey("PreScore" + PodTopologySpreadName)
)

// systemDefaultConstraints are Kubernetes' defaults for defaultingType
// System.
func systemDefaultConstraints() []api.TopologySpreadConstraint {
	return []api.TopologySpreadConstraint{
		{TopologyKey: api.LabelHostname, WhenUnsatisfiable: api.ScheduleAnyway, MaxSkew: 3},
		{TopologyKey: api.LabelTopologyZone, WhenUnsatisfiable: api.ScheduleAnyway, MaxSkew: 5},
	}
}

// NewPodTopologySpread returns the plugin for args (nil: the defaults);
// with System defaulting it watches c's Services, ReplicaSets and StatefulSets.
func NewPodTopologySpread(args *v1.PodTopologySpreadArgs, c client.Interface, log *slog.Logger) (*PodTopologySpread, error) {
	return NewPodTopologySpreadShared(args, c, nil, log)
}

// NewPodTopologySpreadShared is NewPodTopologySpread reading Services,
// ReplicaSets and StatefulSets from f's informers (the scheduler's; the
// process's shared factory); nil f: informers of its own.
func NewPodTopologySpreadShared(args *v1.PodTopologySpreadArgs, c client.Interface, f *client.InformerFactory, log *slog.Logger) (*PodTopologySpread, error) {
	if args == nil {
		args = config.DefaultArgs(PodTopologySpreadName).(*v1.PodTopologySpreadArgs)
	}
	valid, err := config.ValidArgs(PodTopologySpreadName, args)
	if err != nil {
		return nil, err
	}
	a := valid.(*v1.PodTopologySpreadArgs)
	pl := &PodTopologySpread{
		statusSkew:    framework.NewStatus(framework.Unschedulable, ReasonTopologySpreadNotMatch),
		statusNoLabel: framework.NewStatus(framework.UnschedulableAndUnresolvable, ReasonTopologyLabelMissing),
	}
	if a.DefaultingType == v1.SystemDefaulting {
		pl.systemDefaulted = true
		pl.defaults = systemDefaultConstraints()
	} else if err := convertJSON(a.DefaultConstraints, &pl.defaults); err != nil {
		return nil, fmt.Errorf("plugin %s: defaultConstraints: %w", PodTopologySpreadName, err)
	}
	if len(pl.defaults) > 0 {
		pl.owners = newSpreadOwners(c, f, log)
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*PodTopologySpread) Name() string { return PodTopologySpreadName }

// Run implements framework.EventSourcePlugin (Services, ReplicaSets and
// StatefulSets, whose selectors make the default constraints' selectors).
func (pl *PodTopologySpread) Run(ctx context.Context, moved func()) {
	if pl.owners != nil {
		pl.owners.run(ctx)
	}
}

// WaitForSync implements framework.EventSourcePlugin.
func (pl *PodTopologySpread) WaitForSync(ctx context.Context) bool {
	return pl.owners == nil || pl.owners.waitForSync(ctx)
}

// spreadConstraint is a constraint made ready: its selector resolved.
type spreadConstraint struct {
	maxSkew      int64
	minDomains   int64
	key          string
	selector     labels.Selector
	countKey     string // framework.MatchKey of the pod's namespace and selector
	honorTaints  bool
	honorAffined bool
}

// constraints returns the pod's constraints of kind action
// (DoNotSchedule or ScheduleAnyway), or the defaults when it has none.
func (pl *PodTopologySpread) constraints(pod *api.Pod, action string) ([]spreadConstraint, error) {
	src := pod.Spec.TopologySpreadConstraints
	var defSel labels.Selector
	if len(src) == 0 {
		if len(pl.defaults) == 0 || pl.owners == nil {
			return nil, nil
		}
		defSel = pl.owners.defaultSelector(pod)
		if defSel.Empty() {
			return nil, nil
		}
		src = pl.defaults
	}
	var out []spreadConstraint
	for _, c := range src {
		if c.WhenUnsatisfiable != action {
			continue
		}
		sel := defSel
		if sel == nil {
			var err error
			if sel, err = c.LabelSelector.AsSelector(); err != nil {
				return nil, err
			}
			if c.LabelSelector != nil {
				for _, k := range c.MatchLabelKeys {
					if v, ok := pod.Labels[k]; ok {
						r, err := labels.NewRequirement(k, selection.In, []string{v})
						if err != nil {
							return nil, err
						}
						sel = sel.Add(*r)
					}
				}
			}
		}
		sc := spreadConstraint{maxSkew: int64(c.MaxSkew), minDomains: 1, key: c.TopologyKey, selector: sel,
			countKey:     framework.MatchKey(pod.Namespace, sel),
			honorTaints:  c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == api.PolicyHonor,
			honorAffined: c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == api.PolicyHonor}
		if c.MinDomains != nil {
			sc.minDomains = int64(*c.MinDomains)
		}
		out = append(out, sc)
	}
	return out, nil
}

// eligible reports whether node counts for c (the node inclusion policies).
func (c *spreadConstraint) eligible(pod *api.Pod, node *api.Node) bool {
	if c.honorAffined && !RequiredNodeAffinityMatches(pod, node) {
		return false
	}
	if c.honorTaints && untoleratedTaint(pod, node) {
		return false
	}
	return true
}

func untoleratedTaint(pod *api.Pod, node *api.Node) bool {
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if (t.Effect == api.TaintEffectNoSched || t.Effect == api.TaintEffectNoExec) && !TolerationsTolerateTaint(pod.Spec.Tolerations, t) {
			return true
		}
	}
	return false
}

// hasKeys reports whether node carries every constraint's topology key.
func hasKeys(node *api.Node, cs []spreadConstraint) bool {
	for _, c := range cs {
		if _, ok := node.Labels[c.key]; !ok {
			return false
		}
	}
	return true
}

// spreadState is what PreFilter counts: per constraint, the matching pods
// per domain of the eligible nodes.
type spreadState struct {
	constraints []spreadConstraint
	counts      []map[string]int64
}

func (s *spreadState) Clone() framework.StateData {
	out := &spreadState{constraints: s.constraints, counts: make([]map[string]int64, len(s.counts))}
	for i, m := range s.counts {
		out.counts[i] = make(map[string]int64, len(m))
		for k, v := range m {
			out.counts[i][k] = v
		}
	}
	return out
}

// minMatch is the count of the emptiest domain of constraint i (0 with
// fewer domains than minDomains).
func (s *spreadState) minMatch(i int) int64 {
	m := s.counts[i]
	if int64(len(m)) < s.constraints[i].minDomains {
		return 0
	}
	low := int64(math.MaxInt64)
	for _, v := range m {
		low = min(low, v)
	}
	if low == math.MaxInt64 {
		return 0
	}
	return low
}

// PreFilter implements framework.PreFilterPlugin.
func (pl *PodTopologySpread) PreFilter(_ context.Context, state *framework.CycleState, pod *api.Pod) *framework.Status {
	cs, err := pl.constraints(pod, api.DoNotSchedule)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("topology spread constraints: %w", err))
	}
	if len(cs) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	s := &spreadState{constraints: cs, counts: make([]map[string]int64, len(cs))}
	for i := range cs {
		s.counts[i] = map[string]int64{}
	}
	for _, ni := range state.Nodes() {
		if ni.Node == nil || !hasKeys(ni.Node, cs) {
			continue
		}
		for i := range cs {
			c := &cs[i]
			if !c.eligible(pod, ni.Node) {
				continue
			}
			s.counts[i][ni.Node.Labels[c.key]] += ni.CountMatching(pod.Namespace, c.selector, c.countKey)
		}
	}
	state.Write(spreadPreFilterKey, s)
	return nil
}

// AddPod implements framework.PreFilterExtensions.
func (pl *PodTopologySpread) AddPod(_ context.Context, state *framework.CycleState, pod *api.Pod, p *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	pl.update(state, pod, p, ni, 1)
	return nil
}

// RemovePod implements framework.PreFilterExtensions.
func (pl *PodTopologySpread) RemovePod(_ context.Context, state *framework.CycleState, pod *api.Pod, p *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	pl.update(state, pod, p, ni, -1)
	return nil
}

func (pl *PodTopologySpread) update(state *framework.CycleState, pod *api.Pod, p *framework.PodInfo, ni *framework.NodeInfo, d int64) {
	d0, ok := state.Read(spreadPreFilterKey)
	if !ok || ni.Node == nil || p.Pod.Namespace != pod.Namespace {
		return
	}
	s := d0.(*spreadState)
	if !hasKeys(ni.Node, s.constraints) {
		return
	}
	for i := range s.constraints {
		c := &s.constraints[i]
		if c.eligible(pod, ni.Node) && c.selector.Matches(labels.Set(p.Pod.Labels)) {
			s.counts[i][ni.Node.Labels[c.key]] += d
		}
	}
}

// Filter implements framework.FilterPlugin.
func (pl *PodTopologySpread) Filter(_ context.Context, state *framework.CycleState, pod *api.Pod, ni *framework.NodeInfo) *framework.Status {
	d, ok := state.Read(spreadPreFilterKey)
	if !ok {
		return nil
	}
	s := d.(*spreadState)
	for i := range s.constraints {
		c := &s.constraints[i]
		v, ok := ni.Node.Labels[c.key]
		if !ok {
			return pl.statusNoLabel
		}
		self := int64(0)
		if c.selector.Matches(labels.Set(pod.Labels)) {
			self = 1
		}
		if s.counts[i][v]+self-s.minMatch(i) > c.maxSkew {
			return pl.statusSkew
		}
	}
	return nil
}

// spreadScoreState is what PreScore counts for the ScheduleAnyway constraints.
type spreadScoreState struct {
	constraints []spreadConstraint
	ignored     map[string]bool    // feasible nodes lacking a topology key
	counts      []map[string]int64 // per constraint (not hostname): per domain
	weights     []float64          // log(domains + 2)
	namespace   string
}

func (s *spreadScoreState) Clone() framework.StateData { return s }

// PreScore implements framework.PreScorePlugin.
func (pl *PodTopologySpread) PreScore(_ context.Context, state *framework.CycleState, pod *api.Pod, feasible []*framework.NodeInfo) *framework.Status {
	cs, err := pl.constraints(pod, api.ScheduleAnyway)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("topology spread constraints: %w", err))
	}
	all := state.Nodes()
	if len(cs) == 0 || len(all) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	// Only the pod's own constraints need every key on a node: with the
	// system defaults, nodes without a zone still spread by hostname.
	requireAll := len(pod.Spec.TopologySpreadConstraints) > 0 || !pl.systemDefaulted
	s := &spreadScoreState{constraints: cs, ignored: map[string]bool{}, counts: make([]map[string]int64, len(cs)), weights: make([]float64, len(cs)), namespace: pod.Namespace}
	for i := range cs {
		s.counts[i] = map[string]int64{}
	}
	for _, ni := range feasible {
		if requireAll && !hasKeys(ni.Node, cs) {
			s.ignored[ni.Node.Name] = true
			continue
		}
		for i, c := range cs {
			if c.key != api.LabelHostname {
				s.counts[i][ni.Node.Labels[c.key]] += 0 // a domain of a candidate node
			}
		}
	}
	for i, c := range cs {
		size := len(s.counts[i])
		if c.key == api.LabelHostname {
			size = len(feasible) - len(s.ignored)
		}
		s.weights[i] = math.Log(float64(size + 2))
	}
	for _, ni := range all {
		if ni.Node == nil || (requireAll && !hasKeys(ni.Node, cs)) {
			continue
		}
		for i := range cs {
			c := &cs[i]
			if c.key == api.LabelHostname || !c.eligible(pod, ni.Node) {
				continue
			}
			v := ni.Node.Labels[c.key]
			if _, ok := s.counts[i][v]; ok {
				s.counts[i][v] += ni.CountMatching(pod.Namespace, c.selector, c.countKey)
			}
		}
	}
	state.Write(spreadPreScoreKey, s)
	return nil
}

// Score implements framework.ScorePlugin: the matching pods the node's
// domains hold (fewer is better; NormalizeScore turns it around).
func (pl *PodTopologySpread) Score(_ context.Context, state *framework.CycleState, _ *api.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	d, ok := state.Read(spreadPreScoreKey)
	if !ok {
		return 0, nil
	}
	s := d.(*spreadScoreState)
	if s.ignored[ni.Node.Name] {
		return 0, nil
	}
	var score float64
	for i, c := range s.constraints {
		v, ok := ni.Node.Labels[c.key]
		if !ok {
			continue
		}
		var cnt int64
		if c.key == api.LabelHostname {
			cnt = ni.CountMatching(s.namespace, c.selector, c.countKey)
		} else {
			cnt = s.counts[i][v]
		}
		score += float64(cnt)*s.weights[i] + float64(c.maxSkew-1)
	}
	return int64(math.Round(score)), nil
}

// NormalizeScore implements framework.ScorePlugin, as Kubernetes: the
// node with the fewest matching pods gets 100, ignored nodes 0.
func (pl *PodTopologySpread) NormalizeScore(_ context.Context, state *framework.CycleState, _ *api.Pod, scores []framework.NodeScore) *framework.Status {
	d, ok := state.Read(spreadPreScoreKey)
	if !ok {
		return nil
	}
	s := d.(*spreadScoreState)
	lo, hi := int64(math.MaxInt64), int64(0)
	for _, sc := range scores {
		if s.ignored[sc.Name] {
			continue
		}
		lo, hi = min(lo, sc.Score), max(hi, sc.Score)
	}
	for i := range scores {
		switch {
		case s.ignored[scores[i].Name]:
			scores[i].Score = 0
		case hi == 0:
			scores[i].Score = framework.MaxNodeScore
		default:
			scores[i].Score = framework.MaxNodeScore * (hi + lo - scores[i].Score) / hi
		}
	}
	return nil
}

// spreadOwners knows the Services, ReplicaSets and StatefulSets whose
// selectors make a pod's default spreading selector (Kubernetes'
// DefaultSelector; skiff has no ReplicationControllers).
type spreadOwners struct {
	services, replicaSets, statefulSets *client.Informer
	informers                           *client.InformerFactory
	own                                 bool // informers made here: run runs and waits for them
}

func newSpreadOwners(c client.Interface, f *client.InformerFactory, log *slog.Logger) *spreadOwners {
	if c == nil {
		return nil
	}
	f, own := informersOf(c, f, log)
	return &spreadOwners{services: f.InformerFor(&api.Service{}), replicaSets: f.InformerFor(&api.ReplicaSet{}),
		statefulSets: f.InformerFor(&api.StatefulSet{}), informers: f, own: own}
}

func (o *spreadOwners) run(ctx context.Context) {
	o.informers.Start(ctx) // a no-op when the scheduler started them
	<-ctx.Done()
	if o.own {
		o.informers.Wait()
	}
}

func (o *spreadOwners) waitForSync(ctx context.Context) bool {
	return o.services.WaitForSync(ctx) && o.replicaSets.WaitForSync(ctx) && o.statefulSets.WaitForSync(ctx)
}

// defaultSelector merges the selectors of the Services in the pod's
// namespace that select it and of the ReplicaSet or StatefulSet that
// controls it.
func (o *spreadOwners) defaultSelector(pod *api.Pod) labels.Selector {
	set := labels.Set{}
	for _, obj := range o.services.List() {
		svc := obj.(*api.Service)
		if svc.Namespace != pod.Namespace || len(svc.Spec.Selector) == 0 {
			continue
		}
		if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			set = labels.Merge(set, svc.Spec.Selector)
		}
	}
	sel := labels.SelectorFromSet(set)
	for _, ref := range pod.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		var owner *api.LabelSelector
		switch ref.Kind {
		case "ReplicaSet":
			if obj, ok := o.replicaSets.Get(pod.Namespace, ref.Name); ok {
				owner = obj.(*api.ReplicaSet).Spec.Selector
			}
		case "StatefulSet":
			if obj, ok := o.statefulSets.Get(pod.Namespace, ref.Name); ok {
				owner = obj.(*api.StatefulSet).Spec.Selector
			}
		}
		if owner == nil {
			continue
		}
		if other, err := owner.AsSelector(); err == nil {
			if reqs, ok := other.Requirements(); ok {
				sel = sel.Add(reqs...)
			}
		}
	}
	return sel
}
