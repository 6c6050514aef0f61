package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/simnodes"
)

// simFlags are `up`'s and `server`'s --sim-node* flags: simulated nodes in
// the control plane's process (controlplane/simnodes).
type simFlags struct {
	count   int
	cpu     string
	memory  string
	gpus    int
	product string
}

func (f *simFlags) register(cmd *cobra.Command) {
	def := simnodes.DefaultConfig()
	fl := cmd.Flags()
	fl.IntVar(&f.count, "sim-nodes", 0, "also run N simulated nodes in this process (Ready, capacity below, pods marked Running without containers)")
	fl.StringVar(&f.cpu, "sim-node-cpu", def.CPU, "cpu capacity of each simulated node")
	fl.StringVar(&f.memory, "sim-node-memory", def.Memory, "memory capacity of each simulated node")
	fl.IntVar(&f.gpus, "sim-node-gpus", def.GPUs, "nvidia.com/gpu capacity of each simulated node")
	fl.StringVar(&f.product, "sim-gpu-product", def.GPUProduct, "nvidia.com/gpu.product label of the simulated nodes")
}

// start registers the simulated nodes and runs them until ctx ends; nil
// and no-op stop when --sim-nodes is 0.
func (f *simFlags) start(ctx context.Context, c client.Interface, out io.Writer, lg *slog.Logger) (stop func(), err error) {
	if f.count == 0 {
		return func() {}, nil
	}
	cfg := simnodes.DefaultConfig()
	cfg.Count, cfg.CPU, cfg.Memory, cfg.GPUs, cfg.GPUProduct, cfg.Log = f.count, f.cpu, f.memory, f.gpus, f.product, lg
	sim, err := simnodes.New(cfg, c)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := sim.Start(ctx); err != nil {
		sim.Stop()
		return nil, err
	}
	fmt.Fprintf(out, "%d simulated nodes (%s%05d..) are Ready after %d ms: %s cpu, %s memory, %d x %s each\n",
		f.count, cfg.NamePrefix, 1, time.Since(start).Milliseconds(), f.cpu, f.memory, f.gpus, f.product)
	return sim.Stop, nil
}
