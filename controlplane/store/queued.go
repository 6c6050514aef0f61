package store

import (
	"context"
	"errors"
	"fmt"

	"skiff.dev/skiff/api"
)

// Writes that ride in one commit
//
// ResourceQuota admission charges a quota before the create it admits is
// stored (controlplane/apiserver/admission_quota.go). Made one after the
// other, the two writes are two commits, two fsyncs, in every create's
// wait. A Chainer takes the quota's write without waiting for its commit
// (UpdateQueued) and then the create made to depend on it
// (CreateEncodedAfter): the committer applies the create only when the
// write it depends on was applied (queued first, it is always applied
// first, in the same batch or an earlier one), so the two usually share
// one commit, and a create never stands without its charge.

// ErrDependencyFailed is the error of a write made to depend on another
// (CreateEncodedAfter) when that one failed: nothing was written. It wraps
// the other write's error.
var ErrDependencyFailed = errors.New("a write it depends on failed")

// Queued is a write handed to a store whose result may not be known yet.
type Queued struct {
	o   *op // Bolt's, queued to its committer; nil for a write already made (Done)
	obj api.Object
	err error
}

// Done is a Queued write already made, with its result: what a store
// without a committer gives (the etcd backend).
func Done(obj api.Object, err error) *Queued { return &Queued{obj: obj, err: err} }

// Wait returns the write's result once it is known (committed, or failed).
func (q *Queued) Wait() (api.Object, error) {
	if q.o != nil {
		<-q.o.done
		if q.o.err != nil {
			return nil, q.o.err
		}
		return q.o.obj, nil
	}
	return q.obj, q.err
}

// WaitAll waits for every write of qs and returns nil when all were made,
// else ErrDependencyFailed wrapping the first failure.
func WaitAll(qs []*Queued) error {
	var first error
	for _, q := range qs {
		if _, err := q.Wait(); err != nil && first == nil {
			first = dependencyFailed(err)
		}
	}
	return first
}

func dependencyFailed(err error) error { return fmt.Errorf("%w: %w", ErrDependencyFailed, err) }

// Chainer is a store whose writes can depend on writes still queued
// (Bolt): quota admission's charge and the create it admits commit in one
// batch instead of one after the other.
type Chainer interface {
	// UpdateQueued is Update that returns once the write is queued.
	UpdateQueued(ctx context.Context, obj api.Object) (*Queued, error)
	// CreateEncodedAfter is EncodingCreator's CreateEncoded that writes
	// nothing and fails with ErrDependencyFailed unless every write of
	// after was made; after's writes are this store's.
	CreateEncodedAfter(ctx context.Context, obj api.Object, after []*Queued, share bool) (api.Object, []byte, error)
}

// UpdateQueued is Update that returns once the write is queued to the
// committer (store.Chainer); Wait gives its result.
func (b *Bolt) UpdateQueued(ctx context.Context, obj api.Object) (*Queued, error) {
	o, err := b.updateOp(obj)
	if err != nil {
		return nil, err
	}
	if err := b.enqueue(ctx, o); err != nil {
		return nil, err
	}
	return &Queued{o: o}, nil
}

// CreateEncodedAfter is CreateEncoded of a create that depends on the
// writes of after (store.Chainer): the committer applies it only when each
// of them was applied, else fails it with ErrDependencyFailed.
func (b *Bolt) CreateEncodedAfter(ctx context.Context, obj api.Object, after []*Queued, share bool) (api.Object, []byte, error) {
	var deps []*op
	for _, q := range after {
		if q.o == nil {
			if q.err != nil {
				return nil, nil, dependencyFailed(q.err)
			}
			continue
		}
		deps = append(deps, q.o)
	}
	k, err := prepareOwned(obj)
	if err != nil {
		return nil, nil, err
	}
	return b.create(ctx, k, obj, true, share, deps)
}

// afterErr is the error of o when a write it depends on failed. Those
// were queued before o, so the committer applied each of them (in this
// batch, or in one before) before it applies o: their errors are known.
func (o *op) afterErr() error {
	for _, d := range o.after {
		if d.err != nil {
			return dependencyFailed(d.err)
		}
	}
	return nil
}
