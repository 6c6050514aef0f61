package controlplane

import (
	"context"
	"log/slog"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/metrics"
)

// runScheduler runs the scheduler until ctx ends.
func runScheduler(ctx context.Context, c client.Interface, cfg Config, lg *slog.Logger, m *metrics.Metrics) error {
	<-ctx.Done()
	return nil
}
