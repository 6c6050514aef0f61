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

func (r *CycleResult) filterDetails() filterDetails {
	d := filterDetails{Plugins: r.FilterPlugins, Total: r.NumNodes, Evaluated: len(r.Nodes), Message: r.Message}
	if len(r.Nodes) > 0 { // kept by the trace book: no slack from append's growth
		d.Nodes = make([]FilterRow, 0, min(len(r.Nodes), maxTraceNodes))
	}
	for i, n := range r.Nodes {
		if i == maxTraceNodes {
			d.Omitted = len(r.Nodes) - i
			break
		}
		row := FilterRow{Node: n.Node, Fit: n.Feasible(), Reasons: n.Status.Reasons(), Details: n.Status.Details()}
		if !row.Fit {
			row.Plugin = r.FilterPlugins[n.Plugin]
		}
		d.Nodes = append(d.Nodes, row)
	}
	return d
}

// orderPool holds scoreDetails' index scratch.
var orderPool = sync.Pool{New: func() any { return new([]int) }}

func (r *CycleResult) scoreDetails() scoreDetails {
	d := scoreDetails{Plugins: r.ScorePlugins, Selected: r.SelectedNode}
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
		x, y := &r.Scores[a], &r.Scores[b]
		if x.Total != y.Total {
			return cmp.Compare(y.Total, x.Total)
		}
		return strings.Compare(x.Node, y.Node)
	}
	if len(order) > maxTraceNodes {
		// Only the best maxTraceNodes are kept: pick them, then sort those
		// (a few hundred comparisons fewer per pod than sorting all).
		selectFirst(order, maxTraceNodes, better)
		d.Omitted = len(order) - maxTraceNodes
		order = order[:maxTraceNodes]
	}
	slices.SortFunc(order, better)
	// The rows get their own copy of the scores: r.Scores' Raw and
	// Normalized share one array for every feasible node (schedule.go),
	// and the trace book keeps these rows for up to MaxTracedPods pods, so
	// a sub-slice would pin a whole cycle's array (2 × plugins × feasible
	// nodes int64s) for the hundred rows kept.
	d.Nodes = make([]ScoreRow, len(order))
	n := 0
	for _, j := range order {
		n += len(r.Scores[j].Raw) + len(r.Scores[j].Normalized)
	}
	buf := make([]int64, 0, n)
	for i, j := range order {
		s := &r.Scores[j]
		at := len(buf)
		buf = append(append(buf, s.Raw...), s.Normalized...)
		raw, norm := buf[at:at+len(s.Raw):at+len(s.Raw)], buf[at+len(s.Raw):len(buf):len(buf)]
		d.Nodes[i] = ScoreRow{Node: s.Node, Raw: raw, Normalized: norm, Total: s.Total}
	}
	return d
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
	fd := r.filterDetails()
	msg := fmt.Sprintf("%d/%d nodes fit", countFit(r), r.NumNodes)
	if r.SelectedNode == "" {
		msg = r.Message
	} else if len(r.Nodes) < r.NumNodes {
		msg += fmt.Sprintf(" (looked at %d: enough feasible nodes found)", len(r.Nodes))
	}
	spans = append(spans, api.TraceSpan{
		Component: "scheduler", Step: "filter", Start: micro(r.Start), End: micro(r.FilterEnd), Message: msg,
		Details: map[string]any{"plugins": fd.Plugins, "nodes": fd.Nodes, "total": fd.Total, "evaluated": fd.Evaluated, "omitted": fd.Omitted, "message": fd.Message},
	})
	if len(r.Scores) > 0 {
		sd := r.scoreDetails()
		spans = append(spans, api.TraceSpan{
			Component: "scheduler", Step: "score", Start: micro(r.FilterEnd), End: micro(r.ScoreEnd), Node: r.SelectedNode,
			Message: fmt.Sprintf("chose %s (score %d) among %d feasible nodes", r.SelectedNode, bestTotal(r), len(r.Scores)),
			Details: map[string]any{"plugins": sd.Plugins, "nodes": sd.Nodes, "omitted": sd.Omitted, "selected": sd.Selected},
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
