package fake

import (
	"context"
	"fmt"

	"skiff.dev/skiff/runtime"
)

var _ runtime.StatsProvider = (*Runtime)(nil)

// ContainerStats implements runtime.StatsProvider. Simulated containers
// have no processes and use nothing: their figures are zeros unless a test
// set them with SetStats, so `kubectl top` on a simulated node shows 0m
// and 0Mi, honestly.
func (r *Runtime) ContainerStats(ctx context.Context, id string) (runtime.ContainerStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.get(id)
	if err != nil {
		return runtime.ContainerStats{}, fmt.Errorf("container stats: %w", err)
	}
	if c.status.State != runtime.StateRunning {
		return runtime.ContainerStats{}, fmt.Errorf("container stats %s: %w", id, runtime.ErrNotRunning)
	}
	st := c.stats
	st.Time = r.cfg.Now()
	return st, nil
}

// SetStats sets the figures ContainerStats reports for container id
// (Time is filled in when read), for tests of what reads them.
func (r *Runtime) SetStats(id string, st runtime.ContainerStats) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.get(id)
	if err != nil {
		return fmt.Errorf("set stats: %w", err)
	}
	c.stats = st
	return nil
}
