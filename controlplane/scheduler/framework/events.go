package framework

import (
	"context"
	"strings"

	"skiff.dev/skiff/api"
)

// Queueing hints, as Kubernetes' (EnqueueExtensions, KEP-4247): a pod
// that fit nowhere waits among the unschedulable pods with the names of
// the plugins that turned it away. When the cluster changes, the queue
// asks only those plugins, through the hints they registered for that
// kind of change, whether the change may let the pod fit: a deleted pod
// that held GPUs matters to a pod NodeResourcesFit rejected for
// nvidia.com/gpu, not to one NodeAffinity rejected; a node's new label to
// the latter, not the former. A pod is tried again as soon as one says
// Queue, and not before, however busy the cluster.

// EventResource is the kind of object a cluster event is about.
type EventResource string

// The resources skiff's scheduler watches.
const (
	// AssignedPod: a pod bound to a node (added, changed, deleted or
	// finished): it holds or frees room, labels, ports.
	AssignedPod EventResource = "AssignedPod"
	// UnscheduledPod: the pending pod itself changed.
	UnscheduledPod EventResource = "UnscheduledPod"
	Node           EventResource = "Node"
	ResourceClaim  EventResource = "ResourceClaim"
	ResourceSlice  EventResource = "ResourceSlice"
	DeviceClass    EventResource = "DeviceClass"
	PodGroup       EventResource = "PodGroup"
	Namespace      EventResource = "Namespace"
	// WildCard: any change at all; every waiting pod is tried again.
	WildCard EventResource = "*"
)

// ActionType says what happened to the object, as bits: an update may be
// several of them at once (a node's labels and taints).
type ActionType uint32

// Actions, as Kubernetes' (a subset).
const (
	Add ActionType = 1 << iota
	Delete
	UpdateNodeAllocatable
	UpdateNodeLabel
	UpdateNodeTaint // taints or spec.unschedulable
	UpdateNodeCondition
	UpdateNodeAnnotation
	UpdatePodLabel
	UpdatePodScaleDown // a bound pod asks for less, or finished
	UpdatePodToleration
	UpdatePodGeneratedResourceClaim // status.resourceClaimStatuses changed
	UpdateOther                     // any other update

	// Update is every kind of update.
	Update = UpdateNodeAllocatable | UpdateNodeLabel | UpdateNodeTaint | UpdateNodeCondition | UpdateNodeAnnotation |
		UpdatePodLabel | UpdatePodScaleDown | UpdatePodToleration | UpdatePodGeneratedResourceClaim | UpdateOther
	// All is every action.
	All = Add | Delete | Update
)

var actionNames = []string{"Add", "Delete", "UpdateNodeAllocatable", "UpdateNodeLabel", "UpdateNodeTaint", "UpdateNodeCondition",
	"UpdateNodeAnnotation", "UpdatePodLabel", "UpdatePodScaleDown", "UpdatePodToleration", "UpdatePodGeneratedResourceClaim", "UpdateOther"}

