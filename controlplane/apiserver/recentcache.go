package apiserver

import "sync"

// recentCache is a bounded map by shape key, safe for concurrent use, that
// keeps what was used recently: it holds at most two generations of size
// entries; when the current one fills, the older is dropped, and a hit in
// the older moves to the current one.
type recentCache[V any] struct {
	size      int
	mu        sync.Mutex
	cur, prev map[shapeKey]V
}

func newRecentCache[V any](size int) *recentCache[V] { return &recentCache[V]{size: size} }

func (c *recentCache[V]) get(key shapeKey) (V, bool) {
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

func (c *recentCache[V]) put(key shapeKey, e V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(key, e)
}

func (c *recentCache[V]) putLocked(key shapeKey, e V) {
	if len(c.cur) >= c.size {
		c.prev, c.cur = c.cur, nil
	}
	if c.cur == nil {
		c.cur = make(map[shapeKey]V, c.size)
	}
	c.cur[key] = e
}
