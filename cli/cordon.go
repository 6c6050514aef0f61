package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Node maintenance, as kubectl's cordon, uncordon and drain
// (k8s.io/kubectl/pkg/cmd/drain):
//
//   - cordon sets the node's spec.unschedulable: the scheduler's
//     NodeUnschedulable filter keeps new pods away; pods already there stay.
//   - uncordon clears it.
//   - drain cordons, then deletes the pods on the node so their
//     controllers recreate them elsewhere, and waits until they are gone.
//     It refuses, unless told otherwise, pods that would be lost for good:
//     pods with no controller (--force) and pods with emptyDir data
//     (--delete-emptydir-data). skiff has no DaemonSets, so
//     --ignore-daemonsets is accepted for kubectl's muscle memory and
//     changes nothing. Pods are deleted, not evicted: there are no
//     PodDisruptionBudgets to respect.

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
	changed, err := updateNode(ctx, cl, name, func(n *api.Node) bool {
		if n.Spec.Unschedulable == on {
			return false
		}
		n.Spec.Unschedulable = on
		return true
	})
	if err != nil {
		return err
	}
	if !changed {
		verb = "already " + verb
	}
	fmt.Fprintf(r.Stdout, "%s %s\n", objectRef(nodeKind, name), verb)
	return nil
}

// updateNode reads a node, lets edit change a copy (edit returns false for
// "nothing to do") and writes it back with its resourceVersion, retrying
// on conflict as kubectl's patches effectively do.
func updateNode(ctx context.Context, cl client.Interface, name string, edit func(*api.Node) bool) (bool, error) {
	return updateObject(ctx, cl, nodeKind, "", name, func(o api.Object) (bool, error) { return edit(o.(*api.Node)), nil })
}

// updateObject is a read-modify-write with conflict retries. edit gets a
// copy; it returns whether it changed anything, or an error to stop.
func updateObject(ctx context.Context, cl client.Interface, k *api.Kind, ns, name string, edit func(api.Object) (bool, error)) (bool, error) {
	const retries = 5
	for i := 0; ; i++ {
		cur, err := cl.Get(ctx, k, ns, name)
		if err != nil {
			return false, err
		}
		next := api.Clone(cur)
		changed, err := edit(next)
		if err != nil || !changed {
			return false, err
		}
		if _, err = cl.Update(ctx, next); err == nil {
			return true, nil
		}
		if !api.IsConflict(err) || i == retries {
			return false, err
		}
	}
}

// drainCmd is `skiff drain NODE`.
type drainCmd struct {
	root             *Root
	ignoreDaemonSets bool
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
		Short: "Drain a node in preparation for maintenance: cordon it, then delete its pods",
		Long: `Drain a node: mark it unschedulable, then delete the pods running on it so that
their controllers (ReplicaSets) recreate them on other nodes, and wait until they
are gone. Pods that no controller would recreate are refused unless --force, and
pods with emptyDir data unless --delete-emptydir-data.`,
		Example: `  skiff drain node-1
  skiff drain node-1 --force --grace-period=0 --timeout=60s`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: r.completeNames("nodes"),
		RunE:              func(cmd *cobra.Command, args []string) error { return c.Run(cmd.Context(), args[0]) },
	}
	f := cmd.Flags()
	f.BoolVar(&c.ignoreDaemonSets, "ignore-daemonsets", false, "ignore DaemonSet-managed pods (skiff has no DaemonSets: accepted for kubectl compatibility)")
	f.BoolVar(&c.force, "force", false, "continue even if there are pods that do not declare a controller")
	f.BoolVar(&c.deleteEmptyDir, "delete-emptydir-data", false, "continue even if there are pods using emptyDir (its data is lost)")
	f.Int64Var(&c.gracePeriod, "grace-period", -1, "seconds each pod is given to terminate; negative: the pod's own terminationGracePeriodSeconds")
	f.DurationVar(&c.timeout, "timeout", 0, "how long to wait before giving up; zero means infinite")
	return cmd
}

