package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/simnodes"
)

// StartSimNodes registers cfg.Count simulated nodes
// (controlplane/simnodes) through c and runs them until ctx ends or Stop
// is called.
func StartSimNodes(ctx context.Context, cfg simnodes.Config, c client.Interface) (*simnodes.Sim, error) {
	sim, err := simnodes.New(cfg, c)
	if err != nil {
		return nil, err
	}
	if err := sim.Start(ctx); err != nil {
		sim.Stop()
		return nil, err
	}
	return sim, nil
}

// startSim is StartSimNodes for `up` and `server`, which say what started.
func startSim(ctx context.Context, cfg simnodes.Config, c client.Interface, out io.Writer, lg *slog.Logger) (stop func(), err error) {
	if cfg.Count == 0 {
		return func() {}, nil
	}
	cfg.Log = lg
	start := time.Now()
	sim, err := StartSimNodes(ctx, cfg, c)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "%d simulated nodes (%s%05d..) are Ready after %d ms: %s cpu, %s memory, %d x %s each\n",
		cfg.Count, cfg.NamePrefix, 1, time.Since(start).Milliseconds(), cfg.CPU, cfg.Memory, cfg.GPUs, cfg.GPUProduct)
	return sim.Stop, nil
}
