package plugins

import (
	"context"

	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// The queueing hints of the built-in plugins (framework/events.go): for
// a pod each plugin turned away, which cluster events may let it fit. As
// Kubernetes' EventsToRegister of the same plugins; each answers from the
// pod and the changed object only, quickly, under the queue's lock.

func asPod(o any) *api.Pod {
	p, _ := o.(*api.Pod)
	return p
}

func asNode(o any) *api.Node {
	n, _ := o.(*api.Node)
	return n
}

func ev(r framework.EventResource, a framework.ActionType, fn framework.QueueingHintFn) framework.ClusterEventWithHint {
	return framework.ClusterEventWithHint{Event: framework.ClusterEvent{Resource: r, ActionType: a}, QueueingHintFn: fn}
}

// either asks f of the old and new pod of an event, those there are
// (Queue when neither is).
func either(old, cur *api.Pod, f func(*api.Pod) bool) framework.QueueingHint {
	if old == nil && cur == nil {
		return framework.Queue
	}
	return hint(old != nil && f(old) || cur != nil && f(cur))
}

func hint(b bool) framework.QueueingHint {
	if b {
		return framework.Queue
	}
	return framework.QueueSkip
}

// EventsToRegister implements framework.EnqueueExtensions: a node becomes
// schedulable (uncordoned) or comes.
func (*NodeUnschedulable) EventsToRegister(context.Context) []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{ev(framework.Node, framework.Add|framework.UpdateNodeTaint, func(pod *api.Pod, _, n any) framework.QueueingHint {
		node := asNode(n)
		return hint(node != nil && !node.Spec.Unschedulable)
	})}
}

// EventsToRegister implements framework.EnqueueExtensions: the named node comes.
func (*NodeName) EventsToRegister(context.Context) []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{ev(framework.Node, framework.Add, func(pod *api.Pod, _, n any) framework.QueueingHint {
		node := asNode(n)
		return hint(node != nil && node.Name == pod.Spec.NodeName)
	})}
}

// EventsToRegister implements framework.EnqueueExtensions: a node whose
// taints the pod tolerates comes, or a node's taints change so.
func (*TaintToleration) EventsToRegister(context.Context) []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{ev(framework.Node, framework.Add|framework.UpdateNodeTaint, func(pod *api.Pod, _, n any) framework.QueueingHint {
		node := asNode(n)
		return hint(node != nil && !untoleratedTaint(pod, node))
	})}
}

// EventsToRegister implements framework.EnqueueExtensions: a node becomes Ready.
func (*NodeReady) EventsToRegister(context.Context) []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{ev(framework.Node, framework.Add|framework.UpdateNodeCondition, func(pod *api.Pod, _, n any) framework.QueueingHint {
		node := asNode(n)
		return hint(node != nil && (&NodeReady{}).Filter(context.Background(), nil, pod, &framework.NodeInfo{Node: node}).IsSuccess())
	})}
}

// EventsToRegister implements framework.EnqueueExtensions: a node comes
// or is relabelled so that it matches the pod's selector and affinity
// (and did not before).
func (pl *NodeAffinity) EventsToRegister(context.Context) []framework.ClusterEventWithHint {
	matches := func(pod *api.Pod, node *api.Node) bool {
		return node != nil && (pl.added == nil || requiredMatches(pl.added, node)) && RequiredNodeAffinityMatches(pod, node)
	}
	return []framework.ClusterEventWithHint{ev(framework.Node, framework.Add|framework.UpdateNodeLabel, func(pod *api.Pod, o, n any) framework.QueueingHint {
		return hint(matches(pod, asNode(n)) && (o == nil || !matches(pod, asNode(o))))
	})}
}

// EventsToRegister implements framework.EnqueueExtensions: a pod holding
// one of the pod's host ports goes, or a node comes.
func (*NodePorts) EventsToRegister(context.Context) []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{
		ev(framework.AssignedPod, framework.Delete, func(pod *api.Pod, o, _ any) framework.QueueingHint {
			gone := asPod(o)
			if gone == nil {
				return framework.Queue
			}
			want := framework.PodHostPorts(pod)
			for _, p := range framework.PodHostPorts(gone) {
				for _, w := range want {
					if p == w {
						return framework.Queue
					}
				}
			}
			return framework.QueueSkip
		}),
		ev(framework.Node, framework.Add, nil),
	}
}

