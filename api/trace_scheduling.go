package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
)

// The scheduler's explanation of an attempt, kept with the pod as trace
// spans of component "scheduler" (controlplane/scheduler/explain.go writes
// them; the format is here because `skiff describe pod`, `skiff trace` and
// the dashboard read it too):
//
//	step "filter": SchedulingFilterDetails
//	step "score":  SchedulingScoreDetails
//	step "preemption": SchedulingPreemptionDetails
//	step "permit": Node, SchedulingPermitDetails
//	step "bind":   Node, Message (bound, or the error)
//	step "queue":  Details "plugin", "message": held by a PreEnqueue gate;
//	               no attempt to explain since

// SchedulingScorePlugin names a score plugin and its weight.
type SchedulingScorePlugin struct {
	Name   string
	Weight int64
}

// Permit outcomes in the "permit" span.
const (
	PermitWaiting  = "waiting"
	PermitAllowed  = "allowed"
	PermitRejected = "rejected"
)

// SchedulingPermitDetails are the "permit" span's Details.
type SchedulingPermitDetails struct {
	Outcome string   `json:"outcome"`
	Plugins []string `json:"plugins,omitempty"`
	Message string   `json:"message,omitempty"`
}

// SchedulingFilterRow is one node's filter verdict in a trace.
type SchedulingFilterRow struct {
	Node    string   `json:"node"`
	Fit     bool     `json:"fit"`
	Plugin  string   `json:"plugin,omitempty"`
	Reasons []string `json:"reasons,omitempty"`
	// Details: the rejecting plugin's explanation beyond its reasons
	// (DynamicResources: which request, selector or constraint failed).
	Details []string `json:"details,omitempty"`
}

// SchedulingFilterTable is how the scheduler records a filter span's
// "nodes" for every pod it traces: the names of the nodes looked at, in
// order, and rows only for the others than a bare fit (rejected, or with
// reasons): a node that fits is its name alone. Its JSON is Rows(), the
// []SchedulingFilterRow a trace's readers decode: the table only spares
// the scheduler a row per node per pod.
type SchedulingFilterTable struct {
	Nodes []string
	// Verdicts are the rows of the nodes that are not a bare fit, in
	// order; VerdictsAt[i] is the index in Nodes of Verdicts[i]'s node.
	Verdicts   []SchedulingFilterRow
	VerdictsAt []int
}

// Rows returns a row for every node of the table (nil when it has none).
func (t SchedulingFilterTable) Rows() []SchedulingFilterRow {
	if t.Nodes == nil {
		return nil
	}
	rows := make([]SchedulingFilterRow, len(t.Nodes))
	for i, n := range t.Nodes {
		rows[i] = SchedulingFilterRow{Node: n, Fit: true}
	}
	for i, at := range t.VerdictsAt {
		rows[at] = t.Verdicts[i]
	}
	return rows
}

// MarshalJSON encodes the table as its rows.
func (t SchedulingFilterTable) MarshalJSON() ([]byte, error) { return json.Marshal(t.Rows()) }

// SchedulingScoreTable is how the scheduler records a score span's
// "nodes" for every pod it traces: flat lists instead of a row, two
// slices and their arrays per node. Its JSON is Rows(), the
// []SchedulingScoreRow a trace's readers decode.
type SchedulingScoreTable struct {
	Nodes []string
	// Totals[i] is the total of Nodes[i].
	Totals []int64
	// Scores holds, node after node, its Plugins raw scores, then its
	// Plugins normalised ones, as int16 (plugins score in 0..100, or
	// small counts): a quarter of int64s, and 2,800 bytes less than int32s
	// for a hundred nodes and seven plugins. WideScores holds them instead
	// (Scores nil) when one does not fit.
	Scores     []int16
	WideScores []int64
	Plugins    int
}

// Rows returns a row for every node of the table (nil when it has none).
func (t SchedulingScoreTable) Rows() []SchedulingScoreRow {
	if t.Nodes == nil {
		return nil
	}
	scores := t.WideScores
	if t.Scores != nil {
		scores = make([]int64, len(t.Scores))
		for i, v := range t.Scores {
			scores[i] = int64(v)
		}
	}
	np := t.Plugins
	rows := make([]SchedulingScoreRow, len(t.Nodes))
	for i, n := range t.Nodes {
		at := 2 * np * i
		rows[i] = SchedulingScoreRow{Node: n, Raw: scores[at : at+np : at+np], Normalized: scores[at+np : at+2*np : at+2*np], Total: t.Totals[i]}
	}
	return rows
}

