package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
)

// autoscaleCmd is `skiff autoscale deployment/NAME --min=1 --max=10
// --cpu-percent=50`, kubectl autoscale's: it creates a
// HorizontalPodAutoscaler of the workload (named after it unless --name).
type autoscaleCmd struct {
	root       *Root
	min, max   int32
	cpuPercent int32
	name       string
}

func newAutoscaleCmd(r *Root) *cobra.Command {
	c := &autoscaleCmd{root: r}
	cmd := &cobra.Command{
		Use:   "autoscale (TYPE NAME | TYPE/NAME) [--min=MINPODS] --max=MAXPODS [--cpu-percent=CPU]",
		Short: "Auto-scale a deployment, replica set or stateful set",
		Example: `  skiff autoscale deployment php-apache --cpu-percent=50 --min=1 --max=10
  skiff autoscale deploy/gpu-inference --max=4   # cpu at 80%; GPU metrics need a manifest (docs/labs.md)`,
		ValidArgsFunction: r.completeResourceArgs,
		RunE:              func(cmd *cobra.Command, args []string) error { return c.Run(cmd.Context(), args) },
	}
	cmd.Flags().Int32Var(&c.min, "min", -1, "The lower limit for the number of pods that can be set by the autoscaler. If it's not specified or negative, the server will apply a default value.")
	cmd.Flags().Int32Var(&c.max, "max", -1, "The upper limit for the number of pods that can be set by the autoscaler. Required.")
	cmd.Flags().Int32Var(&c.cpuPercent, "cpu-percent", -1, "The target average CPU utilization (represented as a percent of requested CPU) over all the pods. If it's not specified or negative, a default autoscaling policy will be used.")
	cmd.Flags().StringVar(&c.name, "name", "", "The name for the newly created object. If not specified, the name of the input resource will be used.")
	return cmd
}

// HPAFor is the autoscaler kubectl autoscale makes: the target by kind
// and name, the bounds, and a cpu Utilization target when cpuPercent > 0
// (else the server's default, cpu at 80%).
func HPAFor(k *api.Kind, target, name, namespace string, minR, maxR, cpuPercent int32) *api.HorizontalPodAutoscaler {
	if name == "" {
		name = target
	}
	h := &api.HorizontalPodAutoscaler{
		TypeMeta:   api.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: namespace},
		Spec: api.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: api.CrossVersionObjectReference{APIVersion: k.APIVersion(), Kind: k.Kind, Name: target},
			MaxReplicas:    maxR,
		},
	}
	if minR > 0 {
		h.Spec.MinReplicas = &minR
	}
	if cpuPercent > 0 {
		h.Spec.Metrics = []api.MetricSpec{{Type: api.ResourceMetricSourceType, Resource: &api.ResourceMetricSource{
			Name: "cpu", Target: api.MetricTarget{Type: api.UtilizationMetricType, AverageUtilization: &cpuPercent}}}}
	}
	return h
}

// Run creates one autoscaler per named workload.
func (c *autoscaleCmd) Run(ctx context.Context, args []string) error {
	if c.max < 1 {
		return fmt.Errorf("--max=MAXPODS is required and must be at least 1, max: %d", c.max)
	}
	if c.max < c.min {
		return fmt.Errorf("--max=MAXPODS must be larger or equal to --min=MINPODS, max: %d, min: %d", c.max, c.min)
	}
	refs, err := parseResourceArgs("autoscale", args)
	if err != nil {
		return err
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	for _, ref := range refs {
		if !ref.Kind.HasScale {
			return fmt.Errorf("cannot autoscale a %s: only deployments, replicasets and statefulsets have a scale subresource", ref.Kind.Kind)
		}
		if len(ref.Names) == 0 {
			return fmt.Errorf("resource(s) were provided, but no name was specified")
		}
		ns := c.root.namespaceFor(ref.Kind, false)
		for _, name := range ref.Names {
			if _, err := cl.Get(ctx, ref.Kind, ns, name); err != nil {
				return err
			}
			h := HPAFor(ref.Kind, name, c.name, ns, c.min, c.max, c.cpuPercent)
			if _, err := cl.Create(ctx, h); err != nil {
				return err
			}
			fmt.Fprintf(c.root.Stdout, "%s autoscaled\n", objectRef(api.MustKindOf(h), h.Name))
		}
	}
	return nil
}
