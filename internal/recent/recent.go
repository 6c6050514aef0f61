// Package recent is a bounded map that keeps what was used recently, for
// caches of work remembered by key: the API server's managedFields of a
// create and Pod Security's verdicts (controlplane/apiserver), the event
// recorders' groups of similar events and spam buckets (client).
//
// A Cache holds at most two generations of size entries: when the current
// one fills, the older is dropped, and a hit in the older moves to the
// current one. So an entry used within the last size puts stays, and the
// cache never holds more than twice size: an LRU's bound, without its list.
package recent

import "sync"

// Cache is the bounded map, safe for concurrent use.
type Cache[K comparable, V any] struct {
	size      int
	mu        sync.Mutex
	cur, prev map[K]V
}

// New returns an empty cache of generations of size entries.
func New[K comparable, V any](size int) *Cache[K, V] {
	return &Cache[K, V]{size: size}
}

// Get returns key's value and whether the cache held it.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cur[key]; ok {
		return e, true
	}
	e, ok := c.prev[key]
	if ok {
		c.putLocked(key, e)
	}
	return e, ok
}

// Put sets key's value.
func (c *Cache[K, V]) Put(key K, e V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(key, e)
}

func (c *Cache[K, V]) putLocked(key K, e V) {
	if len(c.cur) >= c.size {
		c.prev, c.cur = c.cur, nil
	}
	if c.cur == nil {
		c.cur = make(map[K]V, c.size)
	}
	c.cur[key] = e
}

// Len is how many entries the cache holds, in both generations (a key in
// both counts twice).
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.prev)
}

// Reset empties the cache.
func (c *Cache[K, V]) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur, c.prev = nil, nil
}
