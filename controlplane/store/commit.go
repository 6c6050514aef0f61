package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"skiff.dev/skiff/api"
)

// Group commit
//
// Writers never touch bbolt themselves. Each write becomes an op sent to
// the committer goroutine, which takes every op already queued (up to
// MaxBatch, waiting briefly for the previous batch's writers to come back),
// applies them in order inside one read-write transaction and
// commits once: one durable commit (bbolt fsyncs data, then meta) for the
// whole batch. Each op is checked against
// the transaction's state as it is applied, so two writes to the same object
// in one batch see each other, and an op that fails (conflict, not found)
// writes nothing and fails alone. Only a failed commit fails every op.
// Revisions are handed out in apply order; the batch's events are published
// to watchers, then the writers are woken.

type opType int

const (
	opCreate opType = iota
	opUpdate
	opDelete
)

// op is one write waiting for the committer.
type op struct {
	typ             opType
	kind            *api.Kind
	namespace, name string
	// obj is the private copy to write (create, update); after the commit,
	// the result handed back to the writer (for delete, the last state).
	obj api.Object
	// wantRV and wantUID are preconditions; "" means none.
	wantRV, wantUID string
	// raw is obj's JSON as stored (create, update), set with the commit:
	// shared with the watch hub, never changed.
	raw []byte
	// enc, when set, is obj's JSON with resourceVersion encRV, encoded by
	// the writer (preEncode, or GuaranteedUpdate for its no-op check): the
	// committer writes it with the new revision in place
	// (withResourceVersion) instead of encoding obj.
	enc   []byte
	encRV string
	// live, when set, is a deep copy of obj the writer made (liveCopy),
	// or obj itself when its writer only reads it from then on (liveCopy's
	// share), for the watch hub: live watchers get it instead of a
	// decode of raw (watch.go). The committer gives it obj's
	// resourceVersion, uid and creationTimestamp; nothing else changes it.
	live api.Object
	// after are the writes o depends on (store.Chainer), queued before it:
	// o fails with ErrDependencyFailed, writing nothing, when one failed.
	after []*op

	err  error
	done chan struct{}
}

// errNoWrites rolls back a batch in which every op failed: nothing to fsync.
var errNoWrites = errors.New("no writes")

// do hands o to the committer and waits for its result.
func (b *Bolt) do(ctx context.Context, o *op) error {
	if err := b.enqueue(ctx, o); err != nil {
		return err
	}
	select {
	case <-o.done:
		return o.err
	case <-ctx.Done():
		return fmt.Errorf("wait for commit: %w", ctx.Err())
	}
}

// doAll is do that, once o is queued, waits for its commit whatever ctx
// says: the committer is done with o.obj when it returns (a commit takes
// milliseconds).
func (b *Bolt) doAll(ctx context.Context, o *op) error {
	if err := b.enqueue(ctx, o); err != nil {
		return err
	}
	<-o.done
	return o.err
}

// enqueue sends o to the committer unless the store is closed.
func (b *Bolt) enqueue(ctx context.Context, o *op) error {
	o.done = make(chan struct{})
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	select {
	case b.ops <- o:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("queue write: %w", ctx.Err())
	}
}

// commitLoop is the committer goroutine. It returns when ops is closed and
// drained.
func (b *Bolt) commitLoop() {
	batch := make([]*op, 0, b.opts.MaxBatch)
	// expect is the size of the previous batch: its writers, just woken,
	// are likely to come back with their next write. A full batch is
	// expected at first so that a burst at startup is not split.
	expect := b.opts.MaxBatch
	// Waiting for more writes longer than a commit takes is pointless:
	// committing and starting the next batch would be as quick.
	wait := b.opts.MaxBatchDelay
	for {
		o, ok := <-b.ops
		if !ok {
			return
		}
		batch = append(batch[:0], o)
		open := b.fill(&batch, expect, wait)
		expect = len(batch)
		start := time.Now()
		b.commit(batch)
		wait = min(time.Since(start), b.opts.MaxBatchDelay)
		clear(batch) // drop references to committed objects
		if !open {
			return
		}
	}
}

// fill adds queued ops to batch. While the batch is smaller than expect it
// waits, at most wait, for more. A lone writer (expect 1) never waits. It
// reports false when ops was closed.
func (b *Bolt) fill(batch *[]*op, expect int, wait time.Duration) bool {
	var timeout <-chan time.Time
	for len(*batch) < b.opts.MaxBatch {
		select {
		case o, ok := <-b.ops:
			if !ok {
				return false
			}
			*batch = append(*batch, o)
			continue
		default:
		}
		if len(*batch) >= expect || wait <= 0 {
			return true
		}
		if timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case o, ok := <-b.ops:
			if !ok {
				return false
			}
			*batch = append(*batch, o)
		case <-timeout:
			return true
		}
	}
	return true
}

