package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
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
		Short: "Manage the rollout of a deployment",
		Long: `Manage the rollout of a deployment. A deployment keeps one ReplicaSet per
pod template; each carries a revision number (annotation
deployment.kubernetes.io/revision), which is the rollout history.`,
	}
	cmd.AddCommand(newRolloutStatusCmd(r), newRolloutHistoryCmd(r), newRolloutUndoCmd(r), newRolloutRestartCmd(r))
	return cmd
}

// deploymentNames reads `deployment/NAME...` or `deployment NAME...`.
func deploymentNames(verb string, args []string) ([]string, error) {
	refs, err := parseResourceArgs(verb, args)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, ref := range refs {
		if ref.Kind.Kind != "Deployment" {
			return nil, fmt.Errorf("no %s for %s: only deployments are supported", verb, ref.Kind.Resource)
		}
		if len(ref.Names) == 0 {
			return nil, errors.New("resource(s) were provided, but no name was specified")
		}
		names = append(names, ref.Names...)
	}
	return names, nil
}

func deploymentKind() *api.Kind { return api.MustKindOf(&api.Deployment{}) }

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

// sameTemplate compares pod templates after defaulting both, so a
// template as written and one as stored compare equal.
func sameTemplate(a, b api.PodTemplateSpec) bool {
	wrap := func(t api.PodTemplateSpec) api.Object {
		rs := &api.ReplicaSet{Spec: api.ReplicaSetSpec{Replicas: ptr(int32(1)), Template: t}}
		rs = api.Clone(rs)
		api.SetDefaults(rs)
		return rs
	}
	same, err := kubectl.SameObject(wrap(a), wrap(b))
	return err == nil && same
}

// updateDeployment reads the deployment, applies change and writes it,
// again on a conflict.
func updateDeployment(ctx context.Context, cl client.Interface, ns, name string, change func(*api.Deployment) error) error {
	for attempt := 0; ; attempt++ {
		d, err := client.Get[*api.Deployment](ctx, cl, ns, name)
		if err != nil {
			return err
		}
		d = api.Clone(d)
		if err := change(d); err != nil {
			return err
		}
		_, err = cl.Update(ctx, d)
		if api.IsConflict(err) && attempt < 5 {
			continue
		}
		return err
	}
}

// rolloutStatusCmd is `rollout status deployment/NAME`.
type rolloutStatusCmd struct {
	root    *Root
	args    []string
	watch   bool
	timeout time.Duration
}

