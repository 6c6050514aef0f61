package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

// scaleCmd is `skiff scale deployment/NAME --replicas=N`, through the
// scale subresource (as kubectl), so only the replica count changes.
type scaleCmd struct {
	root            *Root
	args            []string
	replicas        int32
	currentReplicas int32
}

func newScaleCmd(r *Root) *cobra.Command {
	c := &scaleCmd{root: r}
	cmd := &cobra.Command{
		Use:   "scale (deployment/NAME | deploy NAME | rs NAME) --replicas=N",
		Short: "Set a new size for a deployment or replica set",
		Example: `  skiff scale deployment/nginx-demo --replicas=2
  skiff scale deploy gpu-inference --replicas=3`,
		ValidArgsFunction: r.completeResourceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.args = args
			return c.Run(cmd.Context())
		},
	}
	cmd.Flags().Int32Var(&c.replicas, "replicas", -1, "the new number of replicas (required)")
	cmd.Flags().Int32Var(&c.currentReplicas, "current-replicas", -1, "only scale when the current size is this")
	return cmd
}

// Run scales every named object.
func (c *scaleCmd) Run(ctx context.Context) error {
	if c.replicas < 0 {
		return fmt.Errorf("the --replicas=COUNT flag is required, and COUNT must be 0 or more")
	}
	refs, err := parseResourceArgs("scale", c.args)
	if err != nil {
		return err
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	failed := false
	for _, ref := range refs {
		if !ref.Kind.HasScale {
			return fmt.Errorf("cannot scale %s: only deployments, replicasets and statefulsets have a scale subresource", ref.Kind.Resource)
		}
		if len(ref.Names) == 0 {
			return fmt.Errorf("resource(s) were provided, but no name was specified")
		}
		ns := c.root.namespaceFor(ref.Kind, false)
		for _, name := range ref.Names {
			s, err := cl.GetScale(ctx, ref.Kind, ns, name)
			if err == nil && c.currentReplicas >= 0 && s.Spec.Replicas != c.currentReplicas {
				err = fmt.Errorf("expected replicas to be %d, was %d", c.currentReplicas, s.Spec.Replicas)
			}
			if err == nil {
				// As kubectl: no resourceVersion precondition unless
				// --current-replicas asked for one, so a status write by the
				// controller in between is not a conflict.
				if c.currentReplicas < 0 {
					s.ResourceVersion = ""
				}
				s.Spec.Replicas = c.replicas
				_, err = cl.UpdateScale(ctx, ref.Kind, ns, name, s)
			}
			if err != nil {
				c.root.report(err)
				failed = true
				continue
			}
			fmt.Fprintf(c.root.Stdout, "%s scaled\n", objectRef(ref.Kind, name))
		}
	}
	if failed {
		return errReported()
	}
	return nil
}
