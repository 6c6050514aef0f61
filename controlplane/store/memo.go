package store

import (
	"bytes"
	"sync"

	"skiff.dev/skiff/api"
)

// decodeMemo keeps the decoded form of the few small, rarely written
// objects that nearly every write reads: the namespace it goes into (the
// terminating check) and, for a pod, its ServiceAccount. Without it each
// pod create decoded both from JSON (their managedFields make them cost
// as much as a small pod; docs/performance.md, sixth sitting).
//
// It is exact, not a cache that can be stale: an entry holds the stored
// JSON it was decoded from, and a Get uses it only when no write to its
// kind in its namespace was committed since that JSON was read (the
// count of writes, writes.go: no transaction at all), or when the JSON
// bbolt holds now (decompressed, value.go) is the same; so a write is seen
// by the next Get whoever made it. A hit returns a copy (api.Clone), as every
// Get does; GetShared (store.SharedGetter) returns the entry's object
// itself, for readers that never change it: the API server's namespace and
// ServiceAccount checks of every create, which the copy cost more than the
// read (docs/performance.md, eleventh sitting).
type decodeMemo struct {
	mu      sync.RWMutex
	entries map[string]memoEntry // bucket + "/" + key
}

type memoEntry struct {
	raw []byte // what obj was decoded from; never modified
	obj api.Object
	// writes is the count of writes to the kind in the object's namespace
	// (writes.go) noted before raw was last read as stored: while the
	// count is still that, so is raw, and a Get needs no transaction.
	writes uint64
}

// memoMaxEntries bounds the memo (a few MB at most): a lab room of forty
// students has a few hundred namespaces and ServiceAccounts. When full,
// new keys are decoded as if there were no memo; an entry goes when a Get
// finds its object gone.
const memoMaxEntries = 1024

// memoized reports whether Gets of kind use the memo.
func memoized(kind *api.Kind) bool {
	return kind.Group == "" && (kind.Resource == "namespaces" || kind.Resource == "serviceaccounts")
}

// current returns the entry for key when the count of writes is still the
// one it holds for: nothing of its kind was written in its namespace since.
func (m *decodeMemo) current(key string, writes uint64) (memoEntry, bool) {
	m.mu.RLock()
	e, ok := m.entries[key]
	m.mu.RUnlock()
	return e, ok && e.writes == writes
}

// lookup returns the entry for key when it was decoded from raw, read as
// stored after the count of writes was writes, which the entry then holds
// for.
func (m *decodeMemo) lookup(key string, raw []byte, writes uint64) (memoEntry, bool) {
	m.mu.RLock()
	e, ok := m.entries[key]
	m.mu.RUnlock()
	if !ok || !bytes.Equal(e.raw, raw) {
		return memoEntry{}, false
	}
	if e.writes != writes {
		m.mu.Lock()
		if cur, ok := m.entries[key]; ok && bytes.Equal(cur.raw, raw) && cur.writes < writes {
			cur.writes = writes
			m.entries[key] = cur
		}
		m.mu.Unlock()
	}
	return e, true
}

// remember records obj, decoded from raw (which the memo now owns) read
// as stored after the count of writes was writes, and reports whether it
// did (not when full): obj is then the memo's, shared.
func (m *decodeMemo) remember(key string, raw []byte, obj api.Object, writes uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[string]memoEntry{}
	}
	_, replace := m.entries[key]
	if !replace && len(m.entries) >= memoMaxEntries {
		return false
	}
	m.entries[key] = memoEntry{raw: raw, obj: obj, writes: writes}
	return true
}

// forget drops key (its object is gone).
func (m *decodeMemo) forget(key string) {
	m.mu.Lock()
	delete(m.entries, key)
	m.mu.Unlock()
}
