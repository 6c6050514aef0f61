package cli

import (
	"io/fs"
	"math"
	"testing"
)

func TestMemoryLimit(t *testing.T) {
	noCgroup := func() (int64, bool) { return 0, false }
	cgroup := func() (int64, bool) { return 1 << 30, true }
	tests := []struct {
		name, flag, env string
		cgroup          func() (int64, bool)
		limit           int64
		from            string
		set             bool
	}{
		{"auto, nothing to derive from: the runtime's own (none)", "auto", "", noCgroup, 0, "", false},
		{"auto, GOMEMLIMIT: the runtime already applied it", "auto", "300MiB", cgroup, 0, "GOMEMLIMIT", false},
		{"auto, a cgroup limit: 90% of it", "auto", "", cgroup, 966367641, "90% of the cgroup's memory.max", true},
		{"a size wins over GOMEMLIMIT and the cgroup", "256Mi", "300MiB", cgroup, 256 << 20, "--memory-limit", true},
		{"none turns it off", "none", "300MiB", cgroup, math.MaxInt64, "--memory-limit", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit, from, set, err := memoryLimit(tt.flag, tt.env, tt.cgroup)
			if err != nil {
				t.Fatal(err)
			}
			if limit != tt.limit || from != tt.from || set != tt.set {
				t.Errorf("memoryLimit(%q, %q) = %d, %q, %v; want %d, %q, %v", tt.flag, tt.env, limit, from, set, tt.limit, tt.from, tt.set)
			}
		})
	}
	for _, bad := range []string{"lots", "0", "-1Gi"} {
		if _, _, _, err := memoryLimit(bad, "", noCgroup); err == nil {
			t.Errorf("--memory-limit %q accepted", bad)
		}
	}
}

func TestCgroupMemoryMax(t *testing.T) {
	if got := cgroupV2Path([]byte("12:memory:/old\n0::/system.slice/skiff.service\n")); got != "/system.slice/skiff.service" {
		t.Errorf("cgroupV2Path = %q", got)
	}
	if got := cgroupV2Path([]byte("12:memory:/docker/abc\n")); got != "" {
		t.Errorf("cgroupV2Path of a cgroup v1 host = %q, want none", got)
	}
	files := map[string]string{
		"/sys/fs/cgroup/memory.max":                            "max\n", // the root has none
		"/sys/fs/cgroup/system.slice/memory.max":               "2147483648\n",
		"/sys/fs/cgroup/system.slice/skiff.service/memory.max": "max\n",
		"/sys/fs/cgroup/user.slice/memory.max":                 "max\n",
		"/sys/fs/cgroup/user.slice/user-0.slice/memory.max":    "max\n",
		"/sys/fs/cgroup/kubepods/pod1/memory.max":              "536870912\n",
		"/sys/fs/cgroup/kubepods/memory.max":                   "1073741824\n",
		"/sys/fs/cgroup/kubepods/pod1/container1/memory.max":   "max\n",
	}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
	for _, tt := range []struct {
		dir  string
		want int64
		ok   bool
	}{
		{"/system.slice/skiff.service", 2147483648, true}, // a parent's limit binds the unit
		{"/user.slice/user-0.slice/session-1.scope", 0, false},
		{"/kubepods/pod1/container1", 536870912, true}, // the tightest of the chain
		{"", 0, false},
	} {
		got, ok := tightestMemoryMax("/sys/fs/cgroup", tt.dir, read)
		if got != tt.want || ok != tt.ok {
			t.Errorf("tightestMemoryMax(%q) = %d, %v; want %d, %v", tt.dir, got, ok, tt.want, tt.ok)
		}
	}
}
