package scheduler

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
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
// ExplainTrace turns the spans back into the table Explain prints.

const maxTraceNodes = 100

// FilterRow is one node's filter verdict in a trace.
type FilterRow struct {
	Node    string   `json:"node"`
	Fit     bool     `json:"fit"`
	Plugin  string   `json:"plugin,omitempty"`
	Reasons []string `json:"reasons,omitempty"`
	// Details: the rejecting plugin's explanation beyond its reasons
	// (DynamicResources: which request, selector or constraint failed).
	Details []string `json:"details,omitempty"`
}

// ScoreRow is one node's scores in a trace, indexed like the plugins.
type ScoreRow struct {
	Node       string  `json:"node"`
	Raw        []int64 `json:"raw"`
	Normalized []int64 `json:"normalized"`
	Total      int64   `json:"total"`
}

type filterDetails struct {
	Plugins   []string    `json:"plugins"`
	Nodes     []FilterRow `json:"nodes"`
	Total     int         `json:"total"`
	Evaluated int         `json:"evaluated"`
	Omitted   int         `json:"omitted,omitempty"`
	Message   string      `json:"message,omitempty"`
}

type scoreDetails struct {
	Plugins  []ScorePluginInfo `json:"plugins"`
	Nodes    []ScoreRow        `json:"nodes"`
	Omitted  int               `json:"omitted,omitempty"`
	Selected string            `json:"selected,omitempty"`
}

type preemptionDetails struct {
	Node    string   `json:"node,omitempty"`
	Victims []string `json:"victims,omitempty"`
	Message string   `json:"message,omitempty"`
}

func (r *CycleResult) filterDetails() filterDetails {
	d := filterDetails{Plugins: r.FilterPlugins, Total: r.NumNodes, Evaluated: len(r.Nodes), Message: r.Message}
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

func (r *CycleResult) scoreDetails() scoreDetails {
	d := scoreDetails{Plugins: r.ScorePlugins, Selected: r.SelectedNode}
	// Best first, ties by name (the selection order); sort indices, not rows.
	order := make([]int, len(r.Scores))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		x, y := &r.Scores[a], &r.Scores[b]
		if x.Total != y.Total {
			return cmp.Compare(y.Total, x.Total)
		}
		return strings.Compare(x.Node, y.Node)
	})
	if len(order) > maxTraceNodes {
		d.Omitted = len(order) - maxTraceNodes
		order = order[:maxTraceNodes]
	}
	d.Nodes = make([]ScoreRow, len(order))
	for i, j := range order {
		s := &r.Scores[j]
		d.Nodes[i] = ScoreRow{Node: s.Node, Raw: s.Raw, Normalized: s.Normalized, Total: s.Total}
	}
	return d
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
	return render(r.Pod, r.filterDetails(), r.scoreDetails(), pd, nil, r.Message)
}

// ExplainTrace renders the last scheduling attempt found in a pod's trace
// spans, as Explain does; "" when the trace has none.
func ExplainTrace(pod string, spans []api.TraceSpan) string {
	last := -1
	for i, s := range spans {
		if s.Component == "scheduler" && s.Step == "filter" {
			last = i
		}
		if s.Component == "scheduler" && s.Step == "queue" {
			last = -1 // held before any attempt since (gated.go): no table
		}
	}
	if last < 0 {
		return ""
	}
	var fd filterDetails
	var sd scoreDetails
	var pd *preemptionDetails
	var pm *permitDetails
	decode(spans[last].Details, &fd)
	for _, s := range spans[last+1:] {
		if s.Component != "scheduler" {
			continue
		}
		switch s.Step {
		case "score":
			decode(s.Details, &sd)
		case "preemption":
			pd = &preemptionDetails{}
			decode(s.Details, pd)
		case "permit":
			pm = &permitDetails{}
			decode(s.Details, pm)
		}
	}
	return render(pod, fd, sd, pd, pm, fd.Message)
}

// decode converts span details (a map after JSON) into one of the detail structs.
func decode(details map[string]any, into any) {
	b, err := json.Marshal(details)
	if err == nil {
		_ = json.Unmarshal(b, into) // best effort: a foreign span renders as empty
	}
}

func render(pod string, fd filterDetails, sd scoreDetails, pd *preemptionDetails, pm *permitDetails, message string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Pod %s: %d nodes, %d looked at\n", pod, fd.Total, fd.Evaluated)
	if len(fd.Nodes) > 0 {
		fmt.Fprintf(&b, "\nFilter (in order: %s; a node stops at its first rejection)\n", strings.Join(fd.Plugins, ", "))
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tRESULT\tREJECTED BY\tREASON")
		for _, n := range fd.Nodes {
			if n.Fit {
				fmt.Fprintf(tw, "%s\tfits\t\t\n", n.Node)
			} else {
				fmt.Fprintf(tw, "%s\tno\t%s\t%s\n", n.Node, n.Plugin, strings.Join(n.Reasons, ", "))
			}
		}
		tw.Flush()
		if fd.Omitted > 0 {
			fmt.Fprintf(&b, "(%d more nodes not shown)\n", fd.Omitted)
		}
		for _, n := range fd.Nodes {
			if len(n.Details) > 0 {
				fmt.Fprintf(&b, "\nWhy %s rejected node %s:\n", n.Plugin, n.Node)
				for _, d := range n.Details {
					fmt.Fprintf(&b, "  %s\n", d)
				}
			}
		}
	}
	if len(sd.Nodes) > 0 {
		b.WriteString("\nScore (each plugin: raw → normalised 0-100 × weight; highest total wins, ties go to the first name)\n")
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tPLUGIN\tRAW\tNORMALISED\tWEIGHT\tWEIGHTED")
		for _, n := range sd.Nodes {
			for i, p := range sd.Plugins {
				name := ""
				if i == 0 {
					name = n.Node
				}
				var raw, norm int64
				if i < len(n.Raw) && i < len(n.Normalized) {
					raw, norm = n.Raw[i], n.Normalized[i]
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\n", name, p.Name, raw, norm, p.Weight, norm*p.Weight)
			}
			fmt.Fprintf(tw, "\tTOTAL\t\t\t\t%d\n", n.Total)
		}
		tw.Flush()
		if sd.Omitted > 0 {
			fmt.Fprintf(&b, "(%d more nodes not shown)\n", sd.Omitted)
		}
	}
	if pd != nil && pd.Node != "" {
		fmt.Fprintf(&b, "\nPreemption: evicting %s on node %s\n", strings.Join(pd.Victims, ", "), pd.Node)
	}
	if pm != nil {
		switch pm.Outcome {
		case permitWaiting:
			fmt.Fprintf(&b, "\nPermit: waiting on node %s (assumed: its resources are held) for %s: %s\n", sd.Selected, strings.Join(pm.Plugins, ", "), pm.Message)
		case permitAllowed:
			fmt.Fprintf(&b, "\nPermit: allowed by %s after waiting\n", strings.Join(pm.Plugins, ", "))
		case permitRejected:
			fmt.Fprintf(&b, "\nPermit: rejected by %s: %s\n", strings.Join(pm.Plugins, ", "), pm.Message)
			sd.Selected, message = "", "0/1 nodes are available: 1 "+pm.Message+"."
		}
	}
	switch {
	case sd.Selected != "":
		fmt.Fprintf(&b, "\nSelected node: %s\n", sd.Selected)
	case message != "":
		fmt.Fprintf(&b, "\nUnschedulable: %s\n", message)
	}
	return b.String()
}
