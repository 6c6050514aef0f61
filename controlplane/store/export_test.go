package store

import (
	"context"
	"time"
)

// Hooks for the tests of package store_test (the shared suite's harness).

// CompactHistory drops the watch history up to rev, as if the ring had
// overflowed: watches and exact lists from before rev are Gone.
func CompactHistory(b *Bolt, rev int64) {
	h := b.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.n > 0 && h.ring[h.head].rev <= rev {
		h.ring[h.head] = hubEvent{}
		h.head = (h.head + 1) % len(h.ring)
		h.n--
	}
	h.start = max(h.start, rev)
}

// UnpackValue returns the JSON of a value as bbolt holds it.
func UnpackValue(v []byte) ([]byte, error) {
	raw, _, err := unpackValue(v)
	return raw, err
}

// ExpireEvents runs one sweep now.
func ExpireEvents(ctx context.Context, b *Bolt) (int, error) { return b.expireEvents(ctx) }

// SweepReads is how many sweeps read the stored Events.
func SweepReads(b *Bolt) uint64 { return b.stats.sweepReads.Load() }

// ExpireEventsBefore runs one sweep with cutoff as the expiry time.
func ExpireEventsBefore(ctx context.Context, b *Bolt, cutoff time.Time) (int, error) {
	return b.expireEventsBefore(ctx, cutoff)
}

// HistoryCompressed reports how many events the watch history holds, how
// many of them it keeps compressed only (no JSON of their own), and how
// many it keeps as JSON although their compressed form is smaller
// (pack's rule says none).
func HistoryCompressed(b *Bolt) (events, compressed, plainButCompressible int) {
	h := b.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	var p valuePacker
	for i := range h.n {
		e := &h.ring[(h.head+i)%len(h.ring)]
		switch {
		case e.raw == nil && e.z != nil:
			compressed++
		case e.raw != nil:
			if _, z := p.pack(e.raw); z != nil {
				plainButCompressible++
			}
		}
	}
	return h.n, compressed, plainButCompressible
}

// MemoLen is the number of decoded objects b's Get memo holds.
func MemoLen(b *Bolt) int {
	b.memo.mu.RLock()
	defer b.memo.mu.RUnlock()
	return len(b.memo.entries)
}

// MemoMaxEntries is the memo's bound.
const MemoMaxEntries = memoMaxEntries

// BenchPodJSON is benchPodJSON, for the benchmarks of package store_test.
var BenchPodJSON = benchPodJSON

// ReadTransactions is how many read transactions b's database has begun.
func ReadTransactions(b *Bolt) int { return b.db.Stats().TxN }
