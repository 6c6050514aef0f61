package containerd_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	taskapi "github.com/containerd/containerd/api/runtime/task/v2"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/ttrpc"

	"skiff.dev/skiff/internal/testenv"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/runtime"
	"skiff.dev/skiff/runtime/runtimetest"
)

// TestStartAfterHalfMadeTask: containerd killed between starting a task's
// shim and creating the task in it (what the soak's kill -9 of containerd
// mid-start does) comes back with the shim in its task list but no task in
// the shim: NewTask says "already exists" while Task says "not found", and
// a start never succeeds. The test makes that state on purpose — a running
// container's shim loses its task while containerd is dead — and starts
// the container again. Like TestSurvivesContainerdRestart it kills the
// test containerd, so it runs only with SKIFF_TEST_CONTAINERD_RESTART=1.
func TestStartAfterHalfMadeTask(t *testing.T) {
	if os.Getenv("SKIFF_TEST_CONTAINERD_RESTART") != "1" {
		t.Skip("set SKIFF_TEST_CONTAINERD_RESTART=1 to kill and restart the test containerd")
	}
	for _, tc := range []struct {
		name string
		then func(ctx context.Context, t *testing.T, rt runtime.Runtime, id, bundle string)
	}{
		{"start again", func(ctx context.Context, t *testing.T, rt runtime.Runtime, id, _ string) {
			if err := rt.StartContainer(ctx, id); err != nil {
				t.Fatalf("start again after the half-made task: %v", err)
			}
			testwait.Until(t, 20*time.Second, func() (bool, string) {
				st, err := rt.ContainerStatus(ctx, id)
				return err == nil && st.State == runtime.StateRunning, "running again: " + errString(err)
			})
		}},
		{"remove", func(ctx context.Context, t *testing.T, rt runtime.Runtime, id, bundle string) {
			// The pod is deleted before a start succeeds: the shim and its
			// bundle go with the container.
			if err := rt.RemoveContainer(ctx, id); err != nil {
				t.Fatalf("remove after the half-made task: %v", err)
			}
			if _, err := os.Stat(bundle); !os.IsNotExist(err) {
				t.Errorf("the half-made task's bundle %s outlives its container: %v", bundle, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRuntime(t, runtimetest.Setup{})
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			id, bundle := halfMadeTask(ctx, t, rt)
			tc.then(ctx, t, rt, id, bundle)
		})
	}
}

// halfMadeTask makes a container whose task containerd lists but whose
// shim has none, and returns its id and bundle directory.
func halfMadeTask(ctx context.Context, t *testing.T, rt runtime.Runtime) (id, bundle string) {
	t.Helper()
	runDir := os.Getenv("SKIFF_CI_RUN")
	if runDir == "" {
		runDir = "/run/skiff-ci"
	}
	runtimetest.ImportBusybox(t, rt) // self-contained: not only after TestSuite
	id = "halfmade-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := rt.CreateContainer(ctx, runtime.ContainerSpec{ID: id, Image: runtimetest.BusyboxImage,
		Command: []string{"sleep", "600"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.RemoveContainer(context.Background(), id) })
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	// The shim's address, from the task's bundle in containerd's state dir.
	bundle = filepath.Join(runDir, "containerd", "io.containerd.runtime.v2.task", testNamespace, id)
	addr, err := os.ReadFile(filepath.Join(bundle, "address"))
	if err != nil {
		t.Fatalf("the task's shim address: %v", err)
	}

	// kill -9 containerd; the shim lives on.
	pid, err := os.ReadFile(filepath.Join(runDir, "containerd.pid"))
	if err != nil {
		t.Fatalf("pid file of hack/containerd-start.sh: %v", err)
	}
	p, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
	if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "containerd to exit", func() bool { return syscall.Kill(p, 0) != nil })
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_, _ = exec.Command("../../hack/containerd-start.sh").CombinedOutput()
		}
	})

	// While containerd is dead, the shim loses its task: it keeps running
	// with none, as one whose containerd died before the create reached it.
	conn, err := net.Dial("unix", strings.TrimPrefix(strings.TrimSpace(string(addr)), "unix://"))
	if err != nil {
		t.Fatalf("dial the shim: %v", err)
	}
	shim := taskapi.NewTaskClient(ttrpc.NewClient(conn))
	if _, err := shim.Kill(ctx, &taskapi.KillRequest{ID: id, Signal: uint32(syscall.SIGKILL), All: true}); err != nil {
		t.Fatalf("shim kill: %v", err)
	}
	if _, err := shim.Wait(ctx, &taskapi.WaitRequest{ID: id}); err != nil {
		t.Fatalf("shim wait: %v", err)
	}
	if _, err := shim.Delete(ctx, &taskapi.DeleteRequest{ID: id}); err != nil {
		t.Fatalf("shim delete: %v", err)
	}

	restarted = true
	if out, err := exec.Command("../../hack/containerd-start.sh").CombinedOutput(); err != nil {
		t.Fatalf("restart containerd: %v\n%s", err, out)
	}
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		_, err := rt.Version(ctx)
		return err == nil, "containerd answers: " + errString(err)
	})
	return id, bundle
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestStartAfterTaskCreatedNotStarted: containerd (or the agent) killed
// between a task's create and its start leaves the task Created: a start
// deletes it and starts the container anew, where it answered "already
// started" for ever (a chaos soak found a Deployment's pod stuck in
// ContainerCreating so). The test creates the task itself, with
// containerd's client, and never starts it.
func TestStartAfterTaskCreatedNotStarted(t *testing.T) {
	rt := newRuntime(t, runtimetest.Setup{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runtimetest.ImportBusybox(t, rt)
	id := "created-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := rt.CreateContainer(ctx, runtime.ContainerSpec{ID: id, Image: runtimetest.BusyboxImage,
		Command: []string{"sleep", "600"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.RemoveContainer(context.Background(), id) })

	cli, err := client.New(testenv.ContainerdAddress(t), client.WithDefaultNamespace(testNamespace))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	c, err := cli.LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewTask(ctx, cio.NullIO); err != nil {
		t.Fatalf("create the task: %v", err)
	}
	if st, err := rt.ContainerStatus(ctx, id); err != nil || st.State != runtime.StateCreated {
		t.Fatalf("status before the start: %+v, %v; want created", st, err)
	}

	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatalf("start the container whose task was created, never started: %v", err)
	}
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		st, err := rt.ContainerStatus(ctx, id)
		return err == nil && st.State == runtime.StateRunning, "running: " + errString(err)
	})
	if err := rt.StartContainer(ctx, id); !errors.Is(err, runtime.ErrInvalidState) {
		t.Fatalf("a second start of the running container: %v, want ErrInvalidState", err)
	}
}
