package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/client/kubectl"
)

// attachCmd is `skiff attach`: stream the output of a running container,
// as `kubectl attach` does, over the same protocols as exec. skiff runs
// containers without an open stdin, so -i gets the agent's note saying so
// and the output only.
type attachCmd struct {
	r         *Root
	container string
	stdin     bool
	tty       bool
}

func newAttachCmd(r *Root) *cobra.Command {
	a := &attachCmd{r: r}
	cmd := &cobra.Command{
		Use:   "attach (POD | TYPE/NAME) [-c CONTAINER]",
		Short: "Attach to a running container",
		Long: `Stream the output of a running container of a pod from now on, until it ends
or you interrupt. TYPE/NAME (deployment/web) picks the first pod of its
selector. skiff keeps no container's stdin open: with -i the agent says so and
streams the output only.`,
		Example: `  skiff attach web-7c5ddbdf54-x2x8k
  skiff attach deployment/web -c sidecar`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.Run(cmd.Context(), args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&a.container, "container", "c", "", "container name (default: the first)")
	fl.BoolVarP(&a.stdin, "stdin", "i", false, "pass standard input to the container (not available in skiff: see above)")
	fl.BoolVarP(&a.tty, "tty", "t", false, "stdin is a terminal")
	return cmd
}

// Run streams the container's output until it ends or ctx does.
func (a *attachCmd) Run(ctx context.Context, target string) error {
	c, err := a.r.Client()
	if err != nil {
		return err
	}
	pod, err := resolvePod(ctx, c, a.r.Namespace, target)
	if err != nil {
		return err
	}
	name := a.container
	if name == "" {
		name = defaultContainer(pod, a.r.Stderr)
	}
	if _, err := a.r.stream(ctx, pod, "attach", kubectl.ExecOptions{Container: name}, a.stdin, a.tty); err != nil {
		if ctx.Err() != nil {
			return nil // interrupted: kubectl ends quietly too
		}
		return fmt.Errorf("attach to %s: %w", pod.Name, err)
	}
	return nil
}
