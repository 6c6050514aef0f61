package plugins

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// VolumeBinding places pods that use PersistentVolumeClaims, as
// Kubernetes' volumebinding plugin:
//
//	PreFilter  every claim the pod names must exist and not be being
//	           deleted; a claim not bound yet whose class binds at once
//	           (Immediate) is the persistent volume controller's to bind
//	           first: "pod has unbound immediate PersistentVolumeClaims"
//	Filter     per node: a bound claim's volume must be usable there (its
//	           nodeAffinity: "node(s) had volume node affinity conflict");
//	           a claim waiting for its first consumer (WaitForFirstConsumer)
//	           needs a free volume that fits and may be used there, or a
//	           class whose provisioner can make one there (allowedTopologies)
//	           ("node(s) didn't find available persistent volumes to bind");
//	           a claim whose volume is being made for a node pins the pod to it
//	Reserve    choose, on the chosen node, a volume for each waiting claim
//	           (the smallest that fits) or provisioning; held in memory so
//	           the next pods do not take the same volume
//	PreBind    write it: a chosen volume's claimRef (the persistent volume
//	           controller then binds both halves), or the claim's annotation
//	           volume.kubernetes.io/selected-node (the node's provisioner,
//	           agent/localpath, then makes the volume); then wait until every
//	           claim is bound, at most BindTimeout, before the pod is bound
//
// So a pod on a claim bound to a node's local volume goes to that node, and
// a new claim of the default class local-path gets its directory on
// whichever node the scheduler picked for its first pod.
type VolumeBinding struct {
	client client.Interface
	log    *slog.Logger
	// BindTimeout bounds PreBind's wait for the claims to be bound
	// (Kubernetes' bindTimeoutSeconds, 600).
	BindTimeout time.Duration

	claims, volumes, classes *client.Informer
	informers                *client.InformerFactory // the scheduler's (shared) or its own
	own                      bool                    // informers made here: Run waits for them
	registered               chan struct{}           // closed once Run's handlers are on the informers

	mu sync.Mutex
	// assumed: volumes Reserve chose, by name, with the claim (namespace/name)
	// they are for, until the informer shows them taken or Unreserve.
	assumed map[string]string
	// changed is closed and replaced at every claim or volume event, so
	// PreBind can wait for the next one.
	changed chan struct{}
}

var (
	_ framework.PreFilterPlugin   = (*VolumeBinding)(nil)
	_ framework.FilterPlugin      = (*VolumeBinding)(nil)
	_ framework.ReservePlugin     = (*VolumeBinding)(nil)
	_ framework.PreBindPlugin     = (*VolumeBinding)(nil)
	_ framework.EventSourcePlugin = (*VolumeBinding)(nil)
)

// Kubernetes' words (volumebinding.ConflictReason).
const (
	ReasonBindConflict     = "node(s) didn't find available persistent volumes to bind"
	ReasonNodeConflict     = "node(s) had volume node affinity conflict"
	ReasonPVNotExist       = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
	ReasonUnboundImmediate = "pod has unbound immediate PersistentVolumeClaims"
	volumeBindingStateKey  = framework.StateKey("PreFilter" + VolumeBindingName)
	// DefaultBindTimeout is Kubernetes' bindTimeoutSeconds.
	DefaultBindTimeout = 600 * time.Second
)

// NewVolumeBinding makes the plugin reading claims, volumes and classes
// from f (the scheduler's shared informers) when f reads through c, else
// from informers of its own on c; Run starts them.
func NewVolumeBinding(c client.Interface, f *client.InformerFactory, log *slog.Logger) *VolumeBinding {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pl := &VolumeBinding{client: c, log: log.With("plugin", VolumeBindingName), BindTimeout: DefaultBindTimeout,
		assumed: map[string]string{}, changed: make(chan struct{}), registered: make(chan struct{})}
	pl.informers, pl.own = informersOf(c, f, log)
	pl.claims = pl.informers.InformerFor(&api.PersistentVolumeClaim{})
	pl.volumes = pl.informers.InformerFor(&api.PersistentVolume{})
	pl.classes = pl.informers.InformerFor(&api.StorageClass{})
	return pl
}

// Name implements framework.Plugin.
func (*VolumeBinding) Name() string { return VolumeBindingName }

