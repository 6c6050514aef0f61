package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// Cache is the scheduler's picture of the cluster: every node and the pods
// placed on it. The informers keep it current (nodes, bound pods); the
// scheduler adds "assumed" pods: pods it has chosen a node for but whose
// binding the API has not confirmed yet.
//
// Assuming is what keeps two pods scheduled back to back from both taking
// the last free GPU: the first pod counts on its node from the moment it is
// chosen, not from the moment the watch reports it bound. The life of an
// assumed pod:
//
//	AssumePod      chosen: counted on the node
//	FinishBinding  the binding call returned; expire after the TTL if the
//	               informer never confirms (a safety net for lost events)
//	AddPod         the informer shows the pod bound: confirmed, no longer assumed
//	ForgetPod      the binding failed: removed, its resources free again
//
// NodeInfos are copy-on-write: the cache never changes a NodeInfo it has
// published, it replaces it. A Snapshot therefore only copies pointers,
// and plugins can read a snapshot's NodeInfos without locks while the
// informers keep updating the cache.
type Cache struct {
	mu  sync.Mutex
	ttl time.Duration
	// nodes by name; includes nodes known only through their pods (Node nil).
	nodes map[string]*framework.NodeInfo
	// list holds the NodeInfos with a Node, sorted by name: what snapshots copy.
	list []*framework.NodeInfo
	// podsWithAffinity and podsWithRequiredAnti sum the list's
	// NodeInfos' counts of the same names, for snapshots.
	podsWithAffinity, podsWithRequiredAnti int
	pods                                   map[string]*cachedPod
	// A snapshot is brought up to date by copying only the entries of
	// list replaced since it was taken, not every node's, each cycle:
	// gen counts the changes of list, and replaced[i] is the index
	// replaced by change replacedFrom+i+1. A node added or removed moves
	// the indices: layout counts those, and a snapshot of an older layout,
	// or older than the changes kept, copies the whole list.
	gen, layout, replacedFrom uint64
	replaced                  []int
	// summary: what all of list's nodes have in common (nodesummary.go).
	summary nodeSummary
}

// maxReplaced bounds the changes kept for snapshots; one behind more
// copies the whole list (as many pointers as there are nodes).
const maxReplaced = 1024

type cachedPod struct {
	info     *framework.PodInfo
	node     string
	assumed  bool
	deadline time.Time // zero until FinishBinding
}

// NewCache returns an empty cache; assumed pods whose binding finished
// more than ttl ago without confirmation are dropped by Cleanup.
func NewCache(ttl time.Duration) *Cache {
	return &Cache{ttl: ttl, nodes: map[string]*framework.NodeInfo{}, pods: map[string]*cachedPod{}}
}

// update replaces the NodeInfo of name by a changed copy and keeps list in
// step. c.mu is held.
func (c *Cache) update(name string, change func(n *framework.NodeInfo)) {
	old := c.nodes[name]
	var n *framework.NodeInfo
	if old == nil {
		n = &framework.NodeInfo{}
	} else {
		n = old.Clone()
	}
	if old != nil && old.Node != nil { // in list
		c.podsWithAffinity -= old.PodsWithAffinity
		c.podsWithRequiredAnti -= old.PodsWithRequiredAntiAffinity
	}
	change(n)
	if n.Node != nil {
		c.podsWithAffinity += n.PodsWithAffinity
		c.podsWithRequiredAnti += n.PodsWithRequiredAntiAffinity
	}
	c.summary.replace(old, n)
	i, found := slices.BinarySearchFunc(c.list, name, func(e *framework.NodeInfo, name string) int {
		return strings.Compare(e.Node.Name, name)
	})
	switch {
	case n.Node != nil && found:
		c.list[i] = n
		c.gen++
		if len(c.replaced) == maxReplaced {
			// Keep the newer half.
			k := copy(c.replaced, c.replaced[maxReplaced/2:])
			c.replaced = c.replaced[:k]
			c.replacedFrom += maxReplaced / 2
		}
		c.replaced = append(c.replaced, i)
	case n.Node != nil:
		c.list = slices.Insert(c.list, i, n)
		c.newLayout()
	case found:
		c.list = slices.Delete(c.list, i, i+1)
		c.newLayout()
	}
	if n.Node == nil && len(n.Pods) == 0 {
		delete(c.nodes, name)
		return
	}
	c.nodes[name] = n
}

// newLayout notes that list's indices moved: older snapshots copy all of it.
func (c *Cache) newLayout() {
	c.gen++
	c.layout++
	c.replaced, c.replacedFrom = c.replaced[:0], c.gen
}

// AddNode adds or replaces a node (node add and update events).
func (c *Cache) AddNode(node *api.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.update(node.Name, func(n *framework.NodeInfo) { n.SetNode(node) })
}

// RemoveNode forgets a node. Pods still bound to it are kept (Node nil)
// until they are deleted, as the node lifecycle controller will do.
func (c *Cache) RemoveNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.nodes[name]; ok {
		c.update(name, func(n *framework.NodeInfo) { n.SetNode(nil) })
	}
}

// AddPod records a bound pod from the informer (add or update). An assumed
// pod of the same key is confirmed. Terminal pods (Succeeded, Failed) hold
// no resources: they are removed instead.
func (c *Cache) AddPod(pod *api.Pod) {
	if pod.Spec.NodeName == "" {
		return
	}
	if isTerminal(pod) {
		c.RemovePod(pod)
		return
	}
	// The map's key is the info's: one string per pod, not two.
	info := framework.NewPodInfo(pod)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(info.Key)
	c.pods[info.Key] = &cachedPod{info: info, node: pod.Spec.NodeName}
	c.update(pod.Spec.NodeName, func(n *framework.NodeInfo) { n.AddPod(info) })
}

