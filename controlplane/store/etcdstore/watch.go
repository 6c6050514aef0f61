package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
)

// Watch streams changes to a kind (in namespace, or all when "") after
// rev; 0 means from the newest revision this store has seen. It fails with
// Gone when rev was compacted. The channel closes when ctx ends, the store
// closes, etcd ends the watch, or the watcher falls WatchBuffer events
// behind; resume from the last revision seen.
func (s *Store) Watch(ctx context.Context, kind *api.Kind, namespace string, rev int64) (<-chan store.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if rev < 0 {
		return nil, store.ErrBadWatchRevision(rev)
	}
	if !kind.Namespaced {
		namespace = ""
	}
	prefix := s.rangePrefix(kind, namespace)
	if rev == 0 {
		rev = s.Revision()
	} else if err := s.checkCompacted(ctx, prefix, rev); err != nil {
		return nil, err
	}
	// The watch starts at rev itself, not rev+1: etcd keeps the revisions
	// from its compaction revision on, so a watch from the compaction
	// revision works, as the interface wants, and the changes at rev are
	// skipped below.
	wctx, cancel := context.WithCancel(ctx)
	wch := s.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithPrevKV())
	out := make(chan store.Event)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(out)
		defer cancel()
		s.serveWatch(ctx, cancel, kind, rev, wch, out)
	}()
	return out, nil
}

// checkCompacted fails with Gone when rev is older than etcd's compaction.
func (s *Store) checkCompacted(ctx context.Context, prefix string, rev int64) error {
	_, err := s.cli.Get(ctx, prefix, clientv3.WithRev(rev), clientv3.WithCountOnly())
	switch {
	case err == nil, errors.Is(err, rpctypes.ErrFutureRev): // a watch from the future waits
		return nil
	case errors.Is(err, rpctypes.ErrCompacted):
		return store.ErrWatchTooOld(rev, s.compactRevision(ctx, prefix, rev))
	default:
		return s.fail(ctx, "watch "+prefix, err)
	}
}

// compactRevision is etcd's compaction revision, which a watch from a
// compacted revision reports (0 when it does not answer in a few seconds).
func (s *Store) compactRevision(ctx context.Context, prefix string, rev int64) int64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for resp := range s.cli.Watch(ctx, prefix, clientv3.WithRev(rev)) {
		if resp.CompactRevision != 0 {
			return resp.CompactRevision
		}
	}
	return 0
}

// serveWatch decodes etcd's events and delivers them in order until ctx
// (the caller's) ends. It queues at most WatchBuffer of them (rounded up to
// a whole revision): past that the watcher is too slow, stop cancels its
// etcd watch, and it delivers what it kept, then closes; the caller resumes
// from the last revision it saw, without a gap.
func (s *Store) serveWatch(ctx context.Context, stop context.CancelFunc, kind *api.Kind, after int64, wch clientv3.WatchChan, out chan<- store.Event) {
	var queue []store.Event
	ending := false // no more events from etcd: deliver the queue, then close
	for {
		if ending && len(queue) == 0 {
			return
		}
		var (
			send chan<- store.Event
			head store.Event
			recv = wch
		)
		if len(queue) > 0 {
			send, head = out, queue[0]
		}
		if ending {
			recv = nil
		}
		select {
		case resp, ok := <-recv:
			if !ok {
				ending = true
				continue
			}
			if err := resp.Err(); err != nil {
				if ctx.Err() == nil {
					s.log.Warn("watch ended by etcd", "kind", kind.GroupResource(), "err", err)
				}
				ending = true
				continue
			}
			s.observe(resp.Header)
			for _, ev := range resp.Events {
				if ev.Kv.ModRevision <= after {
					continue
				}
				e, err := s.event(kind, ev)
				if err != nil {
					s.log.Error("watch: drop undecodable event", "kind", kind.GroupResource(), "key", string(ev.Kv.Key), "revision", ev.Kv.ModRevision, "err", err)
					continue
				}
				queue = append(queue, e)
			}
			if len(queue) > s.opts.WatchBuffer {
				s.log.Warn("watch: closing a watcher too slow to keep up", "kind", kind.GroupResource(), "queued", len(queue))
				cut := s.opts.WatchBuffer
				for last := queue[cut-1].Revision; cut < len(queue) && queue[cut].Revision == last; cut++ {
				}
				clear(queue[cut:])
				queue = queue[:cut]
				stop()
				ending = true
			}
		case send <- head:
			queue[0] = store.Event{}
			queue = queue[1:]
		case <-ctx.Done():
			return
		case <-s.done:
			return
		}
	}
}

// event turns an etcd event into a store event. A delete carries the
// object's last state (etcd's previous value) with the delete's revision.
func (s *Store) event(kind *api.Kind, ev *clientv3.Event) (store.Event, error) {
	rev := ev.Kv.ModRevision
	if ev.Type == clientv3.EventTypeDelete {
		if ev.PrevKv == nil {
			return store.Event{}, fmt.Errorf("delete without the previous value")
		}
		obj, err := decode(kind, ev.PrevKv.Value, rev)
		if err != nil {
			return store.Event{}, err
		}
		return store.Event{Type: api.Deleted, Object: obj, Revision: rev}, nil
	}
	obj, err := decode(kind, ev.Kv.Value, rev)
	if err != nil {
		return store.Event{}, err
	}
	typ := api.Modified
	if ev.IsCreate() {
		typ = api.Added
	}
	return store.Event{Type: typ, Object: obj, Revision: rev}, nil
}
