package store

import (
	"context"
	"encoding/json"
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

// expireEventsBefore deletes every Event last seen before cutoff.
func (b *Bolt) expireEventsBefore(ctx context.Context, cutoff time.Time) (int, error) {
	eventKind := api.MustKindOf(&api.Event{})
	var ops []*op
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
			seen := e.LastTimestamp.Time
			if seen.IsZero() {
				seen = e.Metadata.CreationTimestamp.Time
			}
			if seen.Before(cutoff) {
				ops = append(ops, &op{typ: opDelete, kind: eventKind, namespace: e.Metadata.Namespace, name: e.Metadata.Name, wantRV: e.Metadata.ResourceVersion})
			}
			return nil
		})
	})
	if err != nil {
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
	for _, o := range ops[:queued] {
		<-o.done // the committer finishes every queued op, even on Close
		if o.err == nil {
			deleted++
		}
	}
	b.stats.expired.Add(uint64(deleted))
	return deleted, qerr
}
