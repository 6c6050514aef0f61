package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
)

// explainCmd is `skiff explain KIND[.FIELD...]`: the documentation of a
// kind or field, taken from the Go types' own doc comments.
type explainCmd struct {
	root *Root
	path string
}

func newExplainCmd(r *Root) *cobra.Command {
	c := &explainCmd{root: r}
	return &cobra.Command{
		Use:   "explain KIND[.FIELD...]",
		Short: "Document a kind and its fields",
		Example: `  skiff explain pods
  skiff explain deployment.spec.strategy
  skiff explain pod.spec.containers.resources`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return api.ResourceNames(), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c.path = args[0]
			return c.Run(cmd.Context())
		},
	}
}

// Run prints api.Explain's text.
func (c *explainCmd) Run(ctx context.Context) error {
	text, err := api.Explain(c.path)
	if err != nil {
		return err
	}
	fmt.Fprint(c.root.Stdout, text)
	if !strings.HasSuffix(text, "\n") {
		fmt.Fprintln(c.root.Stdout)
	}
	return nil
}
