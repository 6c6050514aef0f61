package gpu

import (
	"context"
	"sync"
)

// healthBuffer is how many events a watcher that does not read can fall
// behind before events are dropped for it.
const healthBuffer = 64

// healthHub keeps the health of each GPU and fans health events out to the
// watchers. Both sources use it: NVML feeds it from driver events, the
// simulator from injected faults.
type healthHub struct {
	mu       sync.Mutex
	healthy  []bool
	lastXid  []uint64
	watchers map[chan HealthEvent]struct{}
	closed   bool
}

func newHealthHub(n int) *healthHub {
	h := &healthHub{
		healthy:  make([]bool, n),
		lastXid:  make([]uint64, n),
		watchers: make(map[chan HealthEvent]struct{}),
	}
	for i := range h.healthy {
		h.healthy[i] = true
	}
	return h
}

// state returns the health and last Xid of GPU i.
func (h *healthHub) state(i int) (bool, uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.healthy[i], h.lastXid[i]
}

// record stores the new health of GPU ev.Index and sends ev to every watcher
// without blocking: a full watcher misses the event (see Source.Watch).
func (h *healthHub) record(ev HealthEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || ev.Index < 0 || ev.Index >= len(h.healthy) {
		return
	}
	h.healthy[ev.Index] = ev.Healthy
	if ev.Xid != 0 || ev.Healthy {
		h.lastXid[ev.Index] = ev.Xid // a recovery (healthy, no Xid) clears it
	}
	for ch := range h.watchers {
		select {
		case ch <- ev:
		default:
		}
	}
}

// watch registers a watcher whose channel closes when ctx ends or the hub
// closes. context.AfterFunc removes it, so no goroutine waits per watcher.
func (h *healthHub) watch(ctx context.Context) <-chan HealthEvent {
	ch := make(chan HealthEvent, healthBuffer)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(ch)
		return ch
	}
	h.watchers[ch] = struct{}{}
	context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.watchers[ch]; ok {
			delete(h.watchers, ch)
			close(ch)
		}
	})
	return ch
}

// close closes every watcher's channel. Safe to call twice.
func (h *healthHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for ch := range h.watchers {
		delete(h.watchers, ch)
		close(ch)
	}
}
