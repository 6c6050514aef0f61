package scheduler

import (
	"container/heap"
	"sync"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
	"skiff.dev/skiff/controlplane/scheduler/plugins"
)

// podGroups is the scheduler's view of gangs, for the Coscheduling plugin
// (plugins.PodGroupLister): the PodGroups from their informer and, per
// group, every pod labelled scheduling.x-k8s.io/pod-group with its name,
// from the pod informer's handlers. Whether a member is assigned comes
// from the cache (bound, or assumed: waiting at Permit counts).
type podGroups struct {
	cache *Cache

	mu      sync.RWMutex
	groups  map[string]*api.PodGroup       // namespace/name
	members map[string]map[string]*api.Pod // namespace/group -> pod key -> pod
	podOf   map[string]string              // pod key -> namespace/group
	snap    func() []*framework.NodeInfo   // the cache's nodes, for minResources
}

var _ plugins.PodGroupLister = (*podGroups)(nil)

func newPodGroups(c *Cache) *podGroups {
	g := &podGroups{cache: c, groups: map[string]*api.PodGroup{}, members: map[string]map[string]*api.Pod{}, podOf: map[string]string{}}
	g.snap = func() []*framework.NodeInfo {
		var s Snapshot
		c.Snapshot(&s)
		return s.Nodes()
	}
	return g
}

// setGroup records a PodGroup (add or update) and returns the keys of its
// members that have no node yet: a change of the group may let them fit.
func (g *podGroups) setGroup(pg *api.PodGroup) []string {
	key := api.Key(pg.Namespace, pg.Name)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.groups[key] = pg
	return g.pendingLocked(key)
}

func (g *podGroups) deleteGroup(pg *api.PodGroup) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.groups, api.Key(pg.Namespace, pg.Name))
}

// setPod records a pod (add or update): it joins, changes or leaves its
// group by label. It returns the pending members of the group it is in
// now when it just joined (a new sibling may complete a quorum).
func (g *podGroups) setPod(pod *api.Pod) []string {
	key := api.Key(pod.Namespace, pod.Name)
	group := ""
	if name := api.PodGroupOf(pod); name != "" {
		group = api.Key(pod.Namespace, name)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old, had := g.podOf[key]
	if had && old != group {
		g.removeLocked(key, old)
	}
	if group == "" {
		return nil
	}
	m := g.members[group]
	if m == nil {
		m = map[string]*api.Pod{}
		g.members[group] = m
	}
	m[key] = pod
	g.podOf[key] = group
	if had && old == group {
		return nil
	}
	return g.pendingLocked(group)
}

func (g *podGroups) deletePod(pod *api.Pod) {
	key := api.Key(pod.Namespace, pod.Name)
	g.mu.Lock()
	defer g.mu.Unlock()
	if group, ok := g.podOf[key]; ok {
		g.removeLocked(key, group)
	}
}

func (g *podGroups) removeLocked(key, group string) {
	delete(g.podOf, key)
	if m := g.members[group]; m != nil {
		delete(m, key)
		if len(m) == 0 {
			delete(g.members, group)
		}
	}
}

func (g *podGroups) pendingLocked(group string) []string {
	var keys []string
	for k, p := range g.members[group] {
		if p.Spec.NodeName == "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// PodGroup implements plugins.PodGroupLister.
func (g *podGroups) PodGroup(namespace, name string) *api.PodGroup {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.groups[api.Key(namespace, name)]
}

// Members implements plugins.PodGroupLister.
func (g *podGroups) Members(namespace, name string) []*api.Pod {
	g.mu.RLock()
	defer g.mu.RUnlock()
	m := g.members[api.Key(namespace, name)]
	out := make([]*api.Pod, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	return out
}

// Assigned implements plugins.PodGroupLister.
func (g *podGroups) Assigned(namespace, name string) int {
	n := 0
	for _, p := range g.Members(namespace, name) {
		key := api.Key(p.Namespace, p.Name)
		if (p.Spec.NodeName != "" && !isTerminal(p)) || g.cache.IsAssumed(key) {
			n++
		}
	}
	return n
}

// Nodes implements plugins.PodGroupLister.
func (g *podGroups) Nodes() []*framework.NodeInfo { return g.snap() }

// Activate moves the queued pods named by key to activeQ at once, from
// unschedulableQ or backoffQ, as Kubernetes' PodsToActivate: a gang's
// members rejected while their siblings were missing are tried as soon as
// the gang may be complete. Pods in flight or unknown are left alone.
func (q *Queue) Activate(keys []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, key := range keys {
		qp, ok := q.pods[key]
		if !ok {
			continue
		}
		switch qp.where {
		case inUnschedulable:
			q.dropUnschedulableLocked(qp)
		case inBackoff:
			heap.Remove(&q.backoff, qp.index)
		default:
			continue
		}
		q.toActiveLocked(qp)
	}
}