func newRolloutStatusCmd(r *Root) *cobra.Command {
	c := &rolloutStatusCmd{root: r}
	cmd := &cobra.Command{
		Use:               "status deployment/NAME",
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

// Run prints kubectl's progress messages until the deployment is rolled out.
func (c *rolloutStatusCmd) Run(ctx context.Context) error {
	names, err := deploymentNames("rollout status", c.args)
	if err != nil {
		return err
	}
	if len(names) != 1 {
		return errors.New("rollout status takes exactly one deployment")
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
	ns, name := c.root.Namespace, names[0]
	last := ""
	// show prints a new message and reports whether the rollout is done.
	show := func(d *api.Deployment) (bool, error) {
		msg, done, err := deploymentRolloutStatus(d)
		if err != nil {
			return false, err
		}
		if msg != last {
			fmt.Fprintln(c.root.Stdout, msg)
			last = msg
		}
		return done, nil
	}
	for {
		d, err := client.Get[*api.Deployment](ctx, cl, ns, name)
		if err != nil {
			return c.timedOut(ctx, err)
		}
		if done, err := show(d); done || err != nil || !c.watch {
			return err
		}
		w, err := cl.Watch(ctx, deploymentKind(), ns, api.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: d.ResourceVersion})
		if err != nil {
			return c.timedOut(ctx, err)
		}
		for ev := range w.Events() {
			if ev.Type == api.Deleted {
				w.Stop()
				return fmt.Errorf("deployment %q was deleted", name)
			}
			d, ok := ev.Object.(*api.Deployment)
			if !ok {
				continue
			}
			if done, err := show(d); done || err != nil {
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

// deploymentRolloutStatus is kubectl's DeploymentStatusViewer: a message,
// and whether the rollout is complete.
func deploymentRolloutStatus(d *api.Deployment) (string, bool, error) {
	if d.Generation > d.Status.ObservedGeneration {
		return "Waiting for deployment spec update to be observed...", false, nil
	}
	for _, c := range d.Status.Conditions {
		if c.Type == "Progressing" && c.Reason == "ProgressDeadlineExceeded" {
			return "", false, fmt.Errorf("deployment %q exceeded its progress deadline", d.Name)
		}
	}
	want := table.Replicas(d.Spec.Replicas)
	st := d.Status
	switch {
	case st.UpdatedReplicas < want:
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d out of %d new replicas have been updated...", d.Name, st.UpdatedReplicas, want), false, nil
	case st.Replicas > st.UpdatedReplicas:
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d old replicas are pending termination...", d.Name, st.Replicas-st.UpdatedReplicas), false, nil
	case st.AvailableReplicas < st.UpdatedReplicas:
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d of %d updated replicas are available...", d.Name, st.AvailableReplicas, st.UpdatedReplicas), false, nil
	}
	return fmt.Sprintf("deployment %q successfully rolled out", d.Name), true, nil
}

// rolloutHistoryCmd is `rollout history deployment/NAME [--revision N]`.
type rolloutHistoryCmd struct {
	root     *Root
	args     []string
	revision int64
}

func newRolloutHistoryCmd(r *Root) *cobra.Command {
	c := &rolloutHistoryCmd{root: r}
	cmd := &cobra.Command{
		Use:               "history deployment/NAME",
		Short:             "Show the revisions of a deployment",
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
	names, err := deploymentNames("rollout history", c.args)
	if err != nil {
		return err
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	out := c.root.Stdout
	for _, name := range names {
		d, err := client.Get[*api.Deployment](ctx, cl, c.root.Namespace, name)
		if err != nil {
			return err
		}
		rss, err := replicaSetsOf(ctx, cl, d)
		if err != nil {
			return err
		}
		ref := objectRef(deploymentKind(), name)
		if c.revision > 0 {
			for _, rs := range rss {
				if revisionOf(rs) == c.revision {
					fmt.Fprintf(out, "%s with revision #%d\n", ref, c.revision)
					w := newDescribeWriter(out)
					printPodTemplate(w, 0, templateWithoutHash(rs.Spec.Template))
					return w.Flush()
				}
			}
			return fmt.Errorf("unable to find the specified revision")
		}
		fmt.Fprintln(out, ref)
		if len(rss) == 0 {
			fmt.Fprintln(out, "No rollout history found.")
			continue
		}
		tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "REVISION\tCHANGE-CAUSE")
		for _, rs := range rss {
			fmt.Fprintf(tw, "%d\t%s\n", revisionOf(rs), table.OrNone(rs.Annotations[api.AnnotationChangeCause]))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(out)
	}
	return nil
}

// rolloutUndoCmd is `rollout undo deployment/NAME [--to-revision N]`.
type rolloutUndoCmd struct {
	root       *Root
	args       []string
	toRevision int64
}

func newRolloutUndoCmd(r *Root) *cobra.Command {
	c := &rolloutUndoCmd{root: r}
	cmd := &cobra.Command{
		Use:               "undo deployment/NAME [--to-revision=N]",
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

// Run copies the chosen revision's pod template back into the deployment;
// the deployment controller then rolls it out as a new revision.
func (c *rolloutUndoCmd) Run(ctx context.Context) error {
	names, err := deploymentNames("rollout undo", c.args)
	if err != nil {
		return err
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	for _, name := range names {
		skipped := ""
		err := updateDeployment(ctx, cl, c.root.Namespace, name, func(d *api.Deployment) error {
			if d.Spec.Paused {
				return fmt.Errorf("you cannot rollback a paused deployment; resume it first with 'skiff rollout resume' and try again")
			}
			rss, err := replicaSetsOf(ctx, cl, d)
			if err != nil {
				return err
			}
			to := c.toRevision
			if to == 0 {
				if len(rss) < 2 {
					return fmt.Errorf("no rollout history found for deployment %q", name)
				}
				to = revisionOf(rss[len(rss)-2])
			}
			for _, rs := range rss {
				if revisionOf(rs) != to {
					continue
				}
				t := templateWithoutHash(rs.Spec.Template)
				if sameTemplate(t, d.Spec.Template) {
					skipped = fmt.Sprintf("skipped rollback (current template already matches revision %d)", to)
					return errSkip
				}
				d.Spec.Template = t
				return nil
			}
			return fmt.Errorf("unable to find specified revision %d in history", to)
		})
		ref := objectRef(deploymentKind(), name)
		switch {
		case errors.Is(err, errSkip):
			fmt.Fprintf(c.root.Stdout, "%s %s\n", ref, skipped)
		case err != nil:
			return err
		default:
			fmt.Fprintf(c.root.Stdout, "%s rolled back\n", ref)
		}
	}
	return nil
}

var errSkip = errors.New("skip")

// rolloutRestartCmd is `rollout restart deployment/NAME`.
type rolloutRestartCmd struct {
	root *Root
	args []string
}

func newRolloutRestartCmd(r *Root) *cobra.Command {
	c := &rolloutRestartCmd{root: r}
	return &cobra.Command{
		Use:               "restart deployment/NAME",
		Short:             "Restart every pod of a deployment with a rolling update",
		ValidArgsFunction: r.completeResourceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.args = args
			return c.Run(cmd.Context())
		},
	}
}

// Run stamps the pod template with kubectl.kubernetes.io/restartedAt: a
// template change, so the controller rolls out new pods.
func (c *rolloutRestartCmd) Run(ctx context.Context) error {
	names, err := deploymentNames("rollout restart", c.args)
	if err != nil {
		return err
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	now := c.root.Now().Format(time.RFC3339)
	for _, name := range names {
		err := updateDeployment(ctx, cl, c.root.Namespace, name, func(d *api.Deployment) error {
			if d.Spec.Paused {
				return fmt.Errorf("deployments.apps %q can't restart paused deployment (run rollout resume first)", name)
			}
			if d.Spec.Template.Annotations == nil {
				d.Spec.Template.Annotations = map[string]string{}
			}
			d.Spec.Template.Annotations[api.AnnotationRestartedAt] = now
			return nil
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(c.root.Stdout, "%s restarted\n", objectRef(deploymentKind(), name))
	}
	return nil
}
