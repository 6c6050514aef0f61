package store

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"skiff.dev/skiff/api"
)

// sweepLoop deletes expired Events every SweepInterval until ctx ends.
func (b *Bolt) sweepLoop(ctx context.Context) {
	t := time.NewTicker(b.opts.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := b.expireEvents(ctx); err != nil {
				if ctx.Err() == nil {
					b.log.Warn("expire events", "err", err)
				}
			} else if n > 0 {
				b.log.Debug("expired events", "count", n)
			}
		}
	}
}

// eventTimes is the part of a stored Event that decides its expiry.
type eventTimes struct {
	Metadata struct {
		Namespace         string   `json:"namespace"`
		Name              string   `json:"name"`
		ResourceVersion   string   `json:"resourceVersion"`
		CreationTimestamp api.Time `json:"creationTimestamp"`
	} `json:"metadata"`
	LastTimestamp api.Time `json:"lastTimestamp"`
}

// expireEvents deletes every Event older than EventTTL (by lastTimestamp,
// else creationTimestamp) and returns how many it deleted. Each delete names
// the resourceVersion it read, so an Event bumped meanwhile survives.
func (b *Bolt) expireEvents(ctx context.Context) (int, error) {
	return b.expireEventsBefore(ctx, b.opts.Now().Add(-b.opts.EventTTL))
}

// expireEventsBefore deletes every Event last seen before cutoff. It reads
// no Event when none stored can have been last seen before cutoff
// (eventExpiry).
func (b *Bolt) expireEventsBefore(ctx context.Context, cutoff time.Time) (int, error) {
	b.expiry.sweep.Lock() // one sweep at a time
	defer b.expiry.sweep.Unlock()
	if !b.expiry.scan(cutoff) {
		return 0, nil
	}
	b.stats.sweepReads.Add(1)
	eventKind := api.MustKindOf(&api.Event{})
	var ops []*op
	var oldest time.Time // of the Events kept
	kept := false
	err := b.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(eventKind.GroupResource()))
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(_, v []byte) error {
			var e eventTimes
			raw, _, err := unpackValue(v)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				return err
			}
			seen := lastSeen(e.LastTimestamp, e.Metadata.CreationTimestamp)
			if seen.Before(cutoff) {
				ops = append(ops, &op{typ: opDelete, kind: eventKind, namespace: e.Metadata.Namespace, name: e.Metadata.Name, wantRV: e.Metadata.ResourceVersion})
			} else if !kept || seen.Before(oldest) {
				oldest, kept = seen, true
			}
			return nil
		})
	})
	if err != nil {
		b.expiry.scanned(time.Time{}, false)
		return 0, err
	}
	// Queue every delete before waiting, so they commit in a few batches
	// rather than one fsync each.
	queued := 0
	var qerr error
	for _, o := range ops {
		if qerr = b.enqueue(ctx, o); qerr != nil {
			break
		}
		queued++
	}
	deleted := 0
	complete := qerr == nil // every expired Event is gone, or was written again
	for _, o := range ops[:queued] {
		<-o.done // the committer finishes every queued op, even on Close
		switch {
		case o.err == nil:
			deleted++
		case api.IsConflict(o.err) || api.IsNotFound(o.err):
		default:
			complete = false
		}
	}
	if !kept {
		oldest = noEvent
	}
	b.expiry.scanned(oldest, complete)
	b.stats.expired.Add(uint64(deleted))
	return deleted, qerr
}

// lastSeen is when an Event was last seen, which its expiry counts from:
// its lastTimestamp, else its creationTimestamp.
func lastSeen(last, created api.Time) time.Time {
	if last.IsZero() {
		return created.Time
	}
	return last.Time
}

// eventExpiry spares the sweep its read of every Event (a decompression
// and a decode each: tens of thousands a minute on a large simulated
// cluster, for an Event lives an hour) while none can have expired: it
// knows a time no stored Event was last seen before. A sweep's read gives
// it (the oldest Event the sweep kept); every Event the committer writes
// lowers it to that Event's time, during a sweep's read too. Until the
// first sweep, or after one that did not finish, it knows nothing and
// the next sweep reads them all.
type eventExpiry struct {
	sweep    sync.Mutex // held by a sweep
	mu       sync.Mutex
	oldest   time.Time // no stored Event was last seen before; valid when known
	known    bool
	scanning bool
	// written is the oldest time of the Events written since the read of
	// the sweep under way began; zero when none.
	written time.Time
}

// noEvent is oldest when no Event is stored: after every other time.
var noEvent = time.Unix(1<<62, 0)

// scan reports whether a sweep for cutoff must read the Events, and if
// so notes that its read begins.
func (x *eventExpiry) scan(cutoff time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.known && !x.oldest.Before(cutoff) {
		return false
	}
	x.scanning, x.written = true, time.Time{}
	return true
}

// scanned ends a sweep's read: oldest is the time of the oldest Event it
// kept (noEvent: none); complete, that every Event it found expired is
// deleted or was written again.
func (x *eventExpiry) scanned(oldest time.Time, complete bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.written.IsZero() && x.written.Before(oldest) {
		oldest = x.written
	}
	x.oldest, x.known, x.scanning, x.written = oldest, complete, false, time.Time{}
}

// wrote notes the Events a committed batch created or updated, by when
// each was last seen (its lastTimestamp, else its creationTimestamp).
func (x *eventExpiry) wrote(batch []*op) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, o := range batch {
		e, ok := o.obj.(*api.Event)
		if !ok || o.err != nil || o.typ == opDelete {
			continue
		}
		seen := lastSeen(e.LastTimestamp, e.CreationTimestamp)
		if seen.IsZero() {
			seen = time.Unix(0, 0) // not known: the next sweep reads them all
		}
		if x.known && seen.Before(x.oldest) {
			x.oldest = seen
		}
		if x.scanning && (x.written.IsZero() || seen.Before(x.written)) {
			x.written = seen
		}
	}
}
