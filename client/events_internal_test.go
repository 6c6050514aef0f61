package client

import (
	"fmt"
	"slices"
	"testing"
)

// The cache keeps the size most recently used entries: a get or an add
// makes an entry the most recent, a full cache evicts the least recent,
// and a removed entry's slot is the next one's without growing the cache.
func TestEventCacheLeastRecentlyUsed(t *testing.T) {
	c := newEventCache(3)
	k := func(i int) eventKey { return eventKey{uint64(i), uint64(i) * 7} }
	logOf := func(i int) eventLog { return eventLog{name: fmt.Sprintf("ev-%d", i), count: int32(i)} }
	has := func(want ...int) {
		t.Helper()
		for i := 1; i <= 6; i++ {
			_, ok := c.items[k(i)]
			if ok != slices.Contains(want, i) {
				t.Fatalf("entry %d kept: %v; want the cache to hold %v", i, ok, want)
			}
		}
		var order []int
		for i := c.head; i >= 0; i = c.entries[i].next {
			order = append(order, int(c.entries[i].log.count))
		}
		if !slices.Equal(order, want) {
			t.Fatalf("entries most recent first: %v, want %v", order, want)
		}
	}
	for i := 1; i <= 3; i++ {
		c.add(k(i), logOf(i))
	}
	has(3, 2, 1)
	if l, ok := c.get(k(1)); !ok || l != logOf(1) {
		t.Fatalf("get 1: %+v, %v", l, ok)
	}
	has(1, 3, 2)
	c.add(k(4), logOf(4)) // full: 2 is the least recent
	has(4, 1, 3)
	c.add(k(3), eventLog{name: "ev-3", count: 3, resourceVersion: "9"})
	has(3, 4, 1)
	if l, _ := c.get(k(3)); l.resourceVersion != "9" {
		t.Fatalf("an add over an entry did not replace its log: %+v", l)
	}
	c.remove(k(4))
	has(3, 1)
	c.add(k(5), logOf(5))
	has(5, 3, 1)
	if len(c.entries) != 3 {
		t.Fatalf("the cache grew to %d slots for 3 entries", len(c.entries))
	}
	c.add(k(6), logOf(6))
	has(6, 5, 3)
	if _, ok := c.get(k(2)); ok {
		t.Fatal("an evicted entry was found")
	}
}