func (a ActionType) String() string {
	if a == All {
		return "*"
	}
	var out []string
	for i, n := range actionNames {
		if a&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return strings.Join(out, "|")
}

// ClusterEvent is one change: a resource and what happened to it.
type ClusterEvent struct {
	Resource   EventResource
	ActionType ActionType
}

// String is "Node/UpdateNodeLabel", as Kubernetes' event labels.
func (e ClusterEvent) String() string { return string(e.Resource) + "/" + e.ActionType.String() }

// Matches reports whether a registration for e covers the event ev.
func (e ClusterEvent) Matches(ev ClusterEvent) bool {
	return e.Resource == WildCard || ev.Resource == WildCard ||
		(e.Resource == ev.Resource && e.ActionType&ev.ActionType != 0)
}

// QueueingHint is a plugin's answer: may the change let the pod fit?
type QueueingHint int

const (
	// QueueSkip: the change does not help this pod.
	QueueSkip QueueingHint = iota
	// Queue: try the pod again (after its backoff).
	Queue
)

// QueueingHintFn tells, for a pod the plugin rejected, whether a change
// (oldObj → newObj; oldObj nil for Add, newObj nil for Delete) may let it
// fit. It must be quick and must not block: it runs under the queue's
// lock, once per waiting pod the plugin rejected. nil means Queue.
type QueueingHintFn func(pod *api.Pod, oldObj, newObj any) QueueingHint

// ClusterEventWithHint registers a plugin's interest in an event.
type ClusterEventWithHint struct {
	Event          ClusterEvent
	QueueingHintFn QueueingHintFn
}

// EnqueueExtensions is implemented by plugins that say which changes can
// make the pods they reject fit. A plugin that rejects pods (PreEnqueue,
// PreFilter, Filter, Reserve, Permit) without it gets every event: its
// pods are tried again on any change.
type EnqueueExtensions interface {
	Plugin
	EventsToRegister(ctx context.Context) []ClusterEventWithHint
}

// EventSink receives the cluster events of a plugin's own informers.
type EventSink func(ev ClusterEvent, oldObj, newObj any)

// EventEmitter is an EventSourcePlugin that reports what changed rather
// than calling moved: the scheduler gives it a sink before Run.
type EventEmitter interface {
	EventSourcePlugin
	SetEventSink(sink EventSink)
}

// Hints are a profile's queueing hints by plugin name.
type Hints map[string][]ClusterEventWithHint

// HintsOf collects the hints of plugins: those that implement
// EnqueueExtensions register their own; the others that can reject a pod
// register the wildcard.
func HintsOf(ctx context.Context, plugins []Plugin) Hints {
	h := Hints{}
	for _, p := range plugins {
		if _, done := h[p.Name()]; done {
			continue
		}
		if ee, ok := p.(EnqueueExtensions); ok {
			h[p.Name()] = ee.EventsToRegister(ctx)
			continue
		}
		for _, pt := range []string{PointPreEnqueue, PointPreFilter, PointFilter, PointReserve, PointPermit} {
			if Implements(p, pt) {
				h[p.Name()] = []ClusterEventWithHint{{Event: ClusterEvent{Resource: WildCard, ActionType: All}}}
				break
			}
		}
	}
	return h
}

// Requeue reports whether ev may let a pod the named plugins rejected
// fit: some plugin registered for it and its hint says Queue. A pod no
// plugin is named for (an internal error) is always tried again.
func (h Hints) Requeue(pod *api.Pod, rejectors []string, ev ClusterEvent, oldObj, newObj any) bool {
	if len(rejectors) == 0 || ev.Resource == WildCard {
		return true
	}
	for _, name := range rejectors {
		regs, ok := h[name]
		if !ok {
			return true // a plugin of another profile, or gone: do not strand the pod
		}
		for _, r := range regs {
			if r.Event.Matches(ev) && (r.QueueingHintFn == nil || r.QueueingHintFn(pod, oldObj, newObj) == Queue) {
				return true
			}
		}
	}
	return false
}

// CompiledHints are the registrations of a pod's rejectors, collected
// once (Compile) so that the many events a waiting pod sees are each
// answered without looking its rejectors up again. Requeue answers as
// Hints.Requeue does for the same rejectors.
type CompiledHints struct {
	always bool // no rejector, or one without registrations here
	regs   []ClusterEventWithHint
}

// Compile collects the registrations of rejectors.
func (h Hints) Compile(rejectors []string) CompiledHints {
	if len(rejectors) == 0 {
		return CompiledHints{always: true}
	}
	var c CompiledHints
	for _, name := range rejectors {
		regs, ok := h[name]
		if !ok {
			return CompiledHints{always: true} // as Requeue: do not strand the pod
		}
		c.regs = append(c.regs, regs...)
	}
	return c
}

// AlwaysHints is what a pod with no profile of ours gets: every event moves it.
var AlwaysHints = CompiledHints{always: true}

// MayRequeue reports whether ev may move some pod with these hints: false
// when none of the registrations is for ev (Requeue then says false for
// every pod).
func (c *CompiledHints) MayRequeue(ev ClusterEvent) bool {
	if c.always || ev.Resource == WildCard {
		return true
	}
	for i := range c.regs {
		if c.regs[i].Event.Matches(ev) {
			return true
		}
	}
	return false
}

// Requeue reports whether ev may let the pod fit (Hints.Requeue).
func (c *CompiledHints) Requeue(pod *api.Pod, ev ClusterEvent, oldObj, newObj any) bool {
	if c.always || ev.Resource == WildCard {
		return true
	}
	for i := range c.regs {
		r := &c.regs[i]
		if r.Event.Matches(ev) && (r.QueueingHintFn == nil || r.QueueingHintFn(pod, oldObj, newObj) == Queue) {
			return true
		}
	}
	return false
}
