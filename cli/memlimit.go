package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
)

// memoryLimitFlag is `up`'s and `server`'s --memory-limit: the soft limit
// of the Go runtime's memory (runtime/debug.SetMemoryLimit, what
// GOMEMLIMIT sets). Below it the garbage collector runs as GOGC says (the
// heap may grow to twice the live data; under a burst of requests, to at
// most 256 MiB; at rest, by as little as a quarter of it:
// internal/gcpace); near it, it collects more often rather
// than grow past it. It is soft: a live heap larger than the limit
// is kept, at the cost of more collections. "auto" (the default) derives
// it as Prometheus' automemlimit does: GOMEMLIMIT when set, else 90 % of
// the memory.max of the server's cgroup (cgroup v2) when it has one (a
// systemd unit's MemoryMax=, a container's --memory), else none. A size
// ("512Mi", "1Gi") sets it; "none" turns it off. docs/performance.md
// ("Memory at scale") has what it costs.
type memoryLimitFlag struct {
	value string
}

// cgroupLimitRatio is the share of the cgroup's memory.max the server's Go
// memory may use: the rest is for what the runtime does not count (bbolt's
// mapped pages, the page cache charged to the cgroup, C allocations).
const cgroupLimitRatio = 0.9

func (f *memoryLimitFlag) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.value, "memory-limit", "auto", "soft limit of the server's Go memory (as GOMEMLIMIT): the garbage collector works harder near it instead of letting the heap grow; auto: $GOMEMLIMIT when set, else 90% of the cgroup's memory.max when there is one, else none; a size (512Mi, 1Gi); or none")
}

func (f *memoryLimitFlag) validate() error {
	_, err := parseMemoryLimit(f.value)
	return err
}

// parseMemoryLimit reads the flag: -1 for auto, math.MaxInt64 for none,
// else the size in bytes.
func parseMemoryLimit(v string) (int64, error) {
	switch v {
	case "auto", "":
		return -1, nil
	case "none":
		return math.MaxInt64, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, fmt.Errorf("--memory-limit %q: want auto, none or a size such as 512Mi: %w", v, err)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 {
		return 0, fmt.Errorf("--memory-limit %q: want a positive size such as 512Mi", v)
	}
	return n, nil
}

// memoryLimit is the limit the flag value v asks for and where it came
// from; set is false when the runtime's own (GOMEMLIMIT, or none) stays.
// env is $GOMEMLIMIT; cgroupMax the cgroup's memory.max (ok false: none).
func memoryLimit(v, env string, cgroupMax func() (int64, bool)) (limit int64, from string, set bool, err error) {
	n, err := parseMemoryLimit(v)
	if err != nil {
		return 0, "", false, err
	}
	switch {
	case n >= 0:
		return n, "--memory-limit", true, nil
	case env != "":
		return 0, "GOMEMLIMIT", false, nil
	}
	if max, ok := cgroupMax(); ok {
		return int64(float64(max) * cgroupLimitRatio), "90% of the cgroup's memory.max", true, nil
	}
	return 0, "", false, nil
}

// apply sets the runtime's memory limit as the flag says and logs it.
func (f *memoryLimitFlag) apply(lg *slog.Logger) error {
	limit, from, set, err := memoryLimit(f.value, os.Getenv("GOMEMLIMIT"), cgroupMemoryMax)
	if err != nil {
		return err
	}
	if set {
		debug.SetMemoryLimit(limit)
	}
	if cur := debug.SetMemoryLimit(-1); cur != math.MaxInt64 {
		lg.Info("soft memory limit", "bytes", cur, "from", from)
	}
	return nil
}

// cgroupMemoryMax is the tightest memory.max of this process's cgroup
// (cgroup v2) and its parents; ok false when none sets one.
func cgroupMemoryMax() (int64, bool) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	return tightestMemoryMax("/sys/fs/cgroup", cgroupV2Path(data), os.ReadFile)
}

// cgroupV2Path is the cgroup v2 path in /proc/self/cgroup ("0::/path").
func cgroupV2Path(procCgroup []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(procCgroup))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p
		}
	}
	return ""
}

// tightestMemoryMax reads memory.max in root+dir and each parent up to
// root and returns the smallest ("max": no limit there).
func tightestMemoryMax(root, dir string, read func(string) ([]byte, error)) (int64, bool) {
	if dir == "" {
		return 0, false
	}
	best, found := int64(0), false
	for d := path.Clean("/" + dir); ; d = path.Dir(d) {
		if b, err := read(path.Join(root, d, "memory.max")); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (!found || n < best) {
				best, found = n, true
			}
		}
		if d == "/" {
			return best, found
		}
	}
}
