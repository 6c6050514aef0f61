package runtime

import (
	"context"
	"time"
)

// ContainerStats are the resource figures of one running container, read
// from its cgroup: what the agent's Summary API (GET /stats/summary) and
// through it `kubectl top` report.
type ContainerStats struct {
	// Time the figures were read.
	Time time.Time
	// CPUUsageCoreNanoSeconds is the CPU time the container has used since
	// it started, cumulative (cgroup v2 cpu.stat usage_usec, v1
	// cpuacct.usage). A rate needs two samples.
	CPUUsageCoreNanoSeconds uint64
	// MemoryUsageBytes is all memory charged to the cgroup, page cache
	// included (memory.current, memory.usage_in_bytes).
	MemoryUsageBytes uint64
	// MemoryWorkingSetBytes is usage minus inactive file pages, as cAdvisor
	// and the kubelet compute it: what `kubectl top` shows.
	MemoryWorkingSetBytes uint64
}

// StatsProvider is implemented by runtimes that can measure their
// containers (both of skiff's do). ContainerStats of a container that is
// not running is ErrNotRunning, of an unknown one ErrNotFound. Safe for
// concurrent use; it reads files and does not block for long.
type StatsProvider interface {
	ContainerStats(ctx context.Context, id string) (ContainerStats, error)
}
