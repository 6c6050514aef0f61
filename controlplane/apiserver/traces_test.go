package apiserver

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
)

func tracedPod(name, uid string) *api.Pod {
	return &api.Pod{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: name, UID: uid}}
}

// schedulerSpan is a filter span as the scheduler sends it in process,
// with a row for each of nodes nodes.
func schedulerSpan(nodes int) api.TraceSpan {
	rows := make([]api.SchedulingFilterRow, nodes)
	for i := range rows {
		rows[i] = api.SchedulingFilterRow{Node: fmt.Sprintf("node-%03d", i), Fit: true}
	}
	return api.TraceSpan{Component: "scheduler", Step: "filter", Message: "fit", Details: map[string]any{"nodes": rows}}
}

// The book keeps at most max pods and about maxBytes of spans, forgetting
// the oldest first; the newest trace stays even when it alone is over.
func TestTraceBookBounds(t *testing.T) {
	one := spansSize([]api.TraceSpan{schedulerSpan(100)})
	if one < 100*88 {
		t.Fatalf("a span of 100 filter rows estimated at %d bytes", one)
	}
	b := newTraceBook(5, 3*one+one/2) // room for three such traces
	for i := range 4 {
		b.append(tracedPod(fmt.Sprint("p", i), fmt.Sprint("u", i)), true, []api.TraceSpan{schedulerSpan(100)})
	}
	for i, want := range []bool{false, true, true, true} {
		if got := b.get(tracedPod(fmt.Sprint("p", i), fmt.Sprint("u", i))) != nil; got != want {
			t.Errorf("p%d kept = %v, want %v", i, got, want)
		}
	}
	if b.bytes != 3*one {
		t.Errorf("bytes %d, want %d", b.bytes, 3*one)
	}

	// A pod count bound with small traces.
	small := []api.TraceSpan{{Component: "apiserver", Step: "admit"}}
	for i := range 6 {
		b.append(tracedPod(fmt.Sprint("s", i), "s"), true, small)
	}
	if b.n != 5 || b.get(tracedPod("s0", "s")) != nil || b.get(tracedPod("s5", "s")) == nil {
		t.Errorf("after 6 small traces: %d kept, s0 %v, s5 %v", b.n, b.get(tracedPod("s0", "s")), b.get(tracedPod("s5", "s")))
	}

	// One trace over the whole budget is kept while it is the newest.
	huge := newTraceBook(5, one/2)
	huge.append(tracedPod("h", "h"), true, []api.TraceSpan{schedulerSpan(100)})
	if huge.get(tracedPod("h", "h")) == nil {
		t.Error("the newest trace was forgotten")
	}
	huge.append(tracedPod("i", "i"), true, small)
	if huge.get(tracedPod("h", "h")) != nil || huge.get(tracedPod("i", "i")) == nil {
		t.Errorf("after a newer trace: h kept %v, i kept %v; want h forgotten", huge.get(tracedPod("h", "h")) != nil, huge.get(tracedPod("i", "i")) != nil)
	}

	// Appending to the oldest trace keeps it (it is the one written) and
	// forgets the next oldest.
	s1 := spansSize(small)
	d := newTraceBook(5, one+s1+s1/2)
	d.append(tracedPod("h", "h"), true, []api.TraceSpan{schedulerSpan(100)})
	d.append(tracedPod("i", "i"), true, small)
	d.append(tracedPod("h", "h"), false, small)
	if got := d.get(tracedPod("h", "h")); len(got) != 2 || d.get(tracedPod("i", "i")) != nil {
		t.Errorf("after appending to the oldest: h %d spans, i kept %v", len(got), d.get(tracedPod("i", "i")) != nil)
	}

	// Removing a pod and replacing a trace give their bytes back.
	c := newTraceBook(5, 1<<20)
	c.append(tracedPod("a", "1"), true, []api.TraceSpan{schedulerSpan(10)})
	c.append(tracedPod("a", "2"), false, small) // another pod of that name: starts fresh
	if got := c.get(tracedPod("a", "2")); len(got) != 1 || c.bytes != spansSize(small) {
		t.Errorf("a new uid: spans %v, bytes %d, want %d", got, c.bytes, spansSize(small))
	}
	// An autoscaler named like a pod keeps its own trace.
	hpa := &api.HorizontalPodAutoscaler{ObjectMeta: api.ObjectMeta{Name: "a", Namespace: "default", UID: "h1"}}
	c.append(hpa, false, []api.TraceSpan{schedulerSpan(1)})
	if got := c.get(tracedPod("a", "2")); len(got) != 1 || len(c.get(hpa)) != 1 || c.n != 2 {
		t.Errorf("a pod and an autoscaler of one name: pod %d spans, autoscaler %d, entries %d", len(got), len(c.get(hpa)), c.n)
	}
	c.remove(hpa)
	c.remove(tracedPod("a", "2"))
	if c.bytes != 0 || c.n != 0 {
		t.Errorf("after remove: bytes %d, entries %d", c.bytes, c.n)
	}
}