// Run implements framework.EventSourcePlugin: a claim bound, a volume made
// or freed, a class added may let a waiting pod fit.
func (pl *VolumeBinding) Run(ctx context.Context, moved func()) {
	h := client.Handler{
		OnAdd:    func(o api.Object) { pl.seen(o); moved() },
		OnUpdate: func(_, o api.Object) { pl.seen(o); moved() },
		OnDelete: func(o api.Object) { pl.seen(o); moved() },
	}
	infs := []*client.Informer{pl.claims, pl.volumes, pl.classes}
	regs := make([]client.Registration, len(infs))
	for i, inf := range infs {
		regs[i] = inf.AddHandler(h)
	}
	close(pl.registered)
	pl.informers.Start(ctx) // a no-op when the scheduler started them
	<-ctx.Done()
	for i, inf := range infs {
		inf.RemoveHandler(regs[i])
	}
	if pl.own {
		pl.informers.Wait()
	}
}

// seen forgets an assumed volume the informer now shows taken, and wakes
// PreBind's waits.
func (pl *VolumeBinding) seen(o api.Object) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pv, ok := o.(*api.PersistentVolume); ok && pv.Spec.ClaimRef != nil {
		delete(pl.assumed, pv.Name)
	}
	close(pl.changed)
	pl.changed = make(chan struct{})
}

// WaitForSync implements framework.EventSourcePlugin.
func (pl *VolumeBinding) WaitForSync(ctx context.Context) bool {
	select {
	case <-pl.registered:
	case <-ctx.Done():
		return false
	}
	return pl.claims.WaitForSync(ctx) && pl.volumes.WaitForSync(ctx) && pl.classes.WaitForSync(ctx)
}

// volumeState is what PreFilter found for one pod.
type volumeState struct {
	// bound: the volumes of the pod's bound claims; missing: a bound
	// claim's volume does not exist.
	bound   []*api.PersistentVolume
	missing bool
	// toBind: claims waiting for their first consumer, with their class.
	toBind  []*api.PersistentVolumeClaim
	classes map[string]*api.StorageClass
	// free: the volumes no claim holds, at PreFilter.
	free []*api.PersistentVolume
	// perNode: Filter's decision on each node that passed, claim key →
	// volume name ("" = provision); Filter runs on several goroutines.
	mu      sync.Mutex
	perNode map[string]map[string]string
	// chosen: Reserve's, for the chosen node.
	chosen map[string]string
}

// Clone implements framework.StateData (nothing but Reserve writes it).
func (s *volumeState) Clone() framework.StateData { return s }

// PreFilter implements framework.PreFilterPlugin.
func (pl *VolumeBinding) PreFilter(_ context.Context, state *framework.CycleState, pod *api.Pod) *framework.Status {
	names := api.ClaimsOf(pod)
	if len(names) == 0 {
		return framework.NewStatus(framework.Skip) // as Kubernetes': no Filter per node
	}
	s := &volumeState{classes: map[string]*api.StorageClass{}, perNode: map[string]map[string]string{}}
	for _, name := range names {
		o, ok := pl.claims.Get(pod.Namespace, name)
		if !ok {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("persistentvolumeclaim %q not found", name))
		}
		c := o.(*api.PersistentVolumeClaim)
		if c.DeletionTimestamp != nil {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("persistentvolumeclaim %q is being deleted", name))
		}
		if c.Spec.VolumeName != "" {
			if pv, ok := pl.volumes.Get("", c.Spec.VolumeName); ok {
				s.bound = append(s.bound, pv.(*api.PersistentVolume))
			} else {
				s.missing = true
			}
			continue
		}
		class := api.ClaimClass(c)
		var sc *api.StorageClass
		if o, ok := pl.classes.Get("", class); ok {
			sc = o.(*api.StorageClass)
		}
		if class == "" || api.BindingMode(sc) != api.VolumeBindingWaitForFirstConsumer {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, ReasonUnboundImmediate)
		}
		s.classes[class] = sc
		s.toBind = append(s.toBind, c)
	}
	if len(s.toBind) > 0 {
		for _, o := range pl.volumes.List() {
			if pv := o.(*api.PersistentVolume); pv.Spec.ClaimRef == nil && pv.DeletionTimestamp == nil && pv.Status.Phase == api.VolumeAvailable {
				s.free = append(s.free, pv)
			}
		}
	}
	state.Write(volumeBindingStateKey, s)
	return nil
}

// Filter implements framework.FilterPlugin.
func (pl *VolumeBinding) Filter(_ context.Context, state *framework.CycleState, _ *api.Pod, ni *framework.NodeInfo) *framework.Status {
	d, ok := state.Read(volumeBindingStateKey)
	if !ok {
		return nil
	}
	s := d.(*volumeState)
	var reasons []string
	if s.missing {
		reasons = append(reasons, ReasonPVNotExist)
	}
	for _, pv := range s.bound {
		if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil && !NodeSelectorMatches(a.Required, ni.Node) {
			reasons = append(reasons, ReasonNodeConflict)
			break
		}
	}
	if len(s.toBind) > 0 {
		if chosen, ok := pl.match(s, ni.Node); !ok {
			reasons = append(reasons, ReasonBindConflict)
		} else {
			s.mu.Lock()
			s.perNode[ni.Node.Name] = chosen
			s.mu.Unlock()
		}
	}
	if len(reasons) > 0 {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, reasons...)
	}
	return nil
}

