package scenario

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/fabric"
)

// Placement is where one pod is once a step settled.
type Placement struct {
	// Pod is NAMESPACE/NAME; Owner what made it (job/job-b, pod/x).
	Pod, Owner string
	// Node ("" Pending) and its NVLink domain.
	Node, Domain string
	// Phase of the pod.
	Phase string
	// New: first shown in this step, or moved since.
	New bool
	// Reasons are the scheduler's per-node answers of its last attempt,
	// one line a node: "node-1  no   NodeResourcesFit: Insufficient
	// nvidia.com/gpu", "node-2  fits score 412  <- chosen". Only for new
	// placements.
	Reasons []string
	// Explain is the scheduler's full explanation (describe pod's
	// tables), for new placements.
	Explain string
}

// placements lists every pod with its owner, node and, for new ones,
// the scheduler's reasons read back from the pod's trace.
func (r *runner) placements(ctx context.Context, st *state) ([]Placement, error) {
	domain := map[string]string{}
	for _, n := range st.nodes {
		domain[n.Name] = n.Labels[fabric.LabelDomain]
	}
	var out []Placement
	for _, p := range st.pods {
		chain := st.ownerChain(p)
		kind, _, _ := strings.Cut(chain[len(chain)-1], "/")
		name := p.Name
		if len(chain) > 1 {
			parts := strings.Split(chain[len(chain)-1], "/")
			name = parts[2]
		}
		pl := Placement{Pod: api.KeyOf(p), Owner: strings.ToLower(kind) + "/" + name, Node: p.Spec.NodeName, Domain: domain[p.Spec.NodeName], Phase: p.Status.Phase}
		seenKey := pl.Pod + "@" + pl.Node + "/" + pl.Phase
		pl.New = !r.seen[seenKey]
		r.seen[seenKey] = true
		if pl.New && p.Status.Phase != api.PodSucceeded && p.Status.Phase != api.PodFailed {
			tr, err := r.sc.c.GetTrace(ctx, p.Namespace, p.Name)
			if err != nil {
				return nil, fmt.Errorf("trace of pod %s: %w", pl.Pod, err)
			}
			pl.Reasons = reasons(tr.Spans)
			pl.Explain = api.ExplainSchedulingTrace(p.Name, tr.Spans)
		}
		out = append(out, pl)
	}
	return out, nil
}

