package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/kubectl"
)

// Node maintenance, as kubectl's cordon, uncordon and drain: the logic
// is client/kubectl's (drain.go); these verbs parse and print.

var nodeKind = api.MustKindOf(&api.Node{})

// cordonCmd is `skiff cordon NODE...` and, with uncordon set, `skiff uncordon NODE...`.
type cordonCmd struct {
	root     *Root
	uncordon bool
}

func newCordonCmd(r *Root) *cobra.Command {
	c := &cordonCmd{root: r}
	return &cobra.Command{
		Use:               "cordon NODE...",
		Short:             "Mark nodes as unschedulable",
		Example:           "  skiff cordon node-1",
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: r.completeNames("nodes"),
		RunE:              func(cmd *cobra.Command, args []string) error { return c.Run(cmd.Context(), args) },
	}
}

func newUncordonCmd(r *Root) *cobra.Command {
	c := &cordonCmd{root: r, uncordon: true}
	return &cobra.Command{
		Use:               "uncordon NODE...",
		Short:             "Mark nodes as schedulable",
		Example:           "  skiff uncordon node-1",
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: r.completeNames("nodes"),
		RunE:              func(cmd *cobra.Command, args []string) error { return c.Run(cmd.Context(), args) },
	}
}

// Run cordons (or uncordons) every named node, reporting each failure.
func (c *cordonCmd) Run(ctx context.Context, nodes []string) error {
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	failed := false
	for _, name := range nodes {
		if err := setUnschedulable(ctx, c.root, cl, name, !c.uncordon); err != nil {
			c.root.report(err)
			failed = true
		}
	}
	if failed {
		return errReported()
	}
	return nil
}

// setUnschedulable writes spec.unschedulable and prints kubectl's line
// ("node/n1 cordoned", "node/n1 already cordoned").
func setUnschedulable(ctx context.Context, r *Root, cl client.Interface, name string, on bool) error {
	verb := "cordoned"
	if !on {
		verb = "uncordoned"
	}
	changed, err := kubectl.SetUnschedulable(ctx, cl, name, on)
	if err != nil {
		return err
	}
	if !changed {
		verb = "already " + verb
	}
	fmt.Fprintf(r.Stdout, "%s %s\n", objectRef(nodeKind, name), verb)
	return nil
}

// drainCmd is `skiff drain NODE`.
type drainCmd struct {
	root             *Root
	ignoreDaemonSets bool
	disableEviction  bool
	force            bool
	deleteEmptyDir   bool
	gracePeriod      int64
	timeout          time.Duration
	pollInterval     time.Duration
}

func newDrainCmd(r *Root) *cobra.Command {
	c := &drainCmd{root: r, pollInterval: time.Second}
	cmd := &cobra.Command{
		Use:   "drain NODE",
		Short: "Drain a node in preparation for maintenance: cordon it, then evict its pods",
		Long: `Drain a node: mark it unschedulable, then evict the pods running on it so that
their controllers recreate them on other nodes, and wait until they are gone. An
eviction that a PodDisruptionBudget refuses is tried again every 5 seconds until
the budget allows it. Pods that no controller would recreate are refused unless
--force, pods with emptyDir data unless --delete-emptydir-data, and DaemonSet pods
(their DaemonSet keeps them on the node) unless --ignore-daemonsets, which leaves
them running.`,
		Example: `  skiff drain node-1 --ignore-daemonsets
  skiff drain node-1 --force --grace-period=0 --timeout=60s`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: r.completeNames("nodes"),
		RunE:              func(cmd *cobra.Command, args []string) error { return c.Run(cmd.Context(), args[0]) },
	}
	f := cmd.Flags()
	f.BoolVar(&c.ignoreDaemonSets, "ignore-daemonsets", false, "ignore DaemonSet-managed pods (they stay on the node)")
	f.BoolVar(&c.disableEviction, "disable-eviction", false, "delete pods instead of evicting them, bypassing PodDisruptionBudgets")
	f.BoolVar(&c.force, "force", false, "continue even if there are pods that do not declare a controller")
	f.BoolVar(&c.deleteEmptyDir, "delete-emptydir-data", false, "continue even if there are pods using emptyDir (its data is lost)")
	f.Int64Var(&c.gracePeriod, "grace-period", -1, "seconds each pod is given to terminate; negative: the pod's own terminationGracePeriodSeconds")
	f.DurationVar(&c.timeout, "timeout", 0, "how long to wait before giving up; zero means infinite")
	return cmd
}

// Run cordons the node, evicts its pods and waits until they are gone.
func (c *drainCmd) Run(ctx context.Context, node string) error {
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	if err := setUnschedulable(ctx, c.root, cl, node, true); err != nil {
		return err
	}
	d := &kubectl.Drainer{Client: cl, Force: c.force, DeleteEmptyDirData: c.deleteEmptyDir, IgnoreDaemonSets: c.ignoreDaemonSets,
		DisableEviction: c.disableEviction, GracePeriodSeconds: c.gracePeriod,
		Timeout: c.timeout, PollInterval: c.pollInterval, Out: c.root.Stdout, ErrOut: c.root.Stderr}
	if err := d.DeletePods(ctx, node); err != nil {
		// kubectl's RunDrain: the node's error, the nodes left, then the
		// error again as its CheckErr prints it: a refusal (an
		// aggregate) one reason a line, bare; anything else "error: ...".
		fmt.Fprintf(c.root.Stderr, "error: unable to drain node %q due to error: %s, continuing command...\n", node, err)
		fmt.Fprintf(c.root.Stderr, "There are pending nodes to be drained:\n %s\n", node)
		var refusal *kubectl.Refusal
		if errors.As(err, &refusal) {
			for _, r := range refusal.Reasons {
				fmt.Fprintln(c.root.Stderr, r)
			}
			return &ExitError{Code: 1}
		}
		return &ExitError{Code: 1, Err: err}
	}
	fmt.Fprintf(c.root.Stdout, "%s drained\n", objectRef(nodeKind, node))
	return nil
}