// Run cordons the node, deletes its pods and waits until they are gone.
func (c *drainCmd) Run(ctx context.Context, node string) error {
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	if err := setUnschedulable(ctx, c.root, cl, node, true); err != nil {
		return err
	}
	fail := func(err error) error {
		return &ExitError{Code: 1, Err: fmt.Errorf("unable to drain node %q due to error: %w, continuing command...\n"+
			"There are pending nodes to be drained:\n %s", node, err, node)}
	}
	pods, _, err := client.List[*api.Pod](ctx, cl, "", api.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return fail(err)
	}
	var doomed []*api.Pod
	var unmanaged, local []string
	for _, p := range pods {
		if p.Spec.NodeName != node {
			continue
		}
		if finished(p) || p.DeletionTimestamp != nil {
			doomed = append(doomed, p) // terminated or already going: no questions
			continue
		}
		if api.ControllerOf(p) == nil {
			unmanaged = append(unmanaged, p.Namespace+"/"+p.Name)
		}
		if hasEmptyDir(p) {
			local = append(local, p.Namespace+"/"+p.Name)
		}
		doomed = append(doomed, p)
	}
	var refusals []string
	if len(unmanaged) > 0 {
		if c.force {
			fmt.Fprintf(c.root.Stderr, "Warning: deleting Pods that declare no controller: %s\n", strings.Join(unmanaged, ", "))
		} else {
			refusals = append(refusals, "cannot delete Pods that declare no controller (use --force to override): "+strings.Join(unmanaged, ", "))
		}
	}
	if len(local) > 0 && !c.deleteEmptyDir {
		refusals = append(refusals, "cannot delete Pods with local storage (use --delete-emptydir-data to override): "+strings.Join(local, ", "))
	}
	if len(refusals) > 0 {
		return fail(errors.New("[" + strings.Join(refusals, ", ") + "]"))
	}
	opts := api.DeleteOptions{}
	if c.gracePeriod >= 0 {
		g := c.gracePeriod
		opts.GracePeriodSeconds = &g
	}
	podKind := api.MustKindOf(&api.Pod{})
	for _, p := range doomed {
		fmt.Fprintf(c.root.Stdout, "evicting pod %s/%s\n", p.Namespace, p.Name)
		uid := p.UID
		o := opts
		o.Preconditions = &api.Preconditions{UID: &uid}
		if err := cl.Delete(ctx, podKind, p.Namespace, p.Name, o); err != nil && !api.IsNotFound(err) && !api.IsConflict(err) {
			return fail(fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	if err := c.waitGone(ctx, cl, doomed); err != nil {
		return fail(err)
	}
	fmt.Fprintf(c.root.Stdout, "%s drained\n", objectRef(nodeKind, node))
	return nil
}

// waitGone waits until every pod is deleted (or replaced by a new pod of
// the same name), checking every pollInterval, for at most --timeout.
func (c *drainCmd) waitGone(ctx context.Context, cl client.Interface, pods []*api.Pod) error {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	tick := time.NewTicker(c.pollInterval)
	defer tick.Stop()
	left := pods
	for {
		var still []*api.Pod
		for _, p := range left {
			cur, err := client.Get[*api.Pod](ctx, cl, p.Namespace, p.Name)
			switch {
			case api.IsNotFound(err):
				fmt.Fprintf(c.root.Stdout, "pod/%s evicted\n", p.Name)
			case err != nil && ctx.Err() == nil:
				return err
			case err == nil && cur.UID != p.UID:
				fmt.Fprintf(c.root.Stdout, "pod/%s evicted\n", p.Name)
			default:
				still = append(still, p)
			}
		}
		left = still
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			p := left[0]
			if c.timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("error when waiting for pod %q in namespace %q to terminate: global timeout reached: %v", p.Name, p.Namespace, c.timeout)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func finished(p *api.Pod) bool {
	return p.Status.Phase == api.PodSucceeded || p.Status.Phase == api.PodFailed
}

func hasEmptyDir(p *api.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil {
			return true
		}
	}
	return false
}