// EventsToRegister implements framework.EnqueueExtensions: a pod that
// held something the pod asks for goes (deleted, finished), a node with
// room for it comes or grows, or a claim releases GPUs (one inventory
// with DRA).
func (f *NodeResourcesFit) EventsToRegister(context.Context) []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{
		ev(framework.AssignedPod, framework.Delete|framework.UpdatePodScaleDown, func(pod *api.Pod, o, _ any) framework.QueueingHint {
			gone := asPod(o)
			if gone == nil {
				return framework.Queue
			}
			req, _ := framework.PodRequests(pod)
			held, _ := framework.PodRequests(gone)
			return hint(sharesResource(req, held))
		}),
		ev(framework.Node, framework.Add|framework.UpdateNodeAllocatable, func(pod *api.Pod, o, n any) framework.QueueingHint {
			node := asNode(n)
			if node == nil {
				return framework.Queue
			}
			req, _ := framework.PodRequests(pod)
			alloc := framework.NewResource(node.Status.Allocatable)
			if !fitsEmpty(req, alloc, f, hamiNode(node)) {
				return framework.QueueSkip // too small even when empty
			}
			old := asNode(o)
			return hint(old == nil || grew(req, framework.NewResource(old.Status.Allocatable), alloc))
		}),
		ev(framework.ResourceClaim, framework.Update|framework.Delete, func(pod *api.Pod, o, _ any) framework.QueueingHint {
			c, _ := o.(*api.ResourceClaim)
			req, _ := framework.PodRequests(pod)
			return hint(req.Scalar[api.ResourceNvidiaGPU] > 0 && (c == nil || c.Status.Allocation != nil))
		}),
	}
}

// sharesResource reports whether the gone pod held some resource the pod
// requests (cpu, memory, an extended resource); a pod that requests
// nothing was turned away for a pod slot, which any pod frees.
func sharesResource(req, gone framework.Resource) bool {
	if req.MilliCPU == 0 && req.Memory == 0 && len(req.Scalar) == 0 {
		return true
	}
	if req.MilliCPU > 0 && gone.MilliCPU > 0 || req.Memory > 0 && gone.Memory > 0 {
		return true
	}
	for k, v := range req.Scalar {
		if v > 0 && gone.Scalar[k] > 0 {
			return true
		}
	}
	return false
}

// fitsEmpty reports whether req fits alloc on an empty node.
func fitsEmpty(req, alloc framework.Resource, f *NodeResourcesFit, hami bool) bool {
	if req.MilliCPU > alloc.MilliCPU || req.Memory > alloc.Memory {
		return false
	}
	for k, v := range req.Scalar {
		if !f.isIgnored(k) && !(hami && api.HAMiManagedResource(k)) && v > alloc.Scalar[k] {
			return false
		}
	}
	return true
}

// grew reports whether allocatable grew for a resource req asks for.
func grew(req, old, cur framework.Resource) bool {
	if req.MilliCPU > 0 && cur.MilliCPU > old.MilliCPU || req.Memory > 0 && cur.Memory > old.Memory || cur.Pods > old.Pods {
		return true
	}
	for k, v := range req.Scalar {
		if v > 0 && cur.Scalar[k] > old.Scalar[k] {
			return true
		}
	}
	return false
}

// EventsToRegister implements framework.EnqueueExtensions: a pod the
// pod's constraints count comes, goes or is relabelled in its namespace,
// or a node with the topology labels comes, goes or changes.
func (pl *PodTopologySpread) EventsToRegister(context.Context) []framework.ClusterEventWithHint {
	counted := func(pod *api.Pod, other *api.Pod) bool {
		if other == nil {
			return true
		}
		if other.Namespace != pod.Namespace {
			return false
		}
		cs, err := pl.constraints(pod, api.DoNotSchedule)
		if err != nil {
			return true
		}
		for _, c := range cs {
			if c.selector.Matches(labels.Set(other.Labels)) {
				return true
			}
		}
		return false
	}
	return []framework.ClusterEventWithHint{
		ev(framework.AssignedPod, framework.Add|framework.Delete|framework.UpdatePodLabel, func(pod *api.Pod, o, n any) framework.QueueingHint {
			return either(asPod(o), asPod(n), func(other *api.Pod) bool { return counted(pod, other) })
		}),
		ev(framework.Node, framework.Add|framework.Delete|framework.UpdateNodeLabel|framework.UpdateNodeTaint, func(pod *api.Pod, o, n any) framework.QueueingHint {
			for _, c := range pod.Spec.TopologySpreadConstraints {
				for _, node := range []*api.Node{asNode(o), asNode(n)} {
					if node == nil {
						continue
					}
					if _, ok := node.Labels[c.TopologyKey]; ok {
						return framework.Queue
					}
				}
			}
			return hint(len(pod.Spec.TopologySpreadConstraints) == 0)
		}),
	}
}

