package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/table"
	"skiff.dev/skiff/client"
)

// getCmd is `skiff get`: kubectl get.
type getCmd struct {
	root          *Root
	args          []string
	output        string
	allNamespaces bool
	selector      string
	fieldSelector string
	watch         bool
	watchOnly     bool
	showLabels    bool
	noHeaders     bool
}

func newGetCmd(r *Root) *cobra.Command {
	c := &getCmd{root: r}
	cmd := &cobra.Command{
		Use:   "get KIND[,KIND...] [NAME...] | KIND/NAME...",
		Short: "Display one or many resources",
		Example: `  skiff get pods -o wide
  skiff get configmap,deploy,pods,svc -n gpu-demo
  skiff get deploy/nginx-demo -o yaml
  skiff get nodes -o jsonpath='{.items[0].metadata.name}'
  skiff get pods -w`,
		ValidArgsFunction: r.completeResourceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.args = args
			return c.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&c.output, "output", "o", "", "output format: wide|yaml|json|name|jsonpath=TEMPLATE")
	f.BoolVarP(&c.allNamespaces, "all-namespaces", "A", false, "list across all namespaces")
	f.StringVarP(&c.selector, "selector", "l", "", "label selector, e.g. app=web,tier!=db")
	f.StringVar(&c.fieldSelector, "field-selector", "", "field selector, e.g. status.phase=Pending,spec.nodeName=n1")
	f.BoolVarP(&c.watch, "watch", "w", false, "after listing, watch for changes")
	f.BoolVar(&c.watchOnly, "watch-only", false, "watch for changes without listing first")
	f.BoolVar(&c.showLabels, "show-labels", false, "add a LABELS column")
	f.BoolVar(&c.noHeaders, "no-headers", false, "print tables without headers")
	return cmd
}

// kindResult is what get found of one kind.
type kindResult struct {
	kind *api.Kind
	objs []api.Object
	// rv is the list's resourceVersion (for -w).
	rv string
}

