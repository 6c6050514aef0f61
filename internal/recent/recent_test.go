package recent

import "testing"

// TestCacheBounded: the cache keeps at most two generations, and what is
// used moves to the current one.
func TestCacheBounded(t *testing.T) {
	const size = 256
	c := New[[2]byte, []int](size)
	key := func(i int) [2]byte { return [2]byte{byte(i), byte(i >> 8)} }
	c.Put(key(0), nil)
	for i := 1; i < 3*size; i++ {
		c.Put(key(i), nil)
		if _, ok := c.Get(key(0)); !ok {
			t.Fatalf("after %d puts the entry in use is gone", i)
		}
		if n := c.Len(); n > 2*size {
			t.Fatalf("%d entries", n)
		}
	}
	if _, ok := c.Get(key(1)); ok {
		t.Fatal("an entry unused for two generations is still there")
	}
	c.Reset()
	if _, ok := c.Get(key(0)); ok || c.Len() != 0 {
		t.Fatalf("after Reset: %d entries", c.Len())
	}
}
