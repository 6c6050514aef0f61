package containerd_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"skiff.dev/skiff/runtime"
	"skiff.dev/skiff/runtime/containerd"
	"skiff.dev/skiff/runtime/runtimetest"
)

// A create interrupted between the snapshot and the container record
// (containerd killed mid-create, as in the soak) leaves a snapshot named
// after the container and no container: the next create of that id must
// not fail on the snapshot's "already exists" (the agent took it for the
// container's and tried to start one that was never made), and removing
// the never-made container must not leave the snapshot behind.
func TestOrphanSnapshotOfInterruptedCreate(t *testing.T) {
	rt := newRuntime(t, runtimetest.Setup{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runtimetest.ImportBusybox(t, rt) // self-contained: not only after TestSuite
	cl := rt.(*containerd.Runtime).Client()
	sn := cl.SnapshotService(containerd.DefaultConfig().Snapshotter)
	nctx := namespaces.WithNamespace(ctx, testNamespace)
	orphan := func(t *testing.T, id string) {
		t.Helper()
		if _, err := sn.Prepare(nctx, id, ""); err != nil {
			t.Fatalf("prepare the orphan snapshot %s: %v", id, err)
		}
		t.Cleanup(func() { _ = sn.Remove(namespaces.WithNamespace(context.Background(), testNamespace), id) })
	}
	base := "orphan-" + strconv.FormatInt(time.Now().UnixNano(), 36)

	t.Run("create again", func(t *testing.T) {
		id := base + "-create"
		orphan(t, id)
		if _, err := rt.CreateContainer(ctx, runtime.ContainerSpec{ID: id, Image: runtimetest.BusyboxImage, Command: []string{"true"}}); err != nil {
			t.Fatalf("create over an orphan snapshot: %v", err)
		}
		t.Cleanup(func() { _ = rt.RemoveContainer(context.Background(), id) })
		if _, err := rt.ContainerStatus(ctx, id); err != nil {
			t.Errorf("the container after the create: %v", err)
		}
		// A second create of a container that exists is still AlreadyExists.
		if _, err := rt.CreateContainer(ctx, runtime.ContainerSpec{ID: id, Image: runtimetest.BusyboxImage, Command: []string{"true"}}); !errors.Is(err, runtime.ErrAlreadyExists) {
			t.Errorf("create of an existing container: %v, want ErrAlreadyExists", err)
		}
		if _, err := sn.Stat(nctx, id); err != nil {
			t.Errorf("the existing container's snapshot: %v", err)
		}
	})
	t.Run("remove", func(t *testing.T) {
		id := base + "-remove"
		orphan(t, id)
		if err := rt.RemoveContainer(ctx, id); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("remove of a never-made container: %v, want ErrNotFound", err)
		}
		if _, err := sn.Stat(nctx, id); !errdefs.IsNotFound(err) {
			t.Errorf("the orphan snapshot after remove: %v, want not found", err)
		}
	})
}
