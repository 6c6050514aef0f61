package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"skiff.dev/skiff/api"
)

// The explanation of an attempt is kept with the pod as trace spans
// (component "scheduler"), so `skiff describe pod` and `skiff trace pod`
// show it:
//
//	step "filter": Details "plugins" (filter order), "nodes" (one FilterRow
//	               per node looked at), "total", "evaluated", "omitted", "message"
//	step "score":  Details "plugins" (name and weight), "nodes" (one ScoreRow
//	               per feasible node, best first), "selected"
//	step "preemption": Details "node", "victims", "message"
//	step "permit": Node, Details "outcome" (waiting, allowed, rejected),
//	               "plugins", "message" (permitwait.go)
//	step "bind":   Node, Message (bound, or the error)
//	step "queue":  Details "plugin", "message": held by the PreEnqueue
//	               gate (gated.go); no attempt to explain since
//
// A span holds at most maxTraceNodes nodes; "omitted" counts the rest.
// In memory "nodes" are compact tables (api.SchedulingFilterTable,
// SchedulingScoreTable: names and flat lists) whose JSON is those rows:
// the scheduler traces every pod, and rows were half of what a burst of
// pods allocated (docs/performance.md, thirteenth sitting).
// api.ExplainSchedulingTrace turns the spans back into the table Explain
// prints (`skiff describe pod`, `skiff trace`).

const maxTraceNodes = 100

// The span details' types and the tables rendered from them are api's
// (api/trace_scheduling.go): the CLI and the dashboard read them too.
type (
	FilterRow         = api.SchedulingFilterRow
	ScoreRow          = api.SchedulingScoreRow
	filterDetails     = api.SchedulingFilterDetails
	scoreDetails      = api.SchedulingScoreDetails
	preemptionDetails = api.SchedulingPreemptionDetails
)

// filterTable records the filter verdicts of the first maxTraceNodes
// nodes looked at (kept by the trace book: no slack from append's
// growth), and returns how many more there were.
func (r *CycleResult) filterTable() (api.SchedulingFilterTable, int) {
	var t api.SchedulingFilterTable
	nodes := r.Nodes[:min(len(r.Nodes), maxTraceNodes)]
	if len(nodes) == 0 {
		return t, 0
	}
	// A bare fit (no reasons, no details) is its name alone.
	bare := func(n NodeFilterResult) bool {
		return n.Feasible() && len(n.Status.Reasons()) == 0 && len(n.Status.Details()) == 0
	}
	t.Nodes = make([]string, len(nodes))
	rows := 0
	for i, n := range nodes {
		t.Nodes[i] = n.Node
		if !bare(n) {
			rows++
		}
	}
	if rows > 0 {
		t.Verdicts, t.VerdictsAt = make([]FilterRow, 0, rows), make([]int, 0, rows)
		for i, n := range nodes {
			if bare(n) {
				continue
			}
			row := FilterRow{Node: n.Node, Fit: n.Feasible(), Reasons: n.Status.Reasons(), Details: n.Status.Details()}
			if !row.Fit {
				row.Plugin = r.FilterPlugins[n.Plugin]
			}
			t.Verdicts, t.VerdictsAt = append(t.Verdicts, row), append(t.VerdictsAt, i)
		}
	}
	return t, len(r.Nodes) - len(nodes)
}

func (r *CycleResult) filterDetails() filterDetails {
	t, omitted := r.filterTable()
	return filterDetails{Plugins: r.FilterPlugins, Nodes: t.Rows(), Total: r.NumNodes, Evaluated: len(r.Nodes), Omitted: omitted, Message: r.Message}
}

// orderPool holds scoreTable's index scratch.
var orderPool = sync.Pool{New: func() any { return new([]int) }}

