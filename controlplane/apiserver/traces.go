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
// an API server restart, and only the most recently created pods keep
// theirs: at most MaxTracedPods pods and about MaxTraceBytes of spans,
// the oldest trace forgotten first (the newest one is always kept).
//
// A trace belongs to an object uid: a new pod with the same name starts
// fresh. Besides pods the book keeps the HorizontalPodAutoscaler
// controller's last decisions (`skiff trace hpa/NAME`, describe hpa),
// posted by the leader after each sync; those share the bounds.
type traceBook struct {
	mu       sync.Mutex
	max      int
	maxBytes int
	bytes    int                      // the entries' sizes summed
	byKey    map[string]*list.Element // "ns/name" → *traceEntry
	order    *list.List               // oldest first
}

type traceEntry struct {
	key   string
	uid   string
	spans []api.TraceSpan
	size  int // spansSize(spans)
}

// MaxTracedPods bounds the pods whose traces are kept.
const MaxTracedPods = 1000

// MaxTraceBytes bounds the memory the kept traces take, as spansSize
// estimates it. A scheduler span holds the filter and score tables of up
// to a hundred nodes (about 15 KB); a lab cluster's traces are a few KB, so
// there the pod count is the bound, while on a 200-node simulated
// cluster the bytes are (some 300 pods): a thousand of those traces were
// the largest thing in the server's heap after the pods themselves.
const MaxTraceBytes = 8 << 20

func newTraceBook(max, maxBytes int) *traceBook {
	return &traceBook{max: max, maxBytes: maxBytes, byKey: map[string]*list.Element{}, order: list.New()}
}

// append adds spans to obj's trace (a new trace when the stored one
// belongs to another object of that name; with reset, spans go first: a
// pod's create span) and returns a copy.
func (b *traceBook) append(obj api.Object, reset bool, spans []api.TraceSpan) []api.TraceSpan {
	key := bookKey(obj)
	uid := obj.GetObjectMeta().UID
	b.mu.Lock()
	defer b.mu.Unlock()
	el, ok := b.byKey[key]
	if !ok {
		el = b.order.PushBack(&traceEntry{key: key, uid: uid})
		b.byKey[key] = el
	}
	e := el.Value.(*traceEntry)
	b.bytes -= e.size
	switch {
	case e.uid != uid:
		e.uid, e.spans = uid, nil // an older object's, of the same name
	case reset:
		// The create span of this very pod, after others wrote theirs (a
		// scheduler that bound it before the create handler got here):
		// it goes first, theirs stay.
		e.spans = append(slices.Clone(spans), e.spans...)
		spans = nil
	}
	e.spans = append(e.spans, spans...)
	if len(e.spans) > api.MaxTraceSpans {
		e.spans = slices.Clone(e.spans[len(e.spans)-api.MaxTraceSpans:])
	}
	e.size = spansSize(e.spans)
	b.bytes += e.size
	b.evict(el)
	return slices.Clone(e.spans)
}

// evict forgets the oldest traces, never keep's, while the book is over
// its bounds.
func (b *traceBook) evict(keep *list.Element) {
	for b.order.Len() > 1 && (b.order.Len() > b.max || b.bytes > b.maxBytes) {
		front := b.order.Front()
		if front == keep {
			// keep is the oldest: forget the next oldest instead.
			front = front.Next()
		}
		old := b.order.Remove(front).(*traceEntry)
		delete(b.byKey, old.key)
		b.bytes -= old.size
	}
}

// get returns a copy of pod's spans (nil when none).
func (b *traceBook) get(pod api.Object) []api.TraceSpan {
	b.mu.Lock()
	defer b.mu.Unlock()
	el, ok := b.byKey[bookKey(pod)]
	if !ok || el.Value.(*traceEntry).uid != pod.GetObjectMeta().UID {
		return nil
	}
	return slices.Clone(el.Value.(*traceEntry).spans)
}

// bookKey is "ns/name" for a pod, "resource/ns/name" for another kind.
func bookKey(obj api.Object) string {
	if _, ok := obj.(*api.Pod); ok {
		return api.KeyOf(obj)
	}
	return api.MustKindOf(obj).Resource + "/" + api.KeyOf(obj)
}

// remove forgets the trace of a removed object.
func (b *traceBook) remove(obj api.Object) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := bookKey(obj)
	if el, ok := b.byKey[key]; ok {
		b.order.Remove(el)
		delete(b.byKey, key)
		b.bytes -= el.Value.(*traceEntry).size
	}
}

// spansSize estimates the bytes spans hold: the structs, their strings
// and their details, walked by type (the scheduler's per-node rows as it
// sends them in process, or the generic values JSON decodes to).
func spansSize(spans []api.TraceSpan) int {
	n := 0
	for i := range spans {
		s := &spans[i]
		n += 160 + len(s.Component) + len(s.Step) + len(s.Node) + len(s.Message)
		for k, v := range s.Details {
			n += 48 + len(k) + valueSize(v)
		}
	}
	return n
}

func valueSize(v any) int {
	switch v := v.(type) {
	case string:
		return 16 + len(v)
	case []string:
		return stringsSize(v)
	case []api.SchedulingFilterRow:
		n := 24
		for i := range v {
			r := &v[i]
			n += 88 + len(r.Node) + len(r.Plugin) + stringsSize(r.Reasons) + stringsSize(r.Details)
		}
		return n
	case api.SchedulingFilterTable:
		n := 72 + stringsSize(v.Nodes) + 24 + 8*len(v.VerdictsAt)
		for i := range v.Verdicts {
			r := &v.Verdicts[i]
			n += 88 + len(r.Plugin) + stringsSize(r.Reasons) + stringsSize(r.Details)
		}
		return n
	case api.SchedulingScoreTable:
		return 104 + stringsSize(v.Nodes) + 8*(len(v.Totals)+len(v.WideScores)) + 4*len(v.Scores)
	case []api.SchedulingScoreRow:
		n := 24
		for i := range v {
			n += 72 + len(v[i].Node) + 8*(len(v[i].Raw)+len(v[i].Normalized))
		}
		return n
	case []api.HPAMetricSample:
		n := 24
		for i := range v {
			n += 96 + len(v[i].Metric) + len(v[i].Unit) + 48
			for pod := range v[i].Pods {
				n += 64 + len(pod)
			}
		}
		return n
	case []any:
		n := 24
		for _, x := range v {
			n += 16 + valueSize(x)
		}
		return n
	case map[string]any:
		n := 48
		for k, x := range v {
			n += 48 + len(k) + valueSize(x)
		}
		return n
	default: // numbers, booleans, small structs
		return 16
	}
}

func stringsSize(ss []string) int {
	n := 24
	for _, s := range ss {
		n += 16 + len(s)
	}
	return n
}
