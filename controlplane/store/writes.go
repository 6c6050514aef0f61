package store

import (
	"sync"

	"skiff.dev/skiff/api"
)

// writeCounts counts the committed writes to each kind in each namespace
// since the store opened (store.WriteCounter). The committer adds a
// batch's writes once it is committed, before any of its writers hears of
// it; readers note a count before they read and know their read still
// holds while the count has not moved. The map grows by one small entry
// per kind and namespace ever written (a lab room: a few thousand).
type writeCounts struct {
	mu sync.RWMutex
	n  map[writeScope]uint64
}

// writeScope is a kind's bucket and a namespace ("" for cluster-scoped).
type writeScope struct{ bucket, namespace string }

// add counts the events of a committed batch.
func (c *writeCounts) add(events []hubEvent) {
	if len(events) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[writeScope]uint64{}
	}
	for _, e := range events {
		c.n[writeScope{e.bucket, e.namespace}]++
	}
}

func (c *writeCounts) get(bucket, namespace string) uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.n[writeScope{bucket, namespace}]
}

// Writes is how many writes to objects of kind in namespace ("" for a
// cluster-scoped kind) the store has committed since it opened
// (store.WriteCounter).
func (b *Bolt) Writes(kind *api.Kind, namespace string) uint64 {
	return b.writes.get(kind.GroupResource(), namespace)
}