// commit applies a batch in one transaction, publishes its events and wakes
// its writers.
func (b *Bolt) commit(batch []*op) {
	b.stats.batches.Add(1)
	rev := b.rev.Load()
	events := make([]hubEvent, 0, len(batch))
	keys := make([]string, 0, len(batch)) // events' for recent
	err := b.db.Update(func(tx *bolt.Tx) error {
		for _, o := range batch {
			if err := o.afterErr(); err != nil {
				o.err = err
				continue
			}
			ev, err := apply(tx, o, rev+1, &b.packer)
			if err != nil {
				o.err = err
				continue
			}
			rev++
			events = append(events, ev)
			keys = append(keys, bucketKey(ev.bucket, api.Key(o.namespace, o.name)))
		}
		if len(events) == 0 {
			return errNoWrites
		}
		var buf [8]byte
		putRevision(buf[:], rev)
		return tx.Bucket(metaBucket).Put(revisionKey, buf[:])
	})
	switch {
	case errors.Is(err, errNoWrites):
	case err != nil:
		// bbolt rolled the transaction back: the file and the revision are
		// as before the batch, and the next batch starts afresh.
		var failErr error = api.NewInternal(fmt.Errorf("commit: %w", err))
		if isNoSpace(err) {
			failErr = newNoSpaceError(b.path, err)
			if !b.diskFull {
				b.log.Error("the store's disk is full: writes fail until space is freed; reads keep working", "path", b.path, "err", err)
			}
			b.diskFull = true
		} else {
			b.log.Error("commit failed", "writes", len(batch), "err", err)
		}
		for _, o := range batch {
			if o.err == nil {
				o.err = failErr
			}
		}
		events = nil
	default:
		if b.diskFull {
			b.log.Info("the store's disk has space again: writes go on", "path", b.path)
			b.diskFull = false
		}
		b.stats.commits.Add(1)
		b.rev.Store(rev)
		b.writes.add(events)
		b.recent.put(events, keys)
		b.expiry.wrote(batch)
		b.hub.publish(events)
	}
	b.stats.writes.Add(uint64(len(events)))
	b.stats.failed.Add(uint64(len(batch) - len(events)))
	for _, o := range batch {
		close(o.done)
	}
}

// encode returns o.obj's JSON: o.enc with o.obj's resourceVersion in place
// of encRV where the writer encoded it (o.enc itself when the two have as
// many digits: o.enc is the op's), else api.Encode.
func (o *op) encode() ([]byte, error) {
	if o.enc != nil {
		if raw, err := withResourceVersion(o.enc, o.encRV, o.obj.GetObjectMeta().ResourceVersion); raw != nil || err != nil {
			return raw, err
		}
	}
	return api.Encode(o.obj)
}

// placeholderRV stands for the revision in JSON encoded before the commit
// gives one (preEncode): zeros, as many as the revision the write will
// likely get has digits (the next one's), so that the committer puts the
// revision in place instead of into a copy of the JSON (withResourceVersion).
func placeholderRV(next int64) string {
	n := len(formatRevision(next))
	return zeros[:n]
}

const zeros = "0000000000000000000" // as many as an int64 has digits

// preEncode encodes o.obj (a create's or an update's) in the writer's
// goroutine, with placeholderRV(next) for a resourceVersion it lacks, so
// that the committer, which commits one batch at a time, only puts the
// revision in: the encode of each write is off its path. An object that
// cannot be encoded fails here, as the committer would fail it.
func (o *op) preEncode(next int64) error {
	m := o.obj.GetObjectMeta()
	rv := m.ResourceVersion
	o.encRV = rv
	if rv == "" {
		o.encRV = placeholderRV(next)
		m.ResourceVersion = o.encRV
	}
	enc, err := api.Encode(o.obj)
	m.ResourceVersion = rv
	if err != nil {
		return api.NewInternal(fmt.Errorf("encode %s %s: %w", o.kind.GroupResource(), api.Key(o.namespace, o.name), err))
	}
	o.enc = enc
	return nil
}