// RemovePod forgets a pod, bound or assumed.
func (c *Cache) RemovePod(pod *api.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(api.Key(pod.Namespace, pod.Name))
}

func (c *Cache) removeLocked(key string) {
	p, ok := c.pods[key]
	if !ok {
		return
	}
	delete(c.pods, key)
	c.update(p.node, func(n *framework.NodeInfo) { n.RemovePod(key) })
}

// AssumePod counts a pod on the node the scheduler chose, before the
// binding is written. pod.Pod.Spec.NodeName must be that node.
func (c *Cache) AssumePod(pod *framework.PodInfo) error {
	node := pod.Pod.Spec.NodeName
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pods[pod.Key]; ok {
		return fmt.Errorf("assume pod %q: already in the cache", pod.Key)
	}
	c.pods[pod.Key] = &cachedPod{info: pod, node: node, assumed: true}
	c.update(node, func(n *framework.NodeInfo) { n.AddPod(pod) })
	return nil
}

// FinishBinding starts the expiry clock of an assumed pod.
func (c *Cache) FinishBinding(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pods[key]; ok && p.assumed {
		p.deadline = now.Add(c.ttl)
	}
}

// ForgetPod drops an assumed pod (its binding failed). Confirmed pods are
// left alone.
func (c *Cache) ForgetPod(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pods[key]; ok && p.assumed {
		c.removeLocked(key)
	}
}

// IsAssumed reports whether key is an assumed, unconfirmed pod.
func (c *Cache) IsAssumed(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pods[key]
	return ok && p.assumed
}

// Cleanup drops assumed pods whose binding finished before now − TTL and
// were never confirmed; it returns them, by key.
func (c *Cache) Cleanup(now time.Time) []*framework.PodInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	var expired []*framework.PodInfo
	for _, p := range c.pods {
		if p.assumed && !p.deadline.IsZero() && now.After(p.deadline) {
			expired = append(expired, p.info)
		}
	}
	slices.SortFunc(expired, func(a, b *framework.PodInfo) int { return strings.Compare(a.Key, b.Key) })
	for _, p := range expired {
		c.removeLocked(p.Key)
	}
	return expired
}

// NodeInfo returns the current NodeInfo of a node (nil if unknown). It is
// shared and must not be changed.
func (c *Cache) NodeInfo(name string) *framework.NodeInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[name]
}

// Snapshot fills dst with the current nodes. Only pointers are copied
// (NodeInfos are copy-on-write), and into a dst this cache filled before,
// only those replaced since: a scheduling cycle's snapshot of thousands of
// nodes copies the few its last binding changed.
func (c *Cache) Snapshot(dst *Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if dst.from == c && dst.layout == c.layout && dst.gen >= c.replacedFrom {
		for _, i := range c.replaced[dst.gen-c.replacedFrom:] {
			dst.nodes[i] = c.list[i]
		}
	} else {
		dst.nodes = append(dst.nodes[:0], c.list...)
		// A replaced NodeInfo keeps its name: names change with the layout.
		dst.names = dst.names[:0]
		for _, n := range c.list {
			dst.names = append(dst.names, n.Name())
		}
	}
	dst.from, dst.gen, dst.layout = c, c.gen, c.layout
	dst.podsWithAffinity, dst.podsWithRequiredAnti = c.podsWithAffinity, c.podsWithRequiredAnti
	dst.counts, dst.labelGen = c.summary.counts, c.summary.labelGen
}

// Snapshot is the cluster as one scheduling cycle sees it: a fixed list of
// NodeInfos sorted by node name. A cycle decides on the snapshot, so the
// informers' changes during the cycle cannot make it inconsistent.
type Snapshot struct {
	nodes []*framework.NodeInfo
	// names of nodes, in the same order: a pass that needs only names
	// (RunFilterEveryNode's verdicts) does not visit each NodeInfo.
	names []string
	// counts and labelGen: the cache's nodeSummary when the snapshot was
	// taken (the snapshot is a framework.NodeSummary, nodesummary.go).
	counts   nodeCounts
	labelGen uint64
	// The cache's counts of the nodes' pods with affinity terms
	// (framework.CycleState.SetNodesCounted).
	podsWithAffinity, podsWithRequiredAnti int
	// from, gen and layout: the cache and its state the snapshot was last
	// brought to (Cache.Snapshot copies only what was replaced since).
	from        *Cache
	gen, layout uint64
}

// NewSnapshot builds a snapshot from objects, for tests and tools: pods
// with spec.nodeName count on their node (terminal pods are skipped).
func NewSnapshot(nodes []*api.Node, pods []*api.Pod) *Snapshot {
	c := NewCache(0)
	for _, n := range nodes {
		c.AddNode(n)
	}
	for _, p := range pods {
		c.AddPod(p)
	}
	s := &Snapshot{}
	c.Snapshot(s)
	return s
}

// Nodes returns the NodeInfos, sorted by name. Do not change them.
func (s *Snapshot) Nodes() []*framework.NodeInfo { return s.nodes }

// Get returns a node's NodeInfo or nil.
func (s *Snapshot) Get(name string) *framework.NodeInfo {
	i, ok := slices.BinarySearchFunc(s.nodes, name, func(e *framework.NodeInfo, name string) int {
		return strings.Compare(e.Node.Name, name)
	})
	if !ok {
		return nil
	}
	return s.nodes[i]
}

func isTerminal(pod *api.Pod) bool {
	return pod.Status.Phase == api.PodSucceeded || pod.Status.Phase == api.PodFailed
}