// match decides, for node, a volume or provisioning for every claim in
// s.toBind: claim key → volume name, "" to provision. ok is false when a
// claim can have neither there.
func (pl *VolumeBinding) match(s *volumeState, node *api.Node) (map[string]string, bool) {
	out := make(map[string]string, len(s.toBind))
	taken := map[string]bool{}
	pl.mu.Lock()
	for name := range pl.assumed {
		taken[name] = true
	}
	pl.mu.Unlock()
	for _, c := range s.toBind {
		key := api.KeyOf(c)
		if sel, ok := c.Annotations[api.AnnotationSelectedNode]; ok {
			// Its volume is being made for a node: only that one will do.
			if sel != node.Name {
				return nil, false
			}
			out[key] = ""
			continue
		}
		if pv := smallestFit(c, s.free, node, taken); pv != nil {
			taken[pv.Name] = true
			out[key] = pv.Name
			continue
		}
		sc := s.classes[api.ClaimClass(c)]
		if sc == nil || sc.Provisioner == api.NoProvisioner || !topologyAllows(sc.AllowedTopologies, node) {
			return nil, false
		}
		out[key] = ""
	}
	return out, true
}

// smallestFit is the smallest free volume of the claim's class that fits
// it and may be used on node.
func smallestFit(c *api.PersistentVolumeClaim, free []*api.PersistentVolume, node *api.Node, taken map[string]bool) *api.PersistentVolume {
	var best *api.PersistentVolume
	want := c.Spec.Resources.Requests[api.ResourceStorage]
	for _, pv := range free {
		have := pv.Spec.Capacity[api.ResourceStorage]
		if taken[pv.Name] || api.VolumeClass(pv) != api.ClaimClass(c) || have.Cmp(want) < 0 {
			continue
		}
		if slices.ContainsFunc(c.Spec.AccessModes, func(m string) bool { return !slices.Contains(pv.Spec.AccessModes, m) }) {
			continue
		}
		if c.Spec.Selector != nil {
			if sel, err := c.Spec.Selector.AsSelector(); err != nil || !sel.Matches(labels.Set(pv.Labels)) {
				continue
			}
		}
		if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil && !NodeSelectorMatches(a.Required, node) {
			continue
		}
		if best != nil {
			b := best.Spec.Capacity[api.ResourceStorage]
			if d := have.Cmp(b); d > 0 || d == 0 && pv.Name > best.Name {
				continue
			}
		}
		best = pv
	}
	return best
}

// topologyAllows reports whether a class's allowedTopologies admit node
// (none: every node).
func topologyAllows(terms []api.TopologySelectorTerm, node *api.Node) bool {
	if len(terms) == 0 {
		return true
	}
	for _, t := range terms {
		ok := true
		for _, e := range t.MatchLabelExpressions {
			if v, has := node.Labels[e.Key]; !has || !slices.Contains(e.Values, v) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// Reserve implements framework.ReservePlugin: the decision Filter made
// for the chosen node.
func (pl *VolumeBinding) Reserve(_ context.Context, state *framework.CycleState, _ *api.Pod, nodeName string) *framework.Status {
	d, ok := state.Read(volumeBindingStateKey)
	if !ok || len(d.(*volumeState).toBind) == 0 {
		return nil
	}
	s := d.(*volumeState)
	s.mu.Lock()
	chosen, ok := s.perNode[nodeName]
	s.mu.Unlock()
	if !ok {
		return framework.NewStatus(framework.Unschedulable, ReasonBindConflict)
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for key, pv := range chosen {
		if pv != "" {
			if other, taken := pl.assumed[pv]; taken && other != key {
				return framework.NewStatus(framework.Unschedulable, ReasonBindConflict)
			}
		}
	}
	for key, pv := range chosen {
		if pv != "" {
			pl.assumed[pv] = key
		}
	}
	s.chosen = chosen
	return nil
}

// Unreserve implements framework.ReservePlugin.
func (pl *VolumeBinding) Unreserve(_ context.Context, state *framework.CycleState, _ *api.Pod, _ string) {
	d, ok := state.Read(volumeBindingStateKey)
	if !ok {
		return
	}
	s := d.(*volumeState)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for key, pv := range s.chosen {
		if pv != "" && pl.assumed[pv] == key {
			delete(pl.assumed, pv)
		}
	}
	s.chosen = nil
}
