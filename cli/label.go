package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/kubectl"
)

// labelCmd is `skiff label TYPE NAME... k=v... k-... [--overwrite]`, as
// kubectl label: set and remove labels of any kind of object. Changing a
// label that already has a different value needs --overwrite.
type labelCmd struct {
	root      *Root
	overwrite bool
}

func newLabelCmd(r *Root) *cobra.Command {
	c := &labelCmd{root: r}
	cmd := &cobra.Command{
		Use:   "label (TYPE NAME... | TYPE/NAME...) KEY=VALUE... KEY-... [--overwrite]",
		Short: "Update the labels on a resource",
		Example: `  skiff label nodes gpu-1 accelerator=a100
  skiff label pod/web tier=frontend --overwrite
  skiff label nodes gpu-1 accelerator-`,
		Args:              cobra.MinimumNArgs(2),
		ValidArgsFunction: r.completeResourceArgs,
		RunE:              func(cmd *cobra.Command, args []string) error { return c.Run(cmd.Context(), args) },
	}
	cmd.Flags().BoolVar(&c.overwrite, "overwrite", false, "allow labels to be overwritten")
	return cmd
}

// isLabelArg: "k=v" or "k-" (object names never end in "-").
func isLabelArg(a string) bool { return strings.Contains(a, "=") || strings.HasSuffix(a, "-") }

// parseLabels reads the label arguments into sets and removals.
func parseLabels(args []string) (set map[string]string, remove []string, err error) {
	set = map[string]string{}
	var errs []error
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok {
			for _, msg := range validation.IsQualifiedName(k) {
				errs = append(errs, fmt.Errorf("invalid label spec: %s: %s", a, msg))
			}
			for _, msg := range validation.IsValidLabelValue(v) {
				errs = append(errs, fmt.Errorf("invalid label spec: %s: %s", a, msg))
			}
			set[k] = v
			continue
		}
		remove = append(remove, strings.TrimSuffix(a, "-"))
	}
	for _, k := range remove {
		if _, ok := set[k]; ok {
			errs = append(errs, fmt.Errorf("can not both modify and remove a label in the same command"))
		}
	}
	return set, remove, errors.Join(errs...)
}

// Run labels every named object, reporting each failure.
func (c *labelCmd) Run(ctx context.Context, args []string) error {
	split := len(args)
	for i, a := range args {
		if isLabelArg(a) {
			split = i
			break
		}
	}
	if split == len(args) {
		return fmt.Errorf("at least one label update is required")
	}
	set, remove, err := parseLabels(args[split:])
	if err != nil {
		return err
	}
	refs, err := parseResourceArgs("label", args[:split])
	if err != nil {
		return err
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	failed := false
	for _, ref := range refs {
		if len(ref.Names) == 0 {
			return fmt.Errorf("resource(s) were provided, but no name was specified")
		}
		ns := c.root.namespaceFor(ref.Kind, false)
		for _, name := range ref.Names {
			var missing []string
			changed, err := kubectl.Update(ctx, cl, ref.Kind, ns, name, func(o api.Object) (bool, error) {
				missing = nil
				m := o.GetObjectMeta()
				changed := false
				for _, k := range sortedLabelKeys(set) {
					old, has := m.Labels[k]
					if has && old == set[k] {
						continue
					}
					if has && !c.overwrite {
						return false, fmt.Errorf("'%s' already has a value (%s), and --overwrite is false", k, old)
					}
					if m.Labels == nil {
						m.Labels = map[string]string{}
					}
					m.Labels[k] = set[k]
					changed = true
				}
				for _, k := range remove {
					if _, has := m.Labels[k]; !has {
						missing = append(missing, k)
						continue
					}
					delete(m.Labels, k)
					changed = true
				}
				return changed, nil
			})
			for _, k := range missing {
				fmt.Fprintf(c.root.Stderr, "label %q not found.\n", k)
			}
			if err != nil {
				c.root.report(err)
				failed = true
				continue
			}
			verb := "labeled"
			switch {
			case !changed:
				verb = "not labeled"
			case len(set) == 0:
				verb = "unlabeled"
			}
			fmt.Fprintf(c.root.Stdout, "%s %s\n", objectRef(ref.Kind, name), verb)
		}
	}
	if failed {
		return errReported()
	}
	return nil
}

func sortedLabelKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
