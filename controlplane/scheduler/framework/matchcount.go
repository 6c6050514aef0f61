package framework

import (
	"sync"

	"k8s.io/apimachinery/pkg/labels"
)

// Counting the pods a selector matches
//
// PodTopologySpread counts, for the pod being scheduled, the pods its
// selector matches on every node: in PreFilter and PreScore for the zone
// constraints and in Score for the hostname one. With the default
// constraints every pod of a Deployment or a Service does so, and done by
// a scan of each node's pods it costs the cluster's pod count per pod
// scheduled: 20,000 pods from Deployments on 200 nodes spent a third of
// the server's CPU there, and each pod took longer than the one before
// (docs/performance.md, "Counting matching pods, ninth sitting").
//
// A NodeInfo the cache has published is never changed (cache.go), so a
// count made from it stays true as long as it lives: CountMatching keeps
// its counts on the NodeInfo itself, by a key naming namespace and
// selector. The cache replaces the NodeInfo of a node whose pods change,
// and the replacement starts with no counts; the nodes that did not change
// answer from memory. A NodeInfo changed in place (a copy with nominated
// pods added, a preemption's simulation) drops its counts on every change.

// matchMemoMax bounds the counts one NodeInfo keeps (a lab room has a few
// hundred Deployments and Services at most; a count is a string key and an
// int64). When full it starts again empty.
const matchMemoMax = 256

// matchMemo is the counts of one NodeInfo by MatchKey.
type matchMemo struct {
	mu     sync.Mutex
	counts map[string]int64
}

// MatchKey names a count of CountMatching: the namespace and the selector
// (a selector's String is canonical: its requirements sorted).
func MatchKey(namespace string, sel labels.Selector) string {
	return namespace + "\x00" + sel.String()
}

// CountMatching returns how many of the node's pods in namespace the
// selector matches, leaving out pods being deleted. key is
// MatchKey(namespace, sel); it may be computed once per scheduling cycle.
// Safe for concurrent use on a NodeInfo no one changes.
func (n *NodeInfo) CountMatching(namespace string, sel labels.Selector, key string) int64 {
	m := n.matches.Load()
	if m == nil {
		m = &matchMemo{counts: map[string]int64{}}
		if !n.matches.CompareAndSwap(nil, m) {
			m = n.matches.Load()
		}
	}
	m.mu.Lock()
	c, ok := m.counts[key]
	m.mu.Unlock()
	if ok {
		return c
	}
	c = n.countMatchingScan(namespace, sel)
	m.mu.Lock()
	if len(m.counts) >= matchMemoMax {
		clear(m.counts)
	}
	m.counts[key] = c
	m.mu.Unlock()
	return c
}

// countMatchingScan counts by looking at every pod of the node.
func (n *NodeInfo) countMatchingScan(namespace string, sel labels.Selector) int64 {
	var c int64
	for _, p := range n.Pods {
		if p.Pod.Namespace == namespace && p.Pod.DeletionTimestamp == nil && sel.Matches(labels.Set(p.Pod.Labels)) {
			c++
		}
	}
	return c
}
