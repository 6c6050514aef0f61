package containerd_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"skiff.dev/skiff/internal/testenv"
	"skiff.dev/skiff/runtime"
	"skiff.dev/skiff/runtime/containerd"
	"skiff.dev/skiff/runtime/runtimetest"
)

// TestMeasureStartLatency compares create+start → running of the busybox
// image through this runtime with `ctr run -d` of the same image on the same
// containerd, interleaved. It runs only with SKIFF_MEASURE=1 (N runs each,
// SKIFF_MEASURE_N, default 20) and logs p50/p99 of both and their ratio:
//
//	SKIFF_MEASURE=1 SKIFF_CONTAINERD_ADDRESS=/run/skiff-ci/containerd.sock \
//	  go test -run MeasureStartLatency -v ./runtime/containerd/
func TestMeasureStartLatency(t *testing.T) {
	if os.Getenv("SKIFF_MEASURE") != "1" {
		t.Skip("set SKIFF_MEASURE=1 to measure")
	}
	n := 20
	if v, err := strconv.Atoi(os.Getenv("SKIFF_MEASURE_N")); err == nil && v > 0 {
		n = v
	}
	addr := testenv.ContainerdAddress(t)
	ctr, err := exec.LookPath("ctr")
	if err != nil {
		t.Skip("ctr not installed")
	}
	rt := newRuntime(t, runtimetest.Setup{}).(*containerd.Runtime)
	img := testenv.Busybox()
	archive, err := img.Archive()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := rt.ImportImage(ctx, bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	ctrCmd := func(args ...string) *exec.Cmd {
		return exec.Command(ctr, append([]string{"--address", addr, "--namespace", testNamespace}, args...)...)
	}

	var ours, raw []time.Duration
	for i := range n {
		id := fmt.Sprintf("measure-rt-%d-%d", time.Now().UnixNano(), i)
		start := time.Now()
		if _, err := rt.CreateContainer(ctx, runtime.ContainerSpec{ID: id, Image: runtimetest.BusyboxImage, Command: []string{"sleep", "30"}}); err != nil {
			t.Fatal(err)
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		ours = append(ours, time.Since(start))
		if err := rt.RemoveContainer(ctx, id); err != nil {
			t.Fatal(err)
		}

		id = fmt.Sprintf("measure-ctr-%d-%d", time.Now().UnixNano(), i)
		start = time.Now()
		if out, err := ctrCmd("run", "-d", "--net-host", runtimetest.BusyboxImage, id, "sleep", "30").CombinedOutput(); err != nil {
			t.Fatalf("ctr run: %v: %s", err, out)
		}
		raw = append(raw, time.Since(start))
		if err := rt.RemoveContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	p := func(d []time.Duration, q float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	t.Logf("create+start → running over %d runs: runtime p50 %v p99 %v; ctr run -d p50 %v p99 %v; ratio p50 %.2f",
		n, p(ours, 0.5).Round(time.Millisecond), p(ours, 0.99).Round(time.Millisecond),
		p(raw, 0.5).Round(time.Millisecond), p(raw, 0.99).Round(time.Millisecond),
		float64(p(ours, 0.5))/float64(p(raw, 0.5)))
}