// EventsToRegister implements framework.EnqueueExtensions: a pod that
// satisfies the pod's affinity comes (or is relabelled so), a pod that
// repelled it goes, a node's topology labels change, a namespace's labels
// change (namespaceSelector).
func (pl *InterPodAffinity) EventsToRegister(context.Context) []framework.ClusterEventWithHint {
	affects := func(pod, other *api.Pod) bool {
		if other == nil {
			return true
		}
		a := pod.Spec.Affinity
		if a != nil && a.PodAffinity != nil {
			terms, err := requiredTerms(pod, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, 0)
			if err != nil || allMatch(terms, other, pl.ns) {
				return true
			}
		}
		if a != nil && a.PodAntiAffinity != nil {
			terms, err := requiredTerms(pod, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, 0)
			if err != nil {
				return true
			}
			for _, t := range terms {
				if t.matches(other, pl.ns) {
					return true
				}
			}
		}
		if oa := other.Spec.Affinity; oa != nil && oa.PodAntiAffinity != nil {
			terms, err := requiredTerms(other, oa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, 0)
			if err != nil {
				return true
			}
			for _, t := range terms {
				if t.matches(pod, pl.ns) {
					return true
				}
			}
		}
		return false
	}
	return []framework.ClusterEventWithHint{
		ev(framework.AssignedPod, framework.Add|framework.Delete|framework.UpdatePodLabel, func(pod *api.Pod, o, n any) framework.QueueingHint {
			return either(asPod(o), asPod(n), func(other *api.Pod) bool { return affects(pod, other) })
		}),
		ev(framework.Node, framework.Add|framework.UpdateNodeLabel, nil),
		ev(framework.Namespace, framework.Update, nil),
	}
}

// EventsToRegister implements framework.EnqueueExtensions: one of the
// pod's claims is made or changes (allocated elsewhere, deallocated), any
// claim lets devices go, a slice or device class is published or changes.
func (pl *DynamicResources) EventsToRegister(context.Context) []framework.ClusterEventWithHint {
	hasClaims := func(pod *api.Pod, _, _ any) framework.QueueingHint { return hint(len(pod.Spec.ResourceClaims) > 0) }
	return []framework.ClusterEventWithHint{
		ev(framework.ResourceClaim, framework.Add|framework.Update, func(pod *api.Pod, o, n any) framework.QueueingHint {
			c, _ := n.(*api.ResourceClaim)
			if c == nil || len(pod.Spec.ResourceClaims) == 0 {
				return hint(c == nil)
			}
			if c.Namespace == pod.Namespace && isPodClaim(pod, c) {
				return framework.Queue
			}
			// Another claim let its devices go.
			old, _ := o.(*api.ResourceClaim)
			return hint(old != nil && old.Status.Allocation != nil && c.Status.Allocation == nil)
		}),
		ev(framework.ResourceClaim, framework.Delete, hasClaims),
		ev(framework.ResourceSlice, framework.Add|framework.Update, hasClaims),
		ev(framework.DeviceClass, framework.Add|framework.Update, hasClaims),
	}
}

// isPodClaim reports whether c is one of pod's claims: named by it, or
// made for it from a template.
func isPodClaim(pod *api.Pod, c *api.ResourceClaim) bool {
	if api.IsControlledBy(c, pod.UID) {
		return true
	}
	for i := range pod.Spec.ResourceClaims {
		if name, ok := api.ClaimName(pod, &pod.Spec.ResourceClaims[i]); ok && name == c.Name {
			return true
		}
	}
	return false
}

// SetEventSink implements framework.EventEmitter.
func (pl *DynamicResources) SetEventSink(sink framework.EventSink) { pl.sink = sink }

// SetEventSink implements framework.EventEmitter.
func (pl *InterPodAffinity) SetEventSink(sink framework.EventSink) { pl.ns.sink = sink }
