package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/internal/testwait"
)

// The reconcilers are tested one by one on fixtures (the other _test
// files). This test runs the whole Manager (informers, handlers, loops) on
// the fake client, to check the wiring: a Deployment becomes a ReplicaSet
// and pods, follows a scale, and deleting it cascades through the garbage
// collector. It polls with a deadline (STYLE 18); no sleeps.
func TestManagerWiring(t *testing.T) {
	c := fake.New(namespace(ns, false))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, &finalizer{}, Options{Log: testLogger(t), Workers: 1}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	d := deployment(3, "nginx:1")
	d.UID = ""
	if _, err := c.Create(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	activePods := func() int {
		n := 0
		for _, p := range list[*api.Pod](t, c, ns) {
			if isPodActive(p) && api.ControllerOf(p) != nil {
				n++
			}
		}
		return n
	}
	testwait.For(t, 10*time.Second, "3 pods of the deployment", func() bool { return activePods() == 3 })

	// The controllers write the deployment's status meanwhile: a stale
	// read is a Conflict, and a client reads again (as kubectl scale does).
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		cur := get[*api.Deployment](t, c, ns, "web")
		cur.Spec.Replicas = ptr[int32](1)
		_, err := c.Update(t.Context(), cur)
		if err != nil && !api.IsConflict(err) {
			t.Fatal(err)
		}
		return err == nil, fmt.Sprintf("the scale-down to be written (last: %v)", err)
	})
	testwait.For(t, 10*time.Second, "scale down to 1 pod", func() bool { return activePods() == 1 })

	if err := c.Delete(t.Context(), deploymentKind(), ns, "web", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the garbage collector to remove the replica set and its pods", func() bool {
		return len(list[*api.ReplicaSet](t, c, ns)) == 0 && len(list[*api.Pod](t, c, ns)) == 0
	})
}
