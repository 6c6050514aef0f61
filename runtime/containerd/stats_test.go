package containerd

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"skiff.dev/skiff/runtime"
)

// The figures come from cgroup v2 or v1 files, working set = usage -
// inactive file pages; a missing cgroup is a container that is not running.
func TestReadCgroupStats(t *testing.T) {
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		files   map[string]string
		want    runtime.ContainerStats
		wantErr error
	}{
		{name: "v2", files: map[string]string{
			"ns/c1/cpu.stat":       "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n",
			"ns/c1/memory.current": "10485760\n",
			"ns/c1/memory.stat":    "anon 4194304\nfile 6291456\ninactive_file 2097152\nactive_file 4194304\n",
		}, want: runtime.ContainerStats{Time: now, CPUUsageCoreNanoSeconds: 1500000, MemoryUsageBytes: 10485760, MemoryWorkingSetBytes: 8388608}},
		{name: "v1", files: map[string]string{
			"cpuacct/ns/c1/cpuacct.usage":        "123456789\n",
			"memory/ns/c1/memory.usage_in_bytes": "1000\n",
			"memory/ns/c1/memory.stat":           "cache 600\ninactive_file 100\ntotal_inactive_file 400\n",
		}, want: runtime.ContainerStats{Time: now, CPUUsageCoreNanoSeconds: 123456789, MemoryUsageBytes: 1000, MemoryWorkingSetBytes: 600}},
		{name: "more inactive than used", files: map[string]string{
			"cpuacct/ns/c1/cpuacct.usage":        "1\n",
			"memory/ns/c1/memory.usage_in_bytes": "100\n",
			"memory/ns/c1/memory.stat":           "total_inactive_file 400\n",
		}, want: runtime.ContainerStats{Time: now, CPUUsageCoreNanoSeconds: 1, MemoryUsageBytes: 100}},
		{name: "no cgroup", files: map[string]string{}, wantErr: runtime.ErrNotRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, s := range tc.files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := readCgroupStats(root, "ns/c1", now)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