// Run lists or gets, then prints.
func (c *getCmd) Run(ctx context.Context) error {
	out, err := parseOutput(c.output)
	if err != nil {
		return err
	}
	refs, err := parseResourceArgs("get", c.args)
	if err != nil {
		return err
	}
	named := 0
	for _, ref := range refs {
		named += len(ref.Names)
	}
	if named > 0 && c.allNamespaces {
		return errors.New("a resource cannot be retrieved by name across all namespaces")
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	if c.watch || c.watchOnly {
		if len(refs) != 1 {
			return fmt.Errorf("watch is only supported on individual resources and resource collections, but %d resources were found", len(refs))
		}
		return c.watchKind(ctx, cl, refs[0], out)
	}
	var results []kindResult
	failed := false
	for _, ref := range refs {
		res, ok := c.fetch(ctx, cl, ref)
		failed = failed || !ok
		results = append(results, res)
	}
	if out.structured() || out.Format == "name" {
		var all []api.Object
		for _, r := range results {
			all = append(all, r.objs...)
		}
		if err := printStructured(c.root.Stdout, all, named == 1 && len(refs) == 1, out); err != nil {
			return err
		}
	} else {
		printed := 0
		for _, r := range results {
			if len(r.objs) == 0 {
				continue
			}
			if printed > 0 {
				fmt.Fprintln(c.root.Stdout)
			}
			printed++
			p := c.tablePrinter(ctx, cl, r.kind, out)
			if len(refs) > 1 {
				p.prefix = kindPrefix(r.kind) + "/"
			}
			for _, o := range r.objs {
				p.row(o)
			}
			if err := p.flush(); err != nil {
				return err
			}
		}
		if printed == 0 && named == 0 && !failed {
			c.noResources(refs)
		}
	}
	if failed {
		return errReported()
	}
	return nil
}

// noResources prints kubectl's "No resources found" to stderr.
func (c *getCmd) noResources(refs []resourceRef) {
	namespaced := false
	for _, r := range refs {
		namespaced = namespaced || r.Kind.Namespaced
	}
	if namespaced && !c.allNamespaces {
		fmt.Fprintf(c.root.Stderr, "No resources found in %s namespace.\n", c.root.Namespace)
		return
	}
	fmt.Fprintln(c.root.Stderr, "No resources found")
}

func (c *getCmd) tablePrinter(ctx context.Context, cl client.Interface, k *api.Kind, out outputFormat) *tablePrinter {
	p := newTablePrinter(c.root.Stdout, k, c.root.Now())
	if k == workloadKind {
		p.cells = c.workloadCells(ctx, cl) // get_kueue.go
	}
	p.wide = out.Format == "wide"
	p.withNamespace = c.allNamespaces && k.Namespaced
	p.showLabels = c.showLabels
	p.noHeaders = c.noHeaders
	return p
}

// fetch gets the named objects of ref, or lists them; it reports each
// failure and returns ok=false when any happened.
func (c *getCmd) fetch(ctx context.Context, cl client.Interface, ref resourceRef) (kindResult, bool) {
	res := kindResult{kind: ref.Kind}
	ns := c.root.namespaceFor(ref.Kind, c.allNamespaces)
	if len(ref.Names) > 0 {
		ok := true
		for _, name := range ref.Names {
			o, err := cl.Get(ctx, ref.Kind, ns, name)
			if err != nil {
				c.root.report(err)
				ok = false
				continue
			}
			res.objs = append(res.objs, o)
		}
		return res, ok
	}
	objs, rv, err := cl.List(ctx, ref.Kind, ns, api.ListOptions{LabelSelector: c.selector, FieldSelector: c.fieldSelector})
	if err != nil {
		c.root.report(err)
		return res, false
	}
	if ref.Kind.Kind == "Event" {
		sort.SliceStable(objs, func(i, j int) bool {
			return table.EventLastSeen(objs[i].(*api.Event)).Before(table.EventLastSeen(objs[j].(*api.Event)))
		})
	}
	res.objs, res.rv = objs, rv
	return res, true
}

// watchKind lists (unless --watch-only) then prints each change as it
// arrives, until ctx ends (Ctrl-C). A watch that the server closes is
// resumed from the last version seen; a 410 Gone relists.
func (c *getCmd) watchKind(ctx context.Context, cl client.Interface, ref resourceRef, out outputFormat) error {
	if len(ref.Names) > 1 {
		return errors.New("watch supports at most one name")
	}
	ns := c.root.namespaceFor(ref.Kind, c.allNamespaces)
	opts := api.ListOptions{LabelSelector: c.selector, FieldSelector: c.fieldSelector}
	if len(ref.Names) == 1 {
		sel := "metadata.name=" + ref.Names[0]
		if opts.FieldSelector != "" {
			sel += "," + opts.FieldSelector
		}
		opts.FieldSelector = sel
	}
	p := c.tablePrinter(ctx, cl, ref.Kind, out)
	print := func(o api.Object) error {
		if out.structured() || out.Format == "name" {
			return printStructured(c.root.Stdout, []api.Object{o}, true, out)
		}
		p.now = c.root.Now()
		p.row(o)
		return p.flush()
	}
	list := func(show bool) (string, error) {
		objs, rv, err := cl.List(ctx, ref.Kind, ns, opts)
		if err != nil {
			return "", err
		}
		if show {
			for _, o := range objs {
				if err := print(o); err != nil {
					return "", err
				}
			}
		}
		return rv, nil
	}
	rv, err := list(!c.watchOnly)
	if err != nil {
		return err
	}
	for {
		wopts := opts
		wopts.ResourceVersion = rv
		w, err := cl.Watch(ctx, ref.Kind, ns, wopts)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for ev := range w.Events() {
			if ev.Object == nil || ev.Type == api.Bookmark {
				if ev.Object != nil {
					rv = ev.Object.GetObjectMeta().ResourceVersion
				}
				continue
			}
			rv = ev.Object.GetObjectMeta().ResourceVersion
			if ref.Kind == workloadKind {
				p.cells = c.workloadCells(ctx, cl) // positions as of this event
			}
			if err := print(ev.Object); err != nil {
				w.Stop()
				return err
			}
		}
		werr := w.Err()
		w.Stop()
		switch {
		case ctx.Err() != nil:
			return nil
		case api.IsGone(werr):
			if rv, err = list(false); err != nil {
				return err
			}
		case werr != nil:
			return werr
		}
	}
}
