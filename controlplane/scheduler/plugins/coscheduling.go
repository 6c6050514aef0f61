package plugins

import (
	"context"
	"fmt"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// PodGroupLister is what Coscheduling reads about pod groups. The
// scheduler implements it from its informers and its cache; it must be
// safe for concurrent use and must not block.
type PodGroupLister interface {
	// PodGroup returns namespace/name, or nil when there is none.
	PodGroup(namespace, name string) *api.PodGroup
	// Members returns the pods labelled with the group, in any phase
	// (shared: do not modify).
	Members(namespace, name string) []*api.Pod
	// Assigned counts the members that are bound or assumed on a node and
	// not finished: the pod in its Permit counts (it is assumed).
	Assigned(namespace, name string) int
	// Nodes is the current snapshot of the nodes (for minResources).
	Nodes() []*framework.NodeInfo
}

// Coscheduling places the pods of a PodGroup all or nothing, as
// kubernetes-sigs/scheduler-plugins' Coscheduling plugin:
//
//	PreFilter  a member waits in the queue while fewer than minMember pods
//	           of its group exist ("pre-filter pod P cannot find enough
//	           sibling pods, current pods number: N, minMember of group: M")
//	           and, with minResources, while the cluster's free resources
//	           cannot hold them
//	Permit     a member chosen for a node waits there, assumed, until
//	           minMember members are assigned; the one that completes the
//	           quorum allows all waiting siblings, which are then bound
//	           together. The wait is the group's scheduleTimeoutSeconds
//	           (default 60 s); on timeout the member is rejected
//	Unreserve  a member that is rejected or fails to bind rejects every
//	           waiting sibling, so none of them holds room for a gang
//	           that cannot start
//
// Pods without the scheduling.x-k8s.io/pod-group label pass every point
// untouched. Upstream's queue sort by group and its PostFilter (reject
// the waiting siblings as soon as one member fits nowhere) are not here:
// siblings hold their room until the timeout.
type Coscheduling struct {
	groups   PodGroupLister
	waiting  *framework.WaitingPods
	activate func(keys []string)
	timeout  time.Duration
}

var (
	_ framework.PreFilterPlugin = (*Coscheduling)(nil)
	_ framework.PermitPlugin    = (*Coscheduling)(nil)
	_ framework.ReservePlugin   = (*Coscheduling)(nil)
)

// NewCoscheduling returns the plugin; groups and waiting are required.
// activate (may be nil) moves queued pods, by namespace/name, to be tried
// at once: the first member to wait wakes its siblings.
func NewCoscheduling(groups PodGroupLister, waiting *framework.WaitingPods, activate func(keys []string)) (*Coscheduling, error) {
	if groups == nil || waiting == nil {
		return nil, fmt.Errorf("%s needs the scheduler's pod groups and waiting pods", CoschedulingName)
	}
	return &Coscheduling{groups: groups, waiting: waiting, activate: activate, timeout: api.DefaultPodGroupTimeoutSeconds * time.Second}, nil
}

// Name implements framework.Plugin.
func (*Coscheduling) Name() string { return CoschedulingName }

// PreFilter implements framework.PreFilterPlugin. Its rejections are
// UnschedulableAndUnresolvable: preemption cannot create sibling pods.
func (c *Coscheduling) PreFilter(_ context.Context, _ *framework.CycleState, pod *api.Pod) *framework.Status {
	name := api.PodGroupOf(pod)
	if name == "" {
		return nil
	}
	pg := c.groups.PodGroup(pod.Namespace, name)
	if pg == nil {
		return nil // upstream: no PodGroup, no check here (Permit refuses it)
	}
	members := c.groups.Members(pod.Namespace, name)
	if gap := int(pg.Spec.MinMember) - len(members); gap > 0 {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf(
			"pre-filter pod %v cannot find enough sibling pods, current pods number: %v, minMember of group: %v",
			pod.Name, len(members), pg.Spec.MinMember))
	}
	if len(pg.Spec.MinResources) > 0 {
		if gap := minResourcesGap(pg, c.groups.Nodes()); gap != nil {
			// Upstream prints the remaining ResourceList ("resource gap: map[...]").
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("resource gap: %v", gap))
		}
	}
	return nil
}