// Spans decoded from JSON (an agent's, over HTTP) are counted too.
func TestTraceSpansSizeOfDecodedDetails(t *testing.T) {
	decoded := api.TraceSpan{Details: map[string]any{"nodes": []any{map[string]any{"node": strings.Repeat("n", 1000)}}}}
	if n := spansSize([]api.TraceSpan{decoded}); n < 1000 {
		t.Errorf("decoded details estimated at %d bytes, less than their strings", n)
	}
}

// TestTraceCreateSpanAfterScheduler: the create handler's span can come
// after the scheduler's (the watch delivered the pod first): it goes
// first and the scheduler's stay; an older pod's spans of the same name
// are dropped.
func TestTraceCreateSpanAfterScheduler(t *testing.T) {
	b := newTraceBook(10, MaxTraceBytes)
	pod := tracedPod("p", "u1")
	b.append(pod, false, []api.TraceSpan{{Component: "scheduler", Step: "bind"}})
	got := b.append(pod, true, []api.TraceSpan{{Component: "apiserver", Step: "create"}})
	if len(got) != 2 || got[0].Step != "create" || got[1].Step != "bind" {
		t.Fatalf("spans %+v, want create then bind", got)
	}
	if got := b.append(tracedPod("p", "u2"), true, []api.TraceSpan{{Component: "apiserver", Step: "create"}}); len(got) != 1 {
		t.Fatalf("a new pod of the same name kept %d spans, want only its own", len(got))
	}
}

// The scheduler's compact tables (api.SchedulingFilterTable,
// SchedulingScoreTable) count in the book's bytes as what they hold:
// names, rows of rejected nodes, scores.
func TestTraceBookSizesSchedulerTables(t *testing.T) {
	size := func(nodes, rejected, plugins int) (int, int) {
		ft := api.SchedulingFilterTable{Nodes: make([]string, nodes)}
		st := api.SchedulingScoreTable{Nodes: make([]string, nodes), Totals: make([]int64, nodes), Scores: make([]int16, 2*plugins*nodes), Plugins: plugins}
		for i := range nodes {
			ft.Nodes[i], st.Nodes[i] = fmt.Sprintf("node-%03d", i), fmt.Sprintf("node-%03d", i)
		}
		for i := range rejected {
			ft.Verdicts = append(ft.Verdicts, api.SchedulingFilterRow{Node: ft.Nodes[i], Plugin: "NodeResourcesFit", Reasons: []string{"Insufficient cpu"}})
			ft.VerdictsAt = append(ft.VerdictsAt, i)
		}
		f := spansSize([]api.TraceSpan{{Details: map[string]any{"nodes": ft}}})
		s := spansSize([]api.TraceSpan{{Details: map[string]any{"nodes": st}}})
		return f, s
	}
	f10, s10 := size(10, 0, 7)
	f100, s100 := size(100, 0, 7)
	fr, _ := size(100, 100, 7)
	if f100 < 100*(16+8) || f100 <= f10 || fr < f100+100*88 {
		t.Errorf("filter tables estimated at %d (10 nodes), %d (100), %d (100 rejected)", f10, f100, fr)
	}
	if s100 < 100*(16+8+8+14*2) || s100 <= s10 { // per node: name, total, 14 int16 scores
		t.Errorf("score tables estimated at %d (10 nodes), %d (100)", s10, s100)
	}
}

