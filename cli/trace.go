package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/dashboard"
)

// traceCmd is `skiff trace pod NAME`: the timed chain of steps that
// brought a pod to life (API server → scheduler → agent → devices → runtime).
type traceCmd struct {
	root   *Root
	args   []string
	output string
}

func newTraceCmd(r *Root) *cobra.Command {
	c := &traceCmd{root: r}
	cmd := &cobra.Command{
		Use:   "trace pod NAME | trace pod/NAME | trace hpa/NAME",
		Short: "Show the timed steps that brought a pod to life, or an autoscaler's decisions",
		Long: `Show the trace of a pod: each component (apiserver, scheduler, agent,
device-manager, runtime) records the steps it took for the pod, with their
start and duration. This is real data from the real run.

For a HorizontalPodAutoscaler (trace hpa/NAME): the controller's last
decisions, one per sync, with their inputs (per pod values, the ratio, the
tolerance test, the policy or window that limited the result).`,
		ValidArgsFunction: r.completeResourceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.args = args
			return c.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&c.output, "output", "o", "", "output format: json|yaml|html (default: a table; html is the dashboard's chain view as one self-contained file)")
	return cmd
}

// Run prints the spans, one a line, then the total.
func (c *traceCmd) Run(ctx context.Context) error {
	refs, err := parseResourceArgs("trace", c.args)
	if err != nil {
		return err
	}
	if len(refs) != 1 || (refs[0].Kind.Kind != "Pod" && refs[0].Kind.Kind != "HorizontalPodAutoscaler") || len(refs[0].Names) != 1 {
		return errors.New("trace takes one pod or autoscaler: skiff trace pod NAME, skiff trace hpa NAME")
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	name := refs[0].Names[0]
	if refs[0].Kind.Kind == "HorizontalPodAutoscaler" {
		return c.runHPA(ctx, cl, refs[0].Kind, name)
	}
	if c.output == "html" { // the chain view, one file (dashboard/chainhtml.go)
		ch, err := dashboard.GetChain(ctx, cl, c.root.Namespace, name)
		if err != nil {
			return err
		}
		return dashboard.WriteChainHTML(c.root.Stdout, ch)
	}
	tr, err := cl.GetTrace(ctx, c.root.Namespace, name)
	if err != nil {
		return err
	}
	if printed, err := c.printAs(tr, "trace: json, yaml or html"); printed || err != nil {
		return err
	}
	if len(tr.Spans) == 0 {
		fmt.Fprintf(c.root.Stdout, "No trace recorded for pod %q yet.\n", name)
		if ls, ok, err := serverLeader(ctx, cl); err == nil && ok {
			// Several servers: traces are kept in memory by the API
			// server they were posted to (controlplane/ha.go).
			fmt.Fprintf(c.root.Stdout, "Answered by %s: each API server keeps only the spans posted to it; the pod's may be on another server.\n", describeServer(ls.Self))
		}
		return nil
	}
	first := tr.Spans[0].Start.Time
	last := first
	for _, s := range tr.Spans {
		if s.Start.Before(first) {
			first = s.Start.Time
		}
	}
	w := newTabWriter(c.root.Stdout)
	fmt.Fprintln(w, "OFFSET\tCOMPONENT\tSTEP\tNODE\tDURATION\tMESSAGE")
	for _, s := range tr.Spans {
		end := s.End.Time
		if end.IsZero() {
			end = s.Start.Time
		}
		if end.After(last) {
			last = end
		}
		fmt.Fprintf(w, "+%s\t%s\t%s\t%s\t%s\t%s\n", ms(s.Start.Sub(first)), s.Component, s.Step, orDefault(s.Node, "-"), ms(end.Sub(s.Start.Time)), s.Message)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.root.Stdout, "Total: %s from the first step to the last (%d steps)\n", ms(last.Sub(first)), len(tr.Spans))
	if unbound(tr.Spans) {
		// Why no node took it: the last attempt's per-node record (for a
		// claim, which request, selector or constraint ruled out which
		// devices), as describe pod shows it.
		if table := api.ExplainSchedulingTrace(name, tr.Spans); table != "" {
			fmt.Fprintf(c.root.Stdout, "\nLast scheduling attempt:\n%s", table)
		}
	}
	return nil
}

// runHPA prints an autoscaler's decisions: one row per sync, then its steps.
func (c *traceCmd) runHPA(ctx context.Context, cl client.Interface, k *api.Kind, name string) error {
	t, ok := cl.(client.ObjectTracer)
	if !ok {
		return errors.New("this client cannot read traces")
	}
	tr, err := t.GetObjectTrace(ctx, k, c.root.Namespace, name)
	if err != nil {
		return err
	}
	if printed, err := c.printAs(tr, "trace hpa: json or yaml"); printed || err != nil {
		return err
	}
	ds := api.HPADecisions(tr.Spans)
	if len(ds) == 0 {
		fmt.Fprintf(c.root.Stdout, "No decisions recorded for horizontalpodautoscaler %q yet.\n", name)
		if ls, ok, err := serverLeader(ctx, cl); err == nil && ok {
			fmt.Fprintf(c.root.Stdout, "Answered by %s: the leader's controller posts its decisions to its own API server; they may be on another server.\n", describeServer(ls.Self))
		}
		return nil
	}
	for i, d := range ds {
		if i > 0 {
			fmt.Fprintln(c.root.Stdout)
		}
		fmt.Fprintf(c.root.Stdout, "%s  %d -> %d replicas\n", d.Time.UTC().Format(time.RFC3339), d.CurrentReplicas, d.DesiredReplicas)
		for _, s := range d.Steps {
			fmt.Fprintf(c.root.Stdout, "  %s\n", s)
		}
	}
	return nil
}

// unbound reports whether the scheduler's last attempt in spans bound
// no node: a filter step with no bind after it.
func unbound(spans []api.TraceSpan) bool {
	tried, bound := false, false
	for _, s := range spans {
		if s.Component != "scheduler" {
			continue
		}
		switch s.Step {
		case "filter":
			tried, bound = true, false
		case "bind":
			bound = true
		}
	}
	return tried && !bound
}

// ms formats a duration in milliseconds with one decimal: "12.3ms".
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
}

// printAs prints tr as -o json or yaml asks (printed), refuses any other
// -o with the formats this trace has, and leaves the table (no -o) to
// the caller.
func (c *traceCmd) printAs(tr any, formats string) (printed bool, err error) {
	switch c.output {
	case "json", "yaml":
		data, err := json.Marshal(tr)
		if err != nil {
			return true, err
		}
		return true, printJSONAs(c.root.Stdout, data, outputFormat{Format: c.output})
	case "":
		return false, nil
	}
	return false, fmt.Errorf("unsupported output format %q for %s", c.output, formats)
}
