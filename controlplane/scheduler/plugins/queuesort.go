package plugins

import "skiff.dev/skiff/controlplane/scheduler/framework"

// PrioritySort orders the scheduling queue: a pod of higher priority
// (spec.priority, from its PriorityClass) goes first; among equals, the
// one that entered the queue first. It is Kubernetes' only queue sort
// plugin, and every profile of a scheduler must have the same one (there
// is one queue).
type PrioritySort struct{}

var _ framework.QueueSortPlugin = (*PrioritySort)(nil)

// Name implements framework.Plugin.
func (*PrioritySort) Name() string { return PrioritySortName }

// Less implements framework.QueueSortPlugin.
func (*PrioritySort) Less(a, b *framework.QueuedPodInfo) bool {
	if a.Info.Priority != b.Info.Priority {
		return a.Info.Priority > b.Info.Priority
	}
	return a.Enqueued.Before(b.Enqueued)
}
