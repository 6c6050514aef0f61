package containerd_test

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"skiff.dev/skiff/runtime"
	"skiff.dev/skiff/runtime/containerd"
	"skiff.dev/skiff/runtime/runtimetest"
)

// ListContainers reads the tasks of a few containers one by one and of
// more through the task service's List: both give the same statuses, for
// containers created but never started, running and exited.
func TestListContainersTasksOneByOneEqualTheList(t *testing.T) {
	rt := newRuntime(t, runtimetest.Setup{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	runtimetest.ImportBusybox(t, rt)
	run := "tasks-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	const n = containerd.MaxTaskGets + 4
	for i := range n {
		id := run + "-" + strconv.Itoa(i)
		cmd := []string{"sleep", "3600"}
		if i%3 == 2 {
			cmd = []string{"true"}
		}
		if _, err := rt.CreateContainer(ctx, runtime.ContainerSpec{ID: id, Image: runtimetest.BusyboxImage, Command: cmd,
			Labels: map[string]string{"run": run, "n": strconv.Itoa(i)}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.RemoveContainer(context.Background(), id) })
		if i%3 == 0 {
			continue // created, never started
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		if i%3 == 2 {
			if _, err := rt.WaitContainer(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	all, err := rt.ListContainers(ctx, map[string]string{"run": run})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("listed %d containers, want %d", len(all), n)
	}
	states := map[runtime.ContainerState]int{}
	for _, want := range all {
		states[want.State]++
		one, err := rt.ListContainers(ctx, map[string]string{"run": run, "n": want.Labels["n"]})
		if err != nil {
			t.Fatal(err)
		}
		if len(one) != 1 || !reflect.DeepEqual(one[0], want) {
			t.Errorf("container %s read alone:\n%+v\nwant (from the task List):\n%+v", want.ID, one, want)
		}
	}
	for _, s := range []runtime.ContainerState{runtime.StateCreated, runtime.StateRunning, runtime.StateExited} {
		if states[s] == 0 {
			t.Errorf("no container in state %s: %v", s, states)
		}
	}
}
