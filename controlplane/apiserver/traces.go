package apiserver

import (
	"container/list"
	"slices"
	"sync"

	"skiff.dev/skiff/api"
)

// traceBook keeps pod traces (the timed steps of `skiff trace pod`) in
// memory rather than in the store. A trace is diagnostic data written
// several times for every pod (API server, scheduler, agent); keeping it
// out of bbolt saves two fsynced writes and their JSON per pod, which is
// most of what a scheduling burst costs. The price: traces do not survive
// an API server restart, and only the MaxTracedPods most recently created
// pods keep theirs.
//
// A trace belongs to a pod uid: a new pod with the same name starts fresh.
type traceBook struct {
	mu    sync.Mutex
	max   int
	byKey map[string]*list.Element // "ns/name" → *traceEntry
	order *list.List               // oldest first
}

type traceEntry struct {
	key   string
	uid   string
	spans []api.TraceSpan
}

// MaxTracedPods bounds the pods whose traces are kept: 1,000 traces of a
// few tens of KiB at most (scheduler spans hold per-node tables) stay
// well under 100 MiB even on a 5,000-node simulated cluster.
const MaxTracedPods = 1000

func newTraceBook(max int) *traceBook {
	return &traceBook{max: max, byKey: map[string]*list.Element{}, order: list.New()}
}

// append adds spans to pod's trace (a new trace when reset, or when the
// stored one belongs to another pod of that name) and returns a copy.
func (b *traceBook) append(pod *api.Pod, reset bool, spans []api.TraceSpan) []api.TraceSpan {
	key := api.KeyOf(pod)
	b.mu.Lock()
	defer b.mu.Unlock()
	el, ok := b.byKey[key]
	if !ok {
		el = b.order.PushBack(&traceEntry{key: key, uid: pod.UID})
		b.byKey[key] = el
		for b.order.Len() > b.max {
			old := b.order.Remove(b.order.Front()).(*traceEntry)
			delete(b.byKey, old.key)
		}
	}
	e := el.Value.(*traceEntry)
	if reset || e.uid != pod.UID {
		e.uid, e.spans = pod.UID, nil
	}
	e.spans = append(e.spans, spans...)
	if len(e.spans) > api.MaxTraceSpans {
		e.spans = slices.Clone(e.spans[len(e.spans)-api.MaxTraceSpans:])
	}
	return slices.Clone(e.spans)
}

// get returns a copy of pod's spans (nil when none).
func (b *traceBook) get(pod *api.Pod) []api.TraceSpan {
	b.mu.Lock()
	defer b.mu.Unlock()
	el, ok := b.byKey[api.KeyOf(pod)]
	if !ok || el.Value.(*traceEntry).uid != pod.UID {
		return nil
	}
	return slices.Clone(el.Value.(*traceEntry).spans)
}

// remove forgets the trace of a removed pod.
func (b *traceBook) remove(namespace, name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := api.Key(namespace, name)
	if el, ok := b.byKey[key]; ok {
		b.order.Remove(el)
		delete(b.byKey, key)
	}
}