// minResourcesGap is the part of pg's minResources (plus minMember pods)
// that the free room of all nodes together cannot hold, by resource name;
// nil when it fits. Room that the group's own pods hold counts as free.
func minResourcesGap(pg *api.PodGroup, nodes []*framework.NodeInfo) map[string]int64 {
	want := map[string]int64{}
	for name, q := range pg.Spec.MinResources {
		want[name], _ = api.ResourceAmount(name, q)
	}
	want[api.ResourcePods] = int64(pg.Spec.MinMember)
	group := api.Key(pg.Namespace, pg.Name)
	for _, ni := range nodes {
		for name, need := range want {
			used := ni.Requested.Get(name)
			if name == api.ResourcePods {
				used = int64(len(ni.Pods))
			}
			for _, p := range ni.Pods {
				if api.Key(p.Pod.Namespace, api.PodGroupOf(p.Pod)) == group {
					if name == api.ResourcePods {
						used--
					} else {
						used -= p.Requests.Get(name)
					}
				}
			}
			if free := ni.Allocatable.Get(name) - used; free > 0 {
				need -= free
			}
			if need <= 0 {
				delete(want, name)
			} else {
				want[name] = need
			}
		}
		if len(want) == 0 {
			return nil
		}
	}
	return want
}

// Permit implements framework.PermitPlugin.
func (c *Coscheduling) Permit(_ context.Context, _ *framework.CycleState, pod *api.Pod, _ string) (*framework.Status, time.Duration) {
	name := api.PodGroupOf(pod)
	if name == "" {
		return nil, 0
	}
	pg := c.groups.PodGroup(pod.Namespace, name)
	if pg == nil {
		return framework.NewStatus(framework.Unschedulable, "PodGroup not found"), 0
	}
	assigned := c.groups.Assigned(pod.Namespace, name)
	if assigned >= int(pg.Spec.MinMember) {
		c.waiting.Iterate(func(wp framework.WaitingPod) {
			if p := wp.Pod(); p.Namespace == pod.Namespace && api.PodGroupOf(p) == name {
				wp.Allow(CoschedulingName)
			}
		})
		return nil, 0
	}
	wait := c.timeout
	if t := pg.Spec.ScheduleTimeoutSeconds; t != nil {
		wait = time.Duration(*t) * time.Second
	}
	if assigned == 1 && c.activate != nil {
		// The first to wait wakes its siblings, whatever queue they are in.
		var keys []string
		for _, m := range c.groups.Members(pod.Namespace, name) {
			if m.UID != pod.UID && m.Spec.NodeName == "" {
				keys = append(keys, api.Key(m.Namespace, m.Name))
			}
		}
		c.activate(keys)
	}
	return framework.NewStatus(framework.Wait, fmt.Sprintf("Waiting for other members of pod group %s/%s: %d of minMember %d assigned (timeout %v)",
		pod.Namespace, name, assigned, pg.Spec.MinMember, wait)), wait
}

// Reserve implements framework.ReservePlugin: nothing to claim.
func (*Coscheduling) Reserve(context.Context, *framework.CycleState, *api.Pod, string) *framework.Status {
	return nil
}

// Unreserve implements framework.ReservePlugin: a member that will not be
// bound takes its waiting siblings with it.
func (c *Coscheduling) Unreserve(_ context.Context, _ *framework.CycleState, pod *api.Pod, _ string) {
	name := api.PodGroupOf(pod)
	if name == "" || c.groups.PodGroup(pod.Namespace, name) == nil {
		return
	}
	c.waiting.Iterate(func(wp framework.WaitingPod) {
		if p := wp.Pod(); p.UID != pod.UID && p.Namespace == pod.Namespace && api.PodGroupOf(p) == name {
			wp.Reject(CoschedulingName, "rejection in Unreserve")
		}
	})
}
