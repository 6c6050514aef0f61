package apiserver

import (
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
//
// Every pod create appends its span here, on the request's path, so the
// lock is held for a few pointer moves: an allocation under it may make
// the holder assist the garbage collector, or wait for it, and every
// handler behind the lock waits too. What a new trace needs is allocated
// before the lock (add); only adding spans to a trace already there (the
// scheduler's, the node's) may grow its slice under it.
type traceBook struct {
	mu       sync.Mutex
	max      int
	maxBytes int
	bytes    int                    // the entries' sizes summed
	n        int                    // entries
	byKey    map[string]*traceEntry // "ns/name" → entry
	// oldest and newest are the ends of the entries' list, by when each
	// trace began.
	oldest, newest *traceEntry
}

type traceEntry struct {
	key   string
	uid   string
	spans []api.TraceSpan
	size  int // spansSize(spans)
	// prev and next are the older and the newer entry.
	prev, next *traceEntry
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
	return &traceBook{max: max, maxBytes: maxBytes, byKey: map[string]*traceEntry{}}
}

// append adds spans to obj's trace (add) and returns a copy of the trace.
func (b *traceBook) append(obj api.Object, reset bool, spans []api.TraceSpan) []api.TraceSpan {
	return b.add(obj, reset, spans, true)
}

// add adds spans to obj's trace: a new trace when the stored one belongs
// to another object of that name; with reset, spans go first (a pod's
// create span). With wantCopy it returns a copy of the trace.
func (b *traceBook) add(obj api.Object, reset bool, spans []api.TraceSpan, wantCopy bool) []api.TraceSpan {
	key := bookKey(obj)
	uid := obj.GetObjectMeta().UID
	size := spansSize(spans)
	// What a trace that begins here needs, made before the lock.
	fresh := &traceEntry{key: key, uid: uid, spans: slices.Clip(slices.Clone(spans)), size: size}
	var out []api.TraceSpan
	b.mu.Lock()
	e, ok := b.byKey[key]
	switch {
	case !ok:
		e = fresh
		b.byKey[key] = e
		b.link(e)
		b.bytes += e.size
	case e.uid != uid: // an older object's, of the same name
		b.bytes += fresh.size - e.size
		e.uid, e.spans, e.size = uid, fresh.spans, fresh.size
	case reset:
		// The create span of this very pod, after others wrote theirs (a
		// scheduler that bound it before the create handler got here):
		// it goes first, theirs stay.
		e.spans = append(fresh.spans, e.spans...)
		e.size += size
		b.bytes += size
	default:
		e.spans = append(e.spans, spans...)
		e.size += size
		b.bytes += size
	}
	if len(e.spans) > api.MaxTraceSpans {
		e.spans = slices.Clone(e.spans[len(e.spans)-api.MaxTraceSpans:])
		b.bytes -= e.size
		e.size = spansSize(e.spans)
		b.bytes += e.size
	}
	b.evict(e)
	if wantCopy {
		out = slices.Clone(e.spans)
	}
	b.mu.Unlock()
	return out
}

// link puts e at the newest end of the list.
func (b *traceBook) link(e *traceEntry) {
	e.prev, e.next = b.newest, nil
	if b.newest != nil {
		b.newest.next = e
	} else {
		b.oldest = e
	}
	b.newest = e
	b.n++
}

// unlink takes e out of the list and the index.
func (b *traceBook) unlink(e *traceEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		b.oldest = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		b.newest = e.prev
	}
	e.prev, e.next = nil, nil
	b.n--
	delete(b.byKey, e.key)
	b.bytes -= e.size
}

// evict forgets the oldest traces, never keep's, while the book is over
// its bounds.
func (b *traceBook) evict(keep *traceEntry) {
	for b.n > 1 && (b.n > b.max || b.bytes > b.maxBytes) {
		old := b.oldest
		if old == keep {
			// keep is the oldest: forget the next oldest instead.
			old = old.next
		}
		b.unlink(old)
	}
}

// get returns a copy of pod's spans (nil when none).
func (b *traceBook) get(pod api.Object) []api.TraceSpan {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.byKey[bookKey(pod)]
	if !ok || e.uid != pod.GetObjectMeta().UID {
		return nil
	}
	return slices.Clone(e.spans)
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
	if e, ok := b.byKey[bookKey(obj)]; ok {
		b.unlink(e)
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
		return 104 + stringsSize(v.Nodes) + 8*(len(v.Totals)+len(v.WideScores)) + 2*len(v.Scores)
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