// liveCopy gives o (a create or an update) the copy of its object that
// live watchers will share (op.live), when a watcher of its kind is open:
// nobody takes what nobody watches (a replay decodes the history's JSON).
// The writer's goroutine makes it, off the committer's path. share: the
// writer only reads its object once it is committed (CreateEncoded's
// share), so the watchers share the object itself instead of a copy.
// Either shares with other objects' live copies what api.ShareReadOnly
// lets them share (a pod's API access volume): nobody changes it. The
// writer's object, given to the watchers, changes only in which of equal
// values it points at, after its JSON was encoded (preEncode).
func (b *Bolt) liveCopy(o *op, share bool) {
	switch {
	case !b.hub.watching(o.kind.GroupResource()):
		return
	case share:
		o.live = o.obj
	default:
		o.live = api.Clone(o.obj)
	}
	api.ShareReadOnly(o.live)
}

// apply performs one op in tx at revision rev, packing its value with
// packer (value.go). On error it has written nothing.
func apply(tx *bolt.Tx, o *op, rev int64, packer *valuePacker) (hubEvent, error) {
	bucket := o.kind.GroupResource()
	bk, err := tx.CreateBucketIfNotExists([]byte(bucket))
	if err != nil {
		return hubEvent{}, api.NewInternal(fmt.Errorf("bucket %s: %w", bucket, err))
	}
	key := []byte(api.Key(o.namespace, o.name))
	cur := bk.Get(key) // valid only in tx: decoded below, never kept
	ev := hubEvent{bucket: bucket, namespace: o.namespace, rev: rev}
	switch o.typ {
	case opCreate:
		if cur != nil {
			return hubEvent{}, api.NewAlreadyExists(o.kind, o.name)
		}
		ev.typ = api.Added
	case opUpdate:
		if cur == nil {
			return hubEvent{}, api.NewNotFound(o.kind, o.name)
		}
		curJSON, err := packer.unpack(cur)
		var old storedMeta
		if err == nil {
			old, err = readStoredMeta(curJSON)
		}
		if err != nil {
			return hubEvent{}, api.NewInternal(fmt.Errorf("decode stored %s %s: %w", bucket, key, err))
		}
		m := o.obj.GetObjectMeta()
		if o.wantRV != "" && o.wantRV != old.ResourceVersion {
			return hubEvent{}, ErrModified(o.kind, o.name)
		}
		if m.UID != "" && m.UID != old.UID {
			return hubEvent{}, ErrUIDPrecondition(o.kind, o.name, m.UID, old.UID)
		}
		if m.UID == "" {
			m.UID = old.UID
			o.enc = nil // obj changed: encode it
		}
		if m.CreationTimestamp.IsZero() {
			m.CreationTimestamp = old.CreationTimestamp
			o.enc = nil
		}
		ev.typ = api.Modified
	case opDelete:
		if cur == nil {
			return hubEvent{}, api.NewNotFound(o.kind, o.name)
		}
		obj, err := decodeValue(o.kind, cur)
		if err != nil {
			return hubEvent{}, err
		}
		m := obj.GetObjectMeta()
		if o.wantUID != "" && o.wantUID != m.UID {
			return hubEvent{}, ErrUIDPrecondition(o.kind, o.name, o.wantUID, m.UID)
		}
		if o.wantRV != "" && o.wantRV != m.ResourceVersion {
			return hubEvent{}, ErrResourceVersionPrecondition(o.kind, o.name, o.wantRV, m.ResourceVersion)
		}
		o.obj = obj
		ev.typ = api.Deleted
	}
	m := o.obj.GetObjectMeta()
	prevRV := m.ResourceVersion
	m.ResourceVersion = formatRevision(rev)
	raw, err := o.encode()
	if err != nil {
		m.ResourceVersion = prevRV
		return hubEvent{}, api.NewInternal(fmt.Errorf("encode %s %s: %w", bucket, key, err))
	}
	stored, z := packer.pack(raw) // a delete's for the watch history alone
	if o.typ == opDelete {
		err = bk.Delete(key)
	} else {
		err = bk.Put(key, stored)
	}
	if err != nil {
		m.ResourceVersion = prevRV
		return hubEvent{}, api.NewInternal(fmt.Errorf("write %s %s: %w", bucket, key, err))
	}
	ev.raw, ev.z = raw, z
	if o.typ != opDelete {
		o.raw = raw
		if o.live != nil {
			lm := o.live.GetObjectMeta()
			lm.ResourceVersion, lm.UID, lm.CreationTimestamp = m.ResourceVersion, m.UID, m.CreationTimestamp
			ev.obj = o.live
		}
	}
	return ev, nil
}

func putRevision(buf []byte, rev int64) { binary.BigEndian.PutUint64(buf, uint64(rev)) }
