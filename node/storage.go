package node

import (
	"context"
	"log/slog"
	"path/filepath"

	"skiff.dev/skiff/agent/localpath"
	"skiff.dev/skiff/client"
)

// StorageDir is where a node's local-path volumes live, under its data dir.
func StorageDir(dataDir string) string { return filepath.Join(dataDir, "storage") }

// startProvisioner runs the node's local-path provisioner until ctx ends;
// the returned func waits for it to stop.
func startProvisioner(ctx context.Context, c client.Interface, cfg Config, lg *slog.Logger) (wait func()) {
	dir, err := filepath.Abs(StorageDir(cfg.DataDir))
	if err != nil {
		lg.Warn("no local-path provisioner", "node", cfg.Name, "err", err)
		return func() {}
	}
	p := localpath.New(c, localpath.Config{NodeName: cfg.Name, Dir: dir, Log: lg}, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.Run(ctx); err != nil && ctx.Err() == nil {
			lg.Warn("local-path provisioner stopped", "node", cfg.Name, "err", err)
		}
	}()
	return func() { <-done }
}
