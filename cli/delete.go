package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// deleteCmd is `skiff delete`: by name, KIND/NAME, -f FILE or -l SELECTOR.
type deleteCmd struct {
	root           *Root
	args           []string
	files          []string
	recursive      bool
	selector       string
	all            bool
	gracePeriod    int64
	now            bool
	force          bool
	wait           bool
	timeout        time.Duration
	ignoreNotFound bool
}

func newDeleteCmd(r *Root) *cobra.Command {
	c := &deleteCmd{root: r}
	cmd := &cobra.Command{
		Use:   "delete (-f FILENAME | KIND NAME... | KIND/NAME... | KIND -l SELECTOR | KIND --all)",
		Short: "Delete resources by file, name or label selector",
		Example: `  skiff delete pod web
  skiff delete deploy/nginx-demo svc/nginx-demo
  skiff delete -f nginx-demo.yaml
  skiff delete pods -l app=gpu-inference
  skiff delete namespace gpu-demo`,
		ValidArgsFunction: r.completeResourceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.args = args
			return c.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&c.files, "filename", "f", nil, "file, directory or - for stdin, naming what to delete")
	f.BoolVarP(&c.recursive, "recursive", "R", false, "process directories recursively")
	f.StringVarP(&c.selector, "selector", "l", "", "delete what matches this label selector")
	f.BoolVar(&c.all, "all", false, "delete every object of the kind in the namespace")
	f.Int64Var(&c.gracePeriod, "grace-period", -1, "seconds a pod gets to stop (-1: its own default, 0: at once)")
	f.BoolVar(&c.now, "now", false, "stop at once (grace period 1)")
	f.BoolVar(&c.force, "force", false, "remove at once without waiting for the node (grace period 0)")
	f.BoolVar(&c.wait, "wait", true, "wait until the objects are gone")
	f.DurationVar(&c.timeout, "timeout", 0, "how long to wait for the objects to be gone (0: no limit)")
	f.BoolVar(&c.ignoreNotFound, "ignore-not-found", false, "treat a missing object as deleted")
	return cmd
}

// deleteTarget is one object to delete.
type deleteTarget struct {
	kind      *api.Kind
	namespace string
	name      string
}

// Run deletes every target, reporting each; missing objects are errors
// (unless --ignore-not-found) but do not stop the others.
func (c *deleteCmd) Run(ctx context.Context) error {
	if len(c.files) > 0 && len(c.args) > 0 {
		return errors.New("specify either -f or resource arguments, not both")
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	targets, failed, err := c.targets(ctx, cl)
	if err != nil {
		return err
	}
	opts := api.DeleteOptions{}
	switch {
	case c.force:
		opts.GracePeriodSeconds = ptr(int64(0))
	case c.now, c.gracePeriod == 0:
		// As kubectl: 0 without --force means "as fast as possible" (1 s),
		// so the node still stops the containers before the pod is gone.
		opts.GracePeriodSeconds = ptr(int64(1))
	case c.gracePeriod > 0:
		opts.GracePeriodSeconds = ptr(c.gracePeriod)
	}
	var deleted []deleteTarget
	for _, t := range targets {
		err := cl.Delete(ctx, t.kind, t.namespace, t.name, opts)
		if api.IsNotFound(err) && c.ignoreNotFound {
			continue
		}
		if err != nil {
			c.root.report(err)
			failed = true
			continue
		}
		fmt.Fprintf(c.root.Stdout, "%s %q deleted\n", kindPrefix(t.kind), t.name)
		deleted = append(deleted, t)
	}
	if c.wait && !c.force {
		wctx := ctx
		if c.timeout > 0 {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(ctx, c.timeout)
			defer cancel()
		}
		for _, t := range deleted {
			if err := waitGone(wctx, cl, t); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("timed out waiting for %s %q to be deleted: %w", kindPrefix(t.kind), t.name, err)
			}
		}
	}
	if failed {
		return errReported()
	}
	return nil
}

// targets resolves files, names or a selector into objects to delete.
func (c *deleteCmd) targets(ctx context.Context, cl client.Interface) ([]deleteTarget, bool, error) {
	var out []deleteTarget
	failed := false
	if len(c.files) > 0 {
		paths, err := expandFiles(c.files, c.recursive)
		if err != nil {
			return nil, false, err
		}
		manifests, err := readManifests(paths, c.root.Stdin)
		if err != nil {
			return nil, false, err
		}
		for _, m := range manifests {
			for _, d := range m.Docs {
				if d.Err == nil {
					d.Err = c.root.prepareObject(d.Kind, d.Object)
				}
				if d.Err != nil {
					fmt.Fprintf(c.root.Stderr, "error: %s: %s: %v\n", m.Source, describeDoc(d), d.Err)
					failed = true
					continue
				}
				meta := d.Object.GetObjectMeta()
				out = append(out, deleteTarget{kind: d.Kind, namespace: meta.Namespace, name: meta.Name})
			}
		}
		return out, failed, nil
	}
	refs, err := parseResourceArgs("delete", c.args)
	if err != nil {
		return nil, false, err
	}
	for _, ref := range refs {
		ns := c.root.namespaceFor(ref.Kind, false)
		if len(ref.Names) > 0 {
			if c.selector != "" || c.all {
				return nil, false, errors.New("name cannot be provided when a selector or --all is specified")
			}
			for _, n := range ref.Names {
				out = append(out, deleteTarget{kind: ref.Kind, namespace: ns, name: n})
			}
			continue
		}
		if c.selector == "" && !c.all {
			return nil, false, errors.New("resource(s) were provided, but no name was specified")
		}
		objs, _, err := cl.List(ctx, ref.Kind, ns, api.ListOptions{LabelSelector: c.selector})
		if err != nil {
			return nil, false, err
		}
		for _, o := range objs {
			out = append(out, deleteTarget{kind: ref.Kind, namespace: ns, name: o.GetObjectMeta().Name})
		}
	}
	if len(out) == 0 && !failed {
		if refs[0].Kind.Namespaced {
			fmt.Fprintf(c.root.Stderr, "No resources found in %s namespace.\n", c.root.Namespace)
		} else {
			fmt.Fprintln(c.root.Stderr, "No resources found")
		}
	}
	return out, failed, nil
}

// waitGone returns when the object is gone (or replaced by a new one of
// the same name), watching it rather than polling: skiff wait
// --for=delete (wait.go).
func waitGone(ctx context.Context, cl client.Interface, t deleteTarget) error {
	return waitOne(ctx, cl, t.kind, t.namespace, t.name, waitFor{deleted: true}, false)
}

func ptr[T any](v T) *T { return &v }
