package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/table"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/kubectl"
)

// newRolloutCmd is `skiff rollout status|history|undo|restart`.
func newRolloutCmd(r *Root) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout SUBCOMMAND",
		Short: "Manage the rollout of a deployment, daemon set or stateful set",
		Long: `Manage the rollout of a deployment, daemon set or stateful set. A deployment
keeps one ReplicaSet per pod template, each with a revision number (annotation
deployment.kubernetes.io/revision); a daemon set and a stateful set keep one
ControllerRevision per pod template. That is the rollout history
(client/kubectl/rollout.go).`,
	}
	cmd.AddCommand(newRolloutStatusCmd(r), newRolloutHistoryCmd(r), newRolloutUndoCmd(r), newRolloutRestartCmd(r))
	return cmd
}

// rolloutTarget is one object a rollout verb names.
type rolloutTarget struct {
	kind *api.Kind
	name string
}

// rolloutTargets reads `KIND/NAME...` or `KIND NAME...` of deployments,
// daemon sets and stateful sets.
func rolloutTargets(verb string, args []string) ([]rolloutTarget, error) {
	refs, err := parseResourceArgs(verb, args)
	if err != nil {
		return nil, err
	}
	var out []rolloutTarget
	for _, ref := range refs {
		if !kubectl.Rollable(ref.Kind) {
			return nil, fmt.Errorf("no %s for %s: only deployments, daemonsets and statefulsets are supported", verb, ref.Kind.Resource)
		}
		if len(ref.Names) == 0 {
			return nil, errors.New("resource(s) were provided, but no name was specified")
		}
		for _, n := range ref.Names {
			out = append(out, rolloutTarget{ref.Kind, n})
		}
	}
	return out, nil
}

