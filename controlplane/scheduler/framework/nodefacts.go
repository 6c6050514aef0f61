package framework

import (
	"hash/maphash"

	"skiff.dev/skiff/api"
)

// What the filters read from a Node, computed once when the cache sets it
// (SetNode) and kept in the NodeInfo itself. A filter pass visits hundreds
// to thousands of nodes per pod; reading the Ready condition, a taint or
// a label through NodeInfo → Node → slice or map → string costs several
// cache misses per node, which was most of the time a pass took on a
// 5,000-node cluster. The facts answer from the NodeInfo's own memory:
// exactly for readiness, cordon and taint effects, and for labels and
// annotations with a Bloom filter that can say "certainly not" (the
// filter then rejects without touching the Node) or "maybe" (the filter
// reads the Node as before). A NodeInfo made without SetNode (a literal
// in a test or a queueing hint) computes them from its Node on each call.

// NodeReadiness is the status of a node's Ready condition.
type NodeReadiness uint8

const (
	// ReadyMissing: the node has no Ready condition (just registered).
	ReadyMissing NodeReadiness = iota
	// ReadyTrue: Ready=True.
	ReadyTrue
	// ReadyFalse: Ready=False.
	ReadyFalse
	// ReadyUnknown: Ready with any other status (the node stopped reporting).
	ReadyUnknown
)

// TaintEffects is a set of the taint effects a node carries.
type TaintEffects uint8

const (
	TaintNoSchedule TaintEffects = 1 << iota
	TaintNoExecute
	TaintPreferNoSchedule
	TaintOtherEffect
)

type nodeFacts struct {
	ok            bool   // computed (SetNode)
	name          string // Node.Name
	readiness     NodeReadiness
	unschedulable bool
	taints        TaintEffects
	labels        Bloom // every label key=value
	annotations   Bloom // every annotation key with a non-empty value
}

func factsOf(node *api.Node) nodeFacts {
	if node == nil {
		return nodeFacts{}
	}
	f := nodeFacts{ok: true, name: node.Name, unschedulable: node.Spec.Unschedulable}
ready:
	for _, c := range node.Status.Conditions { // as NodeReady always read them: any True wins, else the last
		if c.Type != api.NodeReady {
			continue
		}
		switch c.Status {
		case api.ConditionTrue:
			f.readiness = ReadyTrue
			break ready
		case api.ConditionFalse:
			f.readiness = ReadyFalse
		default:
			f.readiness = ReadyUnknown
		}
	}
	for i := range node.Spec.Taints {
		switch node.Spec.Taints[i].Effect {
		case api.TaintEffectNoSched:
			f.taints |= TaintNoSchedule
		case api.TaintEffectNoExec:
			f.taints |= TaintNoExecute
		case api.TaintEffectPrefNo:
			f.taints |= TaintPreferNoSchedule
		default:
			f.taints |= TaintOtherEffect
		}
	}
	for k, v := range node.Labels {
		f.labels.add(LabelBits(k, v))
	}
	for k, v := range node.Annotations {
		if v != "" {
			f.annotations.add(AnnotationBits(k))
		}
	}
	return f
}

func (n *NodeInfo) nodeFacts() nodeFacts {
	if n.facts.ok || n.Node == nil {
		return n.facts
	}
	return factsOf(n.Node)
}

// Readiness is the status of the node's Ready condition: ReadyTrue when
// one says True, else the last one's.
func (n *NodeInfo) Readiness() NodeReadiness { return n.nodeFacts().readiness }

// Unschedulable is the node's spec.unschedulable (cordoned).
func (n *NodeInfo) Unschedulable() bool { return n.nodeFacts().unschedulable }

// TaintEffects is the set of effects of the node's taints (0: untainted).
func (n *NodeInfo) TaintEffects() TaintEffects { return n.nodeFacts().taints }

// MayHaveLabels reports whether the node may carry every label whose bits
// b holds (LabelBits, SelectorBits): false means certainly not.
func (n *NodeInfo) MayHaveLabels(b Bloom) bool {
	f := n.nodeFacts()
	return !f.ok || f.labels.has(b)
}

// MayHaveAnnotations is MayHaveLabels for annotation keys with a
// non-empty value (AnnotationBits).
func (n *NodeInfo) MayHaveAnnotations(b Bloom) bool {
	f := n.nodeFacts()
	return !f.ok || f.annotations.has(b)
}

// Bloom is a 128-bit Bloom filter of labels (or annotation keys): each
// entry sets two bits.
type Bloom [2]uint64

var bloomSeed = maphash.MakeSeed()

// LabelBits are the bits of the label key=value.
func LabelBits(key, value string) Bloom {
	return bloomBits(maphash.String(bloomSeed, key)*0x9E3779B97F4A7C15 ^ maphash.String(bloomSeed, value))
}

// AnnotationBits are the bits of an annotation key.
func AnnotationBits(key string) Bloom { return bloomBits(maphash.String(bloomSeed, key)) }

// SelectorBits are the bits of every label of sel (a nodeSelector): a node
// whose labels lack one of them does not match sel.
func SelectorBits(sel map[string]string) Bloom {
	var b Bloom
	for k, v := range sel {
		b.add(LabelBits(k, v))
	}
	return b
}

func bloomBits(h uint64) Bloom {
	var b Bloom
	for _, bit := range [2]uint64{h & 127, (h >> 7) & 127} {
		b[bit>>6] |= 1 << (bit & 63)
	}
	return b
}

func (b *Bloom) add(o Bloom) { b[0] |= o[0]; b[1] |= o[1] }

func (b Bloom) has(o Bloom) bool { return b[0]&o[0] == o[0] && b[1]&o[1] == o[1] }
