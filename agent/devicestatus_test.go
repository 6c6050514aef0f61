package agent

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/internal/testwait"
	rtfake "skiff.dev/skiff/runtime/fake"
)

// unreachable is a client whose every call fails while down is set, as
// when the API server is being restarted.
type unreachable struct {
	client.Interface
	down   atomic.Bool
	failed atomic.Int64 // calls refused
}

func (u *unreachable) refuse() bool {
	if u.down.Load() {
		u.failed.Add(1)
		return true
	}
	return false
}

var errUnreachable = errors.New("cannot reach the API server")

func (u *unreachable) Get(ctx context.Context, k *api.Kind, ns, name string) (api.Object, error) {
	if u.refuse() {
		return nil, errUnreachable
	}
	return u.Interface.Get(ctx, k, ns, name)
}

func (u *unreachable) Update(ctx context.Context, o api.Object) (api.Object, error) {
	if u.refuse() {
		return nil, errUnreachable
	}
	return u.Interface.Update(ctx, o)
}

func (u *unreachable) UpdateStatus(ctx context.Context, o api.Object) (api.Object, error) {
	if u.refuse() {
		return nil, errUnreachable
	}
	return u.Interface.UpdateStatus(ctx, o)
}

// A device change whose write fails (the API server down) reaches the
// Node once the server is back, with no further change: the heartbeat
// writes no annotations, so the allocation records would otherwise keep a
// gone pod's GPUs.
func TestDeviceWriteRetriedAfterFailure(t *testing.T) {
	fc := fake.New()
	node := &api.Node{ObjectMeta: api.ObjectMeta{Name: testNode}}
	if _, err := fc.Create(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	c := &unreachable{Interface: fc}
	var mu sync.Mutex
	alloc := ""
	changed := make(chan struct{})
	taken := 0 // channels deviceUpdates took
	cfg := DefaultConfig()
	cfg.NodeName = testNode
	cfg.DevicesChanged = func() <-chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		taken++
		return changed
	}
	// change is a device change, once deviceUpdates waits for the n-th one.
	change := func(n int, newAlloc string) {
		testwait.For(t, 10*time.Second, "deviceUpdates to wait for a change", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return taken >= n
		})
		mu.Lock()
		defer mu.Unlock()
		alloc = newAlloc
		close(changed)
		changed = make(chan struct{})
	}
	const key = "example.com/allocations"
	cfg.Annotations = func(context.Context) (map[string]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return map[string]string{key: alloc}, nil
	}
	a, err := New(cfg, c, rtfake.New(rtfake.DefaultConfig()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { a.deviceUpdates(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	annotation := func() string {
		o, err := fc.Get(t.Context(), api.MustKindOf(&api.Node{}), "", testNode)
		if err != nil {
			t.Fatal(err)
		}
		return o.GetObjectMeta().Annotations[key]
	}
	// The first change is written.
	change(1, "gpu-0052:0,1")
	testwait.For(t, 10*time.Second, "the first allocations on the Node", func() bool { return annotation() == "gpu-0052:0,1" })

	// The pod goes while the server is down: its write fails.
	c.down.Store(true)
	change(2, "")
	// Let the failed write happen, then bring the server back; no change follows.
	testwait.For(t, 10*time.Second, "a failed write", func() bool { return c.failed.Load() > 0 })
	c.down.Store(false)
	testwait.For(t, 10*time.Second, "the gone pod's GPUs off the Node", func() bool { return annotation() == "" })
}