// revisionOf reads the deployment.kubernetes.io/revision annotation (0 when absent).
func revisionOf(obj api.Object) int64 {
	v, err := strconv.ParseInt(obj.GetObjectMeta().Annotations[api.AnnotationRevision], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// replicaSetsOf lists the ReplicaSets the deployment controls, oldest revision first.
func replicaSetsOf(ctx context.Context, cl client.Interface, d *api.Deployment) ([]*api.ReplicaSet, error) {
	all, _, err := client.List[*api.ReplicaSet](ctx, cl, d.Namespace, api.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*api.ReplicaSet
	for _, rs := range all {
		if api.IsControlledBy(rs, d.UID) {
			out = append(out, rs)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return revisionOf(out[i]) < revisionOf(out[j]) })
	return out, nil
}

// templateWithoutHash is an RS's pod template as the deployment had it.
func templateWithoutHash(t api.PodTemplateSpec) api.PodTemplateSpec {
	wrapped := api.Clone(&api.ReplicaSet{Spec: api.ReplicaSetSpec{Template: t}})
	out := wrapped.Spec.Template
	delete(out.Labels, api.LabelPodTemplateHash)
	return out
}

// rolloutStatusCmd is `rollout status KIND/NAME`.
type rolloutStatusCmd struct {
	root    *Root
	args    []string
	watch   bool
	timeout time.Duration
}

func newRolloutStatusCmd(r *Root) *cobra.Command {
	c := &rolloutStatusCmd{root: r}
	cmd := &cobra.Command{
		Use:               "status (deployment|daemonset|statefulset)/NAME",
		Short:             "Watch a rollout until it completes",
		ValidArgsFunction: r.completeResourceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.args = args
			return c.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVarP(&c.watch, "watch", "w", true, "watch until the rollout completes")
	cmd.Flags().DurationVar(&c.timeout, "timeout", 0, "give up after this long (0: never)")
	return cmd
}

// Run prints kubectl's progress messages until the rollout is complete.
func (c *rolloutStatusCmd) Run(ctx context.Context) error {
	targets, err := rolloutTargets("rollout status", c.args)
	if err != nil {
		return err
	}
	if len(targets) != 1 {
		return errors.New("rollout status takes exactly one resource")
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	k, ns, name := targets[0].kind, c.root.Namespace, targets[0].name
	last := ""
	// show prints a new message and reports whether the rollout is done.
	show := func(obj api.Object) (bool, error) {
		msg, done, err := kubectl.RolloutStatus(obj)
		if err != nil {
			return false, err
		}
		if msg != last {
			fmt.Fprint(c.root.Stdout, msg)
			last = msg
		}
		return done, nil
	}
	for {
		obj, err := cl.Get(ctx, k, ns, name)
		if err != nil {
			return c.timedOut(ctx, err)
		}
		if done, err := show(obj); done || err != nil || !c.watch {
			return err
		}
		w, err := cl.Watch(ctx, k, ns, api.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: obj.GetObjectMeta().ResourceVersion})
		if err != nil {
			return c.timedOut(ctx, err)
		}
		for ev := range w.Events() {
			if ev.Type == api.Deleted {
				w.Stop()
				return fmt.Errorf("%s %q was deleted", strings.ToLower(k.Kind), name)
			}
			if ev.Object == nil || ev.Type == api.Error {
				continue
			}
			if done, err := show(ev.Object); done || err != nil {
				w.Stop()
				return err
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return c.timedOut(ctx, ctx.Err())
		}
	}
}

func (c *rolloutStatusCmd) timedOut(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errors.New("timed out waiting for the condition")
	}
	return err
}

// rolloutHistoryCmd is `rollout history KIND/NAME [--revision N]`.
type rolloutHistoryCmd struct {
	root     *Root
	args     []string
	revision int64
}

func newRolloutHistoryCmd(r *Root) *cobra.Command {
	c := &rolloutHistoryCmd{root: r}
	cmd := &cobra.Command{
		Use:               "history (deployment|daemonset|statefulset)/NAME",
		Short:             "Show the revisions of a rollout",
		ValidArgsFunction: r.completeResourceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.args = args
			return c.Run(cmd.Context())
		},
	}
	cmd.Flags().Int64Var(&c.revision, "revision", 0, "show the pod template of this revision")
	return cmd
}

// Run prints the REVISION CHANGE-CAUSE table, or one revision's template.
func (c *rolloutHistoryCmd) Run(ctx context.Context) error {
	targets, err := rolloutTargets("rollout history", c.args)
	if err != nil {
		return err
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	out := c.root.Stdout
	for _, tg := range targets {
		obj, err := cl.Get(ctx, tg.kind, c.root.Namespace, tg.name)
		if err != nil {
			return err
		}
		hist, err := kubectl.History(ctx, cl, obj)
		if err != nil {
			return err
		}
		ref := objectRef(tg.kind, tg.name)
		if c.revision > 0 {
			for _, rev := range hist {
				if rev.Number == c.revision {
					fmt.Fprintf(out, "%s with revision #%d\n", ref, c.revision)
					w := newDescribeWriter(out)
					printPodTemplate(w, 0, rev.Template)
					return w.Flush()
				}
			}
			return fmt.Errorf("unable to find the specified revision")
		}
		fmt.Fprintln(out, ref)
		if len(hist) == 0 {
			fmt.Fprintln(out, "No rollout history found.")
			continue
		}
		tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "REVISION\tCHANGE-CAUSE")
		for _, rev := range hist {
			fmt.Fprintf(tw, "%d\t%s\n", rev.Number, table.OrNone(rev.ChangeCause))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(out)
	}
	return nil
}

// rolloutUndoCmd is `rollout undo KIND/NAME [--to-revision N]`.
type rolloutUndoCmd struct {
	root       *Root
	args       []string
	toRevision int64
}

func newRolloutUndoCmd(r *Root) *cobra.Command {
	c := &rolloutUndoCmd{root: r}
	cmd := &cobra.Command{
		Use:               "undo (deployment|daemonset|statefulset)/NAME [--to-revision=N]",
		Short:             "Roll back to a previous revision",
		ValidArgsFunction: r.completeResourceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.args = args
			return c.Run(cmd.Context())
		},
	}
	cmd.Flags().Int64Var(&c.toRevision, "to-revision", 0, "the revision to roll back to (0: the previous one)")
	return cmd
}

// Run copies the chosen revision's pod template back into each object;
// its controller then rolls it out as a new revision.
func (c *rolloutUndoCmd) Run(ctx context.Context) error {
	targets, err := rolloutTargets("rollout undo", c.args)
	if err != nil {
		return err
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	for _, tg := range targets {
		err := kubectl.Undo(ctx, cl, tg.kind, c.root.Namespace, tg.name, c.toRevision)
		ref := objectRef(tg.kind, tg.name)
		switch {
		case errors.Is(err, kubectl.ErrSkipped):
			fmt.Fprintf(c.root.Stdout, "%s %s\n", ref, err)
		case err != nil:
			return err
		default:
			fmt.Fprintf(c.root.Stdout, "%s rolled back\n", ref)
		}
	}
	return nil
}

// rolloutRestartCmd is `rollout restart KIND/NAME`.
type rolloutRestartCmd struct {
	root *Root
	args []string
}

func newRolloutRestartCmd(r *Root) *cobra.Command {
	c := &rolloutRestartCmd{root: r}
	return &cobra.Command{
		Use:               "restart (deployment|daemonset|statefulset)/NAME",
		Short:             "Restart every pod of a workload with a rolling update",
		ValidArgsFunction: r.completeResourceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.args = args
			return c.Run(cmd.Context())
		},
	}
}

// Run stamps each pod template with kubectl.kubernetes.io/restartedAt: a
// template change, so the controller rolls out new pods.
func (c *rolloutRestartCmd) Run(ctx context.Context) error {
	targets, err := rolloutTargets("rollout restart", c.args)
	if err != nil {
		return err
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	for _, tg := range targets {
		if err := kubectl.Restart(ctx, cl, tg.kind, c.root.Namespace, tg.name, c.root.Now()); err != nil {
			return err
		}
		fmt.Fprintf(c.root.Stdout, "%s restarted\n", objectRef(tg.kind, tg.name))
	}
	return nil
}
