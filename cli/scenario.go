package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/scenario"
)

// scenarioCmd is `skiff scenario run FILE [--config [NAME=]FILE]...`: the
// logic is package scenario's; this parses and prints.
type scenarioCmd struct {
	root    *Root
	configs []string
	explain bool
	timeout time.Duration
}

func newScenarioCmd(r *Root) *cobra.Command {
	c := &scenarioCmd{root: r}
	cmd := &cobra.Command{
		Use:   "scenario",
		Short: "Run scheduling scenarios on simulated clusters",
	}
	run := &cobra.Command{
		Use:   "run FILE",
		Short: "Run a scenario and check its expectations",
		Long: `Run a scenario (kind: Scenario, skiff.dev/v1alpha1) on a cluster of
simulated nodes started in this process: apply its steps one by one, wait
for each to settle, print every placement with the scheduler's reasons per
node, GPU use and fragmentation, and check the expectations. Exits non-zero
naming each unmet expectation.

With --config (repeatable) the scenario runs under each
KubeSchedulerConfiguration given, side by side; NAME=FILE names it for the
expectations meant for NAME (a bare FILE is named after its base name).
Without, it runs under the scenario's own configs.`,
		Example: `  skiff scenario run examples/homework/task3/scenario.yaml
  skiff scenario run examples/homework/task3/scenario.yaml --config binpack=students/alice.yaml
  skiff scenario run scenario.yaml --config default=a.yaml --config binpack=b.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return c.Run(cmd.Context(), args[0]) },
	}
	run.Flags().StringArrayVar(&c.configs, "config", nil, "a scheduler configuration (KubeSchedulerConfiguration) to run under, as [NAME=]FILE; repeat to compare")
	run.Flags().BoolVar(&c.explain, "explain", false, "print the scheduler's full tables (describe pod's) for each new placement")
	run.Flags().DurationVar(&c.timeout, "step-timeout", scenario.DefaultStepTimeout, "how long a step may take to settle")
	cmd.AddCommand(run)
	return cmd
}

// Run loads the scenario and the configurations, runs, and prints the
// report; unmet expectations are listed on stderr and exit 1.
func (c *scenarioCmd) Run(ctx context.Context, path string) error {
	f, err := scenario.Load(path)
	if err != nil {
		return err
	}
	opts := scenario.Options{StepTimeout: c.timeout}
	if c.timeout <= 0 {
		return fmt.Errorf("--step-timeout %v: want a positive duration", c.timeout)
	}
	seen := map[string]bool{}
	for _, v := range c.configs {
		cfg, err := scenario.ParseConfigFlag(v)
		if err != nil {
			return err
		}
		if seen[cfg.Name] {
			return fmt.Errorf("--config %q: a configuration named %q is given twice (write NAME=FILE)", v, cfg.Name)
		}
		seen[cfg.Name] = true
		opts.Configs = append(opts.Configs, cfg)
	}
	results, err := scenario.Run(ctx, f, opts)
	scenario.WriteReport(c.root.Stdout, f, results, c.explain)
	var unmet *scenario.Unmet
	if errors.As(err, &unmet) {
		fmt.Fprintln(c.root.Stderr, unmet.Error())
		return errReported()
	}
	return err
}