// scoreTable records the scores of the best maxTraceNodes feasible nodes,
// best first, and returns how many more there were.
func (r *CycleResult) scoreTable() (api.SchedulingScoreTable, int) {
	if len(r.Scores) == 0 {
		return api.SchedulingScoreTable{}, 0
	}
	// Best first, ties by name (the selection order); sort indices, not rows
	// (scratch from a pool: one index per feasible node, for every pod).
	op := orderPool.Get().(*[]int)
	defer orderPool.Put(op)
	order := (*op)[:0]
	for i := range r.Scores {
		order = append(order, i)
	}
	*op = order
	better := func(a, b int) int {
		if x, y := r.Scores[a].Total, r.Scores[b].Total; x != y {
			return cmp.Compare(y, x)
		}
		return cmp.Compare(r.nameRank(a), r.nameRank(b)) // by name (nameFirst)
	}
	omitted := 0
	if len(order) > maxTraceNodes {
		// Only the best maxTraceNodes are kept: pick them, then sort those
		// (a few hundred comparisons fewer per pod than sorting all).
		selectFirst(order, maxTraceNodes, better)
		omitted = len(order) - maxTraceNodes
		order = order[:maxTraceNodes]
	}
	slices.SortFunc(order, better)
	// The table gets its own copy of the scores: r.Scores' Raw and
	// Normalized share one array for every feasible node (schedule.go),
	// and the trace book keeps the table, so a sub-slice would pin a whole
	// cycle's array (2 × plugins × feasible nodes int64s) for the hundred
	// nodes kept. Every node has as many scores as there are plugins
	// (schedule.go makes them so).
	k, np := len(order), len(r.Scores[0].Raw)
	t := api.SchedulingScoreTable{Nodes: make([]string, k), Totals: make([]int64, k), Plugins: np}
	narrow := true
	for _, j := range order {
		s := &r.Scores[j]
		for _, v := range s.Raw {
			narrow = narrow && v == int64(int16(v))
		}
		for _, v := range s.Normalized {
			narrow = narrow && v == int64(int16(v))
		}
	}
	if narrow {
		t.Scores = make([]int16, 2*np*k)
	} else {
		t.WideScores = make([]int64, 2*np*k)
	}
	for i, j := range order {
		s := &r.Scores[j]
		t.Nodes[i], t.Totals[i] = s.Node, s.Total
		for p := range np {
			if narrow {
				t.Scores[2*np*i+p], t.Scores[2*np*i+np+p] = int16(s.Raw[p]), int16(s.Normalized[p])
			} else {
				t.WideScores[2*np*i+p], t.WideScores[2*np*i+np+p] = s.Raw[p], s.Normalized[p]
			}
		}
	}
	return t, omitted
}

func (r *CycleResult) scoreDetails() scoreDetails {
	t, omitted := r.scoreTable()
	return scoreDetails{Plugins: r.ScorePlugins, Nodes: t.Rows(), Omitted: omitted, Selected: r.SelectedNode}
}

// selectFirst moves the k first elements of xs in the order of cmp (a
// total order) to the front of xs, in no particular order (quickselect).
func selectFirst(xs []int, k int, cmp func(a, b int) int) {
	lo, hi := 0, len(xs)
	for hi-lo > 1 {
		// Median of three as the pivot, moved to the end.
		a, b, c := lo, lo+(hi-lo)/2, hi-1
		if cmp(xs[b], xs[a]) < 0 {
			xs[a], xs[b] = xs[b], xs[a]
		}
		if cmp(xs[c], xs[b]) < 0 {
			xs[b], xs[c] = xs[c], xs[b]
			if cmp(xs[b], xs[a]) < 0 {
				xs[a], xs[b] = xs[b], xs[a]
			}
		}
		xs[b], xs[hi-1] = xs[hi-1], xs[b]
		pivot, store := xs[hi-1], lo
		for i := lo; i < hi-1; i++ {
			if cmp(xs[i], pivot) < 0 {
				xs[i], xs[store] = xs[store], xs[i]
				store++
			}
		}
		xs[store], xs[hi-1] = xs[hi-1], xs[store]
		// xs[store] is in its final place; [lo, store) come before it.
		switch {
		case store > k:
			hi = store
		case store < k-1:
			lo = store + 1
		default:
			return
		}
	}
}

