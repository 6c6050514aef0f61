package scheduler

import (
	"maps"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// What all the nodes of the cache have in common, kept as nodes come,
// change and go, so that a pod no node can take is turned away without
// visiting 5,000 nodes (framework.UniformFilterPlugin): a nodeSelector
// naming a label no node carries is answered from a count of nodes per
// label, the filters before NodeAffinity from counts of cordoned, tainted
// and not-ready nodes. A Snapshot is the framework.NodeSummary of its
// cycle.

// nodeCounts counts the nodes with a fact that some filter turns pods away for.
type nodeCounts struct {
	notReady, cordoned, hardTainted int
}

// labelPair is one label, key=value.
type labelPair struct{ key, value string }

// nodeSummary is the cache's summary of the nodes in its list (those with
// a Node). Guarded by Cache.mu.
type nodeSummary struct {
	counts nodeCounts
	// labels counts the nodes per label (pairs no node carries are
	// removed); labelGen counts the changes of labels, so that a snapshot
	// can tell whether labels still describe its nodes.
	labels   map[labelPair]int
	labelGen uint64
}

// replace accounts for old (nil or without a Node: not in the list)
// becoming n; a pod's change keeps the Node and changes nothing here.
func (s *nodeSummary) replace(old, n *framework.NodeInfo) {
	var oldNode *api.Node
	if old != nil {
		oldNode = old.Node
	}
	if oldNode == n.Node {
		return
	}
	if oldNode != nil {
		s.counts.add(old, -1)
	}
	if n.Node != nil {
		s.counts.add(n, 1)
	}
	if oldNode != nil && n.Node != nil && maps.Equal(oldNode.Labels, n.Node.Labels) {
		return // a status update: heartbeats do not touch labels
	}
	if s.labels == nil {
		s.labels = map[labelPair]int{}
	}
	if oldNode != nil {
		for k, v := range oldNode.Labels {
			p := labelPair{k, v}
			if s.labels[p]--; s.labels[p] <= 0 {
				delete(s.labels, p)
			}
		}
	}
	if n.Node != nil {
		for k, v := range n.Node.Labels {
			s.labels[labelPair{k, v}]++
		}
	}
	s.labelGen++
}

func (c *nodeCounts) add(n *framework.NodeInfo, d int) {
	if n.Readiness() != framework.ReadyTrue {
		c.notReady += d
	}
	if n.Unschedulable() {
		c.cordoned += d
	}
	if n.TaintEffects()&(framework.TaintNoSchedule|framework.TaintNoExecute) != 0 {
		c.hardTainted += d
	}
}

var _ framework.NodeSummary = (*Snapshot)(nil)

// NumNodes implements framework.NodeSummary.
func (s *Snapshot) NumNodes() int { return len(s.nodes) }

// NotReady implements framework.NodeSummary.
func (s *Snapshot) NotReady() int { return s.counts.notReady }

// Cordoned implements framework.NodeSummary.
func (s *Snapshot) Cordoned() int { return s.counts.cordoned }

// HardTainted implements framework.NodeSummary.
func (s *Snapshot) HardTainted() int { return s.counts.hardTainted }

// NodesWithLabel implements framework.NodeSummary. The counts live in the
// cache (one map for every snapshot, not a copy per cycle); they answer
// for this snapshot while no label has changed since it was taken, which
// is almost always: labels change when nodes join or are relabelled.
func (s *Snapshot) NodesWithLabel(key, value string) (int, bool) {
	c := s.from
	if c == nil {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.summary.labelGen != s.labelGen {
		return 0, false
	}
	return c.summary.labels[labelPair{key, value}], true
}
