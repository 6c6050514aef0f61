package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
)

// completionCmd prints a shell completion script.
type completionCmd struct {
	root  *Root
	shell string
}

func newCompletionCmd(r *Root) *cobra.Command {
	c := &completionCmd{root: r}
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print a shell completion script",
		Long: `Print a shell completion script, as kubectl completion.

  source <(skiff completion bash)`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		RunE: func(cmd *cobra.Command, args []string) error {
			c.shell = args[0]
			return c.Run(cmd.Context())
		},
	}
}

// Run writes the script for c.shell.
func (c *completionCmd) Run(ctx context.Context) error {
	root, out := c.root.cmd, c.root.Stdout
	switch c.shell {
	case "bash":
		return root.GenBashCompletionV2(out, true)
	case "zsh":
		return root.GenZshCompletion(out)
	case "fish":
		return root.GenFishCompletion(out, true)
	case "powershell":
		return root.GenPowerShellCompletionWithDesc(out)
	}
	return fmt.Errorf("unsupported shell %q: use bash, zsh, fish or powershell", c.shell)
}

// completeNames completes object names of one resource.
func (r *Root) completeNames(resource string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		k, err := api.LookupResource(resource)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return r.listNames(cmd.Context(), k, prefix), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeResourceArgs completes `KIND [NAME...]` and `KIND/NAME`.
func (r *Root) completeResourceArgs(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		if i := strings.Index(prefix, "/"); i >= 0 {
			k, err := api.LookupResource(prefix[:i])
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []string
			for _, n := range r.listNames(cmd.Context(), k, prefix[i+1:]) {
				out = append(out, prefix[:i+1]+n)
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		}
		return api.ResourceNames(), cobra.ShellCompDirectiveNoFileComp
	}
	if strings.Contains(args[0], ",") || strings.Contains(args[0], "/") {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	k, err := api.LookupResource(args[0])
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return r.listNames(cmd.Context(), k, prefix), cobra.ShellCompDirectiveNoFileComp
}

func (r *Root) listNames(ctx context.Context, k *api.Kind, prefix string) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := r.Client()
	if err != nil {
		return nil
	}
	ns := ""
	if k.Namespaced {
		ns = r.Namespace
	}
	objs, _, err := c.List(ctx, k, ns, api.ListOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, o := range objs {
		if n := o.GetObjectMeta().Name; strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}