// traceSpans turns a result (and the binding, when it ran) into trace spans.
func traceSpans(r *CycleResult, bindStart, bindEnd time.Time, bindErr error) []api.TraceSpan {
	if r == nil {
		return nil
	}
	var spans []api.TraceSpan
	ft, omitted := r.filterTable() // the table, not its rows: see api.SchedulingFilterTable
	msg := fmt.Sprintf("%d/%d nodes fit", countFit(r), r.NumNodes)
	if r.SelectedNode == "" {
		msg = r.Message
	} else if len(r.Nodes) < r.NumNodes {
		msg += fmt.Sprintf(" (looked at %d: enough feasible nodes found)", len(r.Nodes))
	}
	spans = append(spans, api.TraceSpan{
		Component: "scheduler", Step: "filter", Start: micro(r.Start), End: micro(r.FilterEnd), Message: msg,
		Details: map[string]any{"plugins": r.FilterPlugins, "nodes": ft, "total": r.NumNodes, "evaluated": len(r.Nodes), "omitted": omitted, "message": r.Message},
	})
	if len(r.Scores) > 0 {
		st, omitted := r.scoreTable()
		spans = append(spans, api.TraceSpan{
			Component: "scheduler", Step: "score", Start: micro(r.FilterEnd), End: micro(r.ScoreEnd), Node: r.SelectedNode,
			Message: fmt.Sprintf("chose %s (score %d) among %d feasible nodes", r.SelectedNode, bestTotal(r), len(r.Scores)),
			Details: map[string]any{"plugins": r.ScorePlugins, "nodes": st, "omitted": omitted, "selected": r.SelectedNode},
		})
	}
	if pr := r.Preemption; pr != nil {
		pd := preemptionDetails{Node: pr.Node, Message: pr.Message}
		for _, v := range pr.Victims {
			pd.Victims = append(pd.Victims, v.Key)
		}
		m := pr.Message
		if pr.Node != "" {
			m = fmt.Sprintf("evicting %s on node %s", strings.Join(pd.Victims, ", "), pr.Node)
		}
		spans = append(spans, api.TraceSpan{
			Component: "scheduler", Step: "preemption", Start: micro(r.ScoreEnd), End: micro(r.ScoreEnd), Node: pr.Node, Message: m,
			Details: map[string]any{"node": pd.Node, "victims": pd.Victims, "message": pd.Message},
		})
	}
	if !bindStart.IsZero() {
		m := "bound to " + r.SelectedNode
		if bindErr != nil {
			m = "binding failed: " + bindErr.Error()
		}
		spans = append(spans, api.TraceSpan{Component: "scheduler", Step: "bind", Start: micro(bindStart), End: micro(bindEnd), Node: r.SelectedNode, Message: m})
	}
	return spans
}

func micro(t time.Time) api.MicroTime { return api.MicroTime{Time: t} }

func countFit(r *CycleResult) int {
	n := 0
	for _, x := range r.Nodes {
		if x.Feasible() {
			n++
		}
	}
	return n
}

func bestTotal(r *CycleResult) int64 {
	for _, s := range r.Scores {
		if s.Node == r.SelectedNode {
			return s.Total
		}
	}
	return 0
}

// Explain renders a result as the tables a student reads: which filter
// rejected each node and why, how each feasible node scored under each
// plugin (raw, normalised 0..100, times the weight), and the verdict.
func Explain(r *CycleResult) string {
	if r == nil {
		return ""
	}
	var pd *preemptionDetails
	if pr := r.Preemption; pr != nil {
		pd = &preemptionDetails{Node: pr.Node, Message: pr.Message}
		for _, v := range pr.Victims {
			pd.Victims = append(pd.Victims, v.Key)
		}
	}
	return api.RenderSchedulingExplanation(r.Pod, r.filterDetails(), r.scoreDetails(), pd, nil, r.Message)
}
