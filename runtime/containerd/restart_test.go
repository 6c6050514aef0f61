package containerd_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/runtime"
	"skiff.dev/skiff/runtime/runtimetest"
)

// TestSurvivesContainerdRestart restarts the test containerd (started by
// hack/containerd-start.sh, found by its pid file) while a container runs
// and a WaitContainer and an Events stream are open. It is disruptive for
// other tests on the same containerd, so it runs only with
// SKIFF_TEST_CONTAINERD_RESTART=1.
func TestSurvivesContainerdRestart(t *testing.T) {
	if os.Getenv("SKIFF_TEST_CONTAINERD_RESTART") != "1" {
		t.Skip("set SKIFF_TEST_CONTAINERD_RESTART=1 to restart the test containerd")
	}
	runDir := os.Getenv("SKIFF_CI_RUN")
	if runDir == "" {
		runDir = "/run/skiff-ci"
	}
	rt := newRuntime(t, runtimetest.Setup{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := "restart-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	runtimetest.ImportBusybox(t, rt) // self-contained: not only after TestSuite
	if _, err := rt.CreateContainer(ctx, runtime.ContainerSpec{ID: id, Image: runtimetest.BusyboxImage,
		Command: []string{"sh", "-c", "sleep 4; echo done; exit 5"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.RemoveContainer(context.Background(), id) })
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	events := rt.Events(ctx)
	waited := make(chan runtime.ContainerStatus, 1)
	go func() {
		st, err := rt.WaitContainer(ctx, id)
		if err != nil {
			t.Errorf("WaitContainer across restart: %v", err)
		}
		waited <- st
	}()

	pid, err := os.ReadFile(filepath.Join(runDir, "containerd.pid"))
	if err != nil {
		t.Fatalf("pid file of hack/containerd-start.sh: %v", err)
	}
	p, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
	if err := syscall.Kill(p, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "containerd to exit", func() bool { return syscall.Kill(p, 0) != nil })
	if out, err := exec.Command("../../hack/containerd-start.sh").CombinedOutput(); err != nil {
		t.Fatalf("restart containerd: %v\n%s", err, out)
	}

	st := <-waited
	if st.State != runtime.StateExited || st.ExitCode != 5 {
		t.Errorf("after containerd restart: %+v; want exited 5", st)
	}
	var sawResync, sawExit bool
	for !sawExit {
		select {
		case ev := <-events:
			sawResync = sawResync || ev.Type == runtime.EventResync
			sawExit = ev.Type == runtime.EventExited && ev.ID == id
		case <-time.After(10 * time.Second):
			t.Fatalf("no exit event after restart (resync seen: %v)", sawResync)
		}
	}
	if !sawResync {
		t.Error("no resync event after containerd restarted")
	}
}
