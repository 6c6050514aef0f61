package apiserver

import "sync"

// recentCache is a bounded map, safe for concurrent use, that keeps what
// was used recently: it holds at most two generations of size entries;
// when the current one fills, the older is dropped, and a hit in the older
// moves to the current one. Its keys are shape keys (shapekey.go), or hold
// one.
type recentCache[K comparable, V any] struct {
	size      int
	mu        sync.Mutex
	cur, prev map[K]V
}

func newRecentCache[K comparable, V any](size int) *recentCache[K, V] {
	return &recentCache[K, V]{size: size}
}

func (c *recentCache[K, V]) get(key K) (V, bool) {
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

func (c *recentCache[K, V]) put(key K, e V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(key, e)
}

func (c *recentCache[K, V]) putLocked(key K, e V) {
	if len(c.cur) >= c.size {
		c.prev, c.cur = c.cur, nil
	}
	if c.cur == nil {
		c.cur = make(map[K]V, c.size)
	}
	c.cur[key] = e
}