// MarshalJSON encodes the table as its rows.
func (t SchedulingScoreTable) MarshalJSON() ([]byte, error) { return json.Marshal(t.Rows()) }

// SchedulingScoreRow is one node's scores in a trace, indexed like the
// plugins.
type SchedulingScoreRow struct {
	Node       string  `json:"node"`
	Raw        []int64 `json:"raw"`
	Normalized []int64 `json:"normalized"`
	Total      int64   `json:"total"`
}

// SchedulingFilterDetails are the "filter" span's Details.
type SchedulingFilterDetails struct {
	Plugins   []string              `json:"plugins"`
	Nodes     []SchedulingFilterRow `json:"nodes"`
	Total     int                   `json:"total"`
	Evaluated int                   `json:"evaluated"`
	Omitted   int                   `json:"omitted,omitempty"`
	Message   string                `json:"message,omitempty"`
}

// SchedulingScoreDetails are the "score" span's Details.
type SchedulingScoreDetails struct {
	Plugins  []SchedulingScorePlugin `json:"plugins"`
	Nodes    []SchedulingScoreRow    `json:"nodes"`
	Omitted  int                     `json:"omitted,omitempty"`
	Selected string                  `json:"selected,omitempty"`
}

// SchedulingPreemptionDetails are the "preemption" span's Details.
type SchedulingPreemptionDetails struct {
	Node    string   `json:"node,omitempty"`
	Victims []string `json:"victims,omitempty"`
	Message string   `json:"message,omitempty"`
}

// ExplainSchedulingTrace renders the last scheduling attempt found in a
// pod's trace spans, as the scheduler's Explain does; "" when the trace
// has none.
func ExplainSchedulingTrace(pod string, spans []TraceSpan) string {
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
	var fd SchedulingFilterDetails
	var sd SchedulingScoreDetails
	var pd *SchedulingPreemptionDetails
	var pm *SchedulingPermitDetails
	decode(spans[last].Details, &fd)
	for _, s := range spans[last+1:] {
		if s.Component != "scheduler" {
			continue
		}
		switch s.Step {
		case "score":
			decode(s.Details, &sd)
		case "preemption":
			pd = &SchedulingPreemptionDetails{}
			decode(s.Details, pd)
		case "permit":
			pm = &SchedulingPermitDetails{}
			decode(s.Details, pm)
		}
	}
	return RenderSchedulingExplanation(pod, fd, sd, pd, pm, fd.Message)
}

// LastSchedulingAttempt decodes the filter and score details of the last
// scheduling attempt in a pod's trace spans; ok is false when the trace
// has none (or the pod was held by a gate since).
func LastSchedulingAttempt(spans []TraceSpan) (fd SchedulingFilterDetails, sd SchedulingScoreDetails, ok bool) {
	last := -1
	for i, s := range spans {
		if s.Component == "scheduler" && s.Step == "filter" {
			last = i
		}
		if s.Component == "scheduler" && s.Step == "queue" {
			last = -1
		}
	}
	if last < 0 {
		return fd, sd, false
	}
	decode(spans[last].Details, &fd)
	for _, s := range spans[last+1:] {
		if s.Component == "scheduler" && s.Step == "score" {
			decode(s.Details, &sd)
		}
	}
	return fd, sd, true
}

// decode converts span details (a map after JSON) into one of the detail structs.
func decode(details map[string]any, into any) {
	b, err := json.Marshal(details)
	if err == nil {
		_ = json.Unmarshal(b, into) // best effort: a foreign span renders as empty
	}
}

// RenderSchedulingExplanation renders one attempt as the tables a
// student reads: which filter rejected each node and why, how each
// feasible node scored under each plugin (raw, normalised 0..100, times
// the weight), preemption, Permit, and the verdict.
func RenderSchedulingExplanation(pod string, fd SchedulingFilterDetails, sd SchedulingScoreDetails, pd *SchedulingPreemptionDetails, pm *SchedulingPermitDetails, message string) string {
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
		case PermitWaiting:
			fmt.Fprintf(&b, "\nPermit: waiting on node %s (assumed: its resources are held) for %s: %s\n", sd.Selected, strings.Join(pm.Plugins, ", "), pm.Message)
		case PermitAllowed:
			fmt.Fprintf(&b, "\nPermit: allowed by %s after waiting\n", strings.Join(pm.Plugins, ", "))
		case PermitRejected:
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