// reasons renders the last attempt's filter and score per node, one line
// a node.
func reasons(spans []api.TraceSpan) []string {
	fd, sd, ok := api.LastSchedulingAttempt(spans)
	if !ok {
		return nil
	}
	score := map[string]int64{}
	for _, n := range sd.Nodes {
		score[n.Node] = n.Total
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, n := range fd.Nodes {
		switch {
		case !n.Fit:
			fmt.Fprintf(tw, "%s\tno\t%s: %s\n", n.Node, n.Plugin, strings.Join(n.Reasons, ", "))
		case n.Node == sd.Selected:
			fmt.Fprintf(tw, "%s\tfits\tscore %d  <- chosen\n", n.Node, score[n.Node])
		default:
			fmt.Fprintf(tw, "%s\tfits\tscore %d\n", n.Node, score[n.Node])
		}
	}
	tw.Flush()
	if fd.Omitted > 0 {
		fmt.Fprintf(&b, "(%d more nodes)\n", fd.Omitted)
	}
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

// where is a placement as a cell: "node-2 (nvl-a)", "Pending".
func (p Placement) where() string {
	s := p.Phase
	if p.Node != "" {
		s = p.Node
		if p.Domain != "" {
			s += " (" + p.Domain + ")"
		}
		if p.Phase != api.PodRunning {
			s += " " + p.Phase
		}
	}
	if p.New {
		s += " *"
	}
	return s
}

// WriteReport prints the results: for one configuration each step's
// placements with the scheduler's reasons, usage and expectations; for
// several, each step's placements side by side (one column each), then
// each configuration's reasons. explain adds the scheduler's full tables.
func WriteReport(w io.Writer, f *File, results []*Result, explain bool) {
	fmt.Fprintf(w, "Scenario %s", f.Metadata.Name)
	if f.Description != "" {
		fmt.Fprintf(w, ": %s", strings.TrimSpace(f.Description))
	}
	fmt.Fprintln(w)
	for _, r := range results {
		src := r.Config.File
		if src == "" {
			src = "Kubernetes' defaults"
		}
		fmt.Fprintf(w, "  configuration %s: %s (cluster started in %d ms)\n", r.Config.Name, src, r.Startup.Milliseconds())
	}
	fmt.Fprintln(w, "(* placed by this step)")
	steps := 0
	for _, r := range results {
		steps = max(steps, len(r.Steps))
	}
	for i := range steps {
		fmt.Fprintf(w, "\nStep %d: %s (settled in", i+1, stepAt(results, i).Title)
		for j, r := range results {
			if i < len(r.Steps) {
				fmt.Fprintf(w, "%s %d ms", map[bool]string{true: ",", false: ""}[j > 0], r.Steps[i].Took.Milliseconds())
			}
		}
		fmt.Fprintln(w, ")")
		writeStepTable(w, results, i)
		for _, r := range results {
			if i >= len(r.Steps) {
				continue
			}
			writeReasons(w, r, i, len(results) > 1, explain)
		}
	}
}

func stepAt(results []*Result, i int) StepResult {
	for _, r := range results {
		if i < len(r.Steps) {
			return r.Steps[i]
		}
	}
	return StepResult{}
}

// writeStepTable prints a step's placements, usage and checks, one
// column per configuration. Rows are pods by owner: the nth pod of
// job/job-b in each column.
func writeStepTable(w io.Writer, results []*Result, i int) {
	type row struct {
		label string
		cells []string
	}
	var rows []*row
	index := map[string]*row{}
	for c, r := range results {
		if i >= len(r.Steps) {
			continue
		}
		nth := map[string]int{}
		for _, p := range r.Steps[i].Placements {
			nth[p.Owner]++
			key := fmt.Sprintf("%s#%d", p.Owner, nth[p.Owner])
			rw := index[key]
			if rw == nil {
				label := p.Owner
				if nth[p.Owner] > 1 {
					label = fmt.Sprintf("%s #%d", p.Owner, nth[p.Owner])
				}
				rw = &row{label: label, cells: make([]string, len(results))}
				index[key] = rw
				rows = append(rows, rw)
			}
			rw.cells[c] = p.where()
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(results) > 1 {
		fmt.Fprint(tw, "  \t")
		for _, r := range results {
			fmt.Fprintf(tw, "%s\t", r.Config.Name)
		}
		fmt.Fprintln(tw)
	}
	for _, rw := range rows {
		fmt.Fprintf(tw, "  %s\t%s\t\n", rw.label, strings.Join(rw.cells, "\t"))
	}
	fmt.Fprint(tw, "  usage\t")
	for _, r := range results {
		if i < len(r.Steps) {
			fmt.Fprintf(tw, "%s\t", shortUsage(r.Steps[i].Usage))
		}
	}
	fmt.Fprintln(tw)
	tw.Flush()
}

func shortUsage(u Usage) string {
	pct := int64(0)
	if u.GPUs > 0 {
		pct = u.Used * 100 / u.GPUs
	}
	return fmt.Sprintf("GPUs %d/%d (%d%%), %d fragmented, %d free nodes, %d Pending", u.Used, u.GPUs, pct, u.Fragmented, u.FreeNodes, u.Pending)
}

// writeReasons prints why the scheduler put each new pod where it is,
// and the step's checks, for one configuration.
func writeReasons(w io.Writer, r *Result, i int, named, explain bool) {
	s := r.Steps[i]
	prefix := ""
	if named {
		prefix = r.Config.Name + ": "
	}
	for _, p := range s.Placements {
		if !p.New || len(p.Reasons) == 0 {
			continue
		}
		to := "Pending"
		if p.Node != "" {
			to = "-> " + p.Node
		}
		fmt.Fprintf(w, "  %s%s %s\n", prefix, p.Pod, to)
		if explain && p.Explain != "" {
			for _, l := range strings.Split(strings.TrimSuffix(p.Explain, "\n"), "\n") {
				fmt.Fprintf(w, "      %s\n", l)
			}
			continue
		}
		for _, l := range p.Reasons {
			fmt.Fprintf(w, "      %s\n", l)
		}
	}
	for _, c := range s.Checks {
		if c.Failure == "" {
			fmt.Fprintf(w, "  %sok      %s\n", prefix, c.Expectation)
		} else {
			fmt.Fprintf(w, "  %sFAILED  %s: %s\n", prefix, c.Expectation, c.Failure)
		}
	}
}
