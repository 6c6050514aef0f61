package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
)

// apiResourcesCmd is `skiff api-resources`: every kind the API serves.
type apiResourcesCmd struct {
	root       *Root
	namespaced string
	output     string
}

func newAPIResourcesCmd(r *Root) *cobra.Command {
	c := &apiResourcesCmd{root: r}
	cmd := &cobra.Command{
		Use:   "api-resources",
		Short: "List the kinds of objects skiff serves",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return c.Run(cmd.Context()) },
	}
	cmd.Flags().StringVar(&c.namespaced, "namespaced", "", "true: only namespaced kinds; false: only cluster-wide ones")
	cmd.Flags().StringVarP(&c.output, "output", "o", "", "output format: name|wide")
	return cmd
}

// Run prints NAME SHORTNAMES APIVERSION NAMESPACED KIND.
func (c *apiResourcesCmd) Run(ctx context.Context) error {
	kinds := make([]*api.Kind, 0, len(api.Kinds))
	for _, k := range api.Kinds {
		if k.Internal {
			continue
		}
		if c.namespaced != "" && fmt.Sprint(k.Namespaced) != c.namespaced {
			continue
		}
		kinds = append(kinds, k)
	}
	sort.SliceStable(kinds, func(i, j int) bool { return kinds[i].GroupResource() < kinds[j].GroupResource() })
	if c.output == "name" {
		for _, k := range kinds {
			fmt.Fprintln(c.root.Stdout, k.GroupResource())
		}
		return nil
	}
	w := newTabWriter(c.root.Stdout)
	fmt.Fprintln(w, "NAME\tSHORTNAMES\tAPIVERSION\tNAMESPACED\tKIND")
	for _, k := range kinds {
		fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%s\n", k.Resource, strings.Join(k.ShortNames, ","), k.APIVersion(), k.Namespaced, k.Kind)
	}
	return w.Flush()
}
