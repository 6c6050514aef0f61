package controlplane

import (
	"context"
	"log/slog"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/metrics"
	"skiff.dev/skiff/controlplane/scheduler"
)

// runScheduler runs the scheduler until ctx ends.
func runScheduler(ctx context.Context, c client.Interface, cfg Config, lg *slog.Logger, _ *metrics.Metrics) error {
	scfg := scheduler.DefaultConfig()
	if cfg.SchedulerConfig != "" {
		var err error
		if scfg, err = scheduler.LoadConfig(cfg.SchedulerConfig); err != nil {
			return err
		}
	}
	s, err := scheduler.New(c, scfg, scheduler.Options{Logger: lg, GPUTopology: newAnnotationTopology()})
	if err != nil {
		return err
	}
	return s.Run(ctx)
}