// The book against a plain model of it (a list in order of first write,
// sizes summed afresh): random appends, resets, new uids and removes keep
// the same traces, in the same order, with the same byte count.
func TestTraceBookMatchesModel(t *testing.T) {
	type entry struct {
		key, uid string
		spans    []api.TraceSpan
	}
	r := rand.New(rand.NewPCG(26, 14))
	small := []api.TraceSpan{{Component: "apiserver", Step: "admit"}}
	for round := range 20 {
		maxN, one := 2+r.IntN(6), spansSize([]api.TraceSpan{schedulerSpan(20)})
		b := newTraceBook(maxN, one*(1+r.IntN(4)))
		var model []entry
		find := func(key string) int {
			return slices.IndexFunc(model, func(e entry) bool { return e.key == key })
		}
		for step := range 300 {
			name, uid := fmt.Sprint("p", r.IntN(10)), fmt.Sprint("u", r.IntN(2))
			pod := tracedPod(name, uid)
			key := bookKey(pod)
			if r.IntN(8) == 0 {
				b.remove(pod)
				if i := find(key); i >= 0 {
					model = slices.Delete(model, i, i+1)
				}
				continue
			}
			spans := small
			if r.IntN(3) == 0 {
				spans = []api.TraceSpan{schedulerSpan(1 + r.IntN(20))}
			}
			reset := r.IntN(4) == 0
			got := b.add(pod, reset, spans, step%2 == 0)
			i := find(key)
			switch {
			case i < 0:
				model = append(model, entry{key, uid, slices.Clone(spans)})
				i = len(model) - 1
			case model[i].uid != uid:
				model[i].uid, model[i].spans = uid, slices.Clone(spans)
			case reset:
				model[i].spans = append(slices.Clone(spans), model[i].spans...)
			default:
				model[i].spans = append(model[i].spans, spans...)
			}
			if n := len(model[i].spans); n > api.MaxTraceSpans {
				model[i].spans = model[i].spans[n-api.MaxTraceSpans:]
			}
			total := func() int {
				n := 0
				for _, e := range model {
					n += spansSize(e.spans)
				}
				return n
			}
			for len(model) > 1 && (len(model) > maxN || total() > b.maxBytes) {
				j := 0
				if j == i {
					j = 1
				}
				model = slices.Delete(model, j, j+1)
				if j < i {
					i--
				}
			}
			if step%2 == 0 && !reflect.DeepEqual(got, model[i].spans) {
				t.Fatalf("round %d step %d: add returned %d spans, want %d", round, step, len(got), len(model[i].spans))
			}
			var keys []string
			for e := b.oldest; e != nil; e = e.next {
				keys = append(keys, e.key)
				if e.next != nil && e.next.prev != e {
					t.Fatalf("round %d step %d: list links broken at %s", round, step, e.key)
				}
			}
			var want []string
			for _, e := range model {
				want = append(want, e.key)
				if got := b.get(tracedPod(strings.TrimPrefix(e.key, "default/"), e.uid)); !reflect.DeepEqual(got, e.spans) {
					t.Fatalf("round %d step %d: %s has %d spans, want %d", round, step, e.key, len(got), len(e.spans))
				}
			}
			if !slices.Equal(keys, want) || b.n != len(model) || len(b.byKey) != len(model) || b.bytes != total() {
				t.Fatalf("round %d step %d: book %v (n %d, index %d, %d bytes), model %v (%d bytes)", round, step, keys, b.n, len(b.byKey), b.bytes, want, total())
			}
		}
	}
}
