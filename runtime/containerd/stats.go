package containerd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"skiff.dev/skiff/runtime"
)

var _ runtime.StatsProvider = (*Runtime)(nil)

// cgroupRoot is where the cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// ContainerStats implements runtime.StatsProvider by reading the
// container's cgroup files, at the path containerd's default spec gives
// it (/NAMESPACE/ID, as cgroupOOMKilled), under cgroup v2 (cpu.stat,
// memory.current, memory.stat) or v1 (cpuacct.usage,
// memory.usage_in_bytes, memory.stat): the figures cAdvisor reads for the
// kubelet. A container whose cgroup is gone is not running.
func (r *Runtime) ContainerStats(ctx context.Context, id string) (runtime.ContainerStats, error) {
	return readCgroupStats(cgroupRoot, filepath.Join(r.cfg.Namespace, id), time.Now())
}

// readCgroupStats reads the figures of cgroup rel under root, v2 first.
func readCgroupStats(root, rel string, now time.Time) (runtime.ContainerStats, error) {
	st := runtime.ContainerStats{Time: now}
	v2 := filepath.Join(root, rel)
	if cpu, err := os.ReadFile(filepath.Join(v2, "cpu.stat")); err == nil {
		usec, ok := statField(cpu, "usage_usec")
		if !ok {
			return st, fmt.Errorf("cgroup %s: cpu.stat has no usage_usec", v2)
		}
		st.CPUUsageCoreNanoSeconds = usec * 1000
		usage, err := readUint(filepath.Join(v2, "memory.current"))
		if err != nil {
			return st, fmt.Errorf("cgroup %s: %w", v2, err)
		}
		mstat, err := os.ReadFile(filepath.Join(v2, "memory.stat"))
		if err != nil {
			return st, fmt.Errorf("cgroup %s: %w", v2, err)
		}
		inactive, _ := statField(mstat, "inactive_file")
		st.MemoryUsageBytes, st.MemoryWorkingSetBytes = usage, workingSet(usage, inactive)
		return st, nil
	}
	cpuPath := filepath.Join(root, "cpuacct", rel, "cpuacct.usage")
	cpu, err := readUint(cpuPath)
	if errors.Is(err, fs.ErrNotExist) {
		return st, fmt.Errorf("cgroup %s: %w", rel, runtime.ErrNotRunning)
	}
	if err != nil {
		return st, fmt.Errorf("cgroup %s: %w", rel, err)
	}
	st.CPUUsageCoreNanoSeconds = cpu
	mem := filepath.Join(root, "memory", rel)
	usage, err := readUint(filepath.Join(mem, "memory.usage_in_bytes"))
	if err != nil {
		return st, fmt.Errorf("cgroup %s: %w", rel, err)
	}
	mstat, err := os.ReadFile(filepath.Join(mem, "memory.stat"))
	if err != nil {
		return st, fmt.Errorf("cgroup %s: %w", rel, err)
	}
	inactive, _ := statField(mstat, "total_inactive_file")
	st.MemoryUsageBytes, st.MemoryWorkingSetBytes = usage, workingSet(usage, inactive)
	return st, nil
}

// workingSet is usage less inactive file pages, never below zero (cAdvisor).
func workingSet(usage, inactiveFile uint64) uint64 {
	if inactiveFile > usage {
		return 0
	}
	return usage - inactiveFile
}

// statField finds "key value" in a cgroup stat file.
func statField(data []byte, key string) (uint64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(" "))
		if ok && string(k) == key {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}
