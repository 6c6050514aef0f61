package etcdstore

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Options configure a Store. Zero fields take their default (see
// DefaultOptions); Validate rejects bad ones.
type Options struct {
	// Prefix of every key: "/skiff/registry/" (Kubernetes uses
	// "/registry/"; a different one lets skiff share an etcd). It must
	// start and end with "/".
	Prefix string
	// EventTTL is how long an Event lives after its last write. One hour,
	// as Kubernetes (its --event-ttl) and the bbolt store.
	EventTTL time.Duration
	// WatchBuffer is how many events may wait for one watcher before it is
	// closed as too slow (it then resumes from its last revision). 1,000,
	// as the bbolt store: a burst of hundreds of pods, bounded memory.
	WatchBuffer int
	// CompactInterval is how often the store compacts etcd's history
	// (compact.go): every interval, to the revision of one interval
	// before, taking turns with the other servers through CompactKey.
	// DefaultOptions has 5 minutes, kube-apiserver's
	// --etcd-compaction-interval: a watch or list that falls more than
	// that behind is Gone and lists again, as against Kubernetes. Unlike
	// the other fields, 0 is not replaced by the default: it means no
	// compaction (tests that read old revisions; migrate, which runs for
	// seconds).
	CompactInterval time.Duration
	// Now is the clock for creationTimestamp; nil means time.Now. (Event
	// expiry runs on etcd's clock.)
	Now func() time.Time
	// Logger receives the store's few log lines; nil discards them.
	Logger *slog.Logger
}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		Prefix:          "/skiff/registry/",
		EventTTL:        time.Hour,
		WatchBuffer:     1000,
		CompactInterval: 5 * time.Minute,
		Now:             time.Now,
		Logger:          slog.New(slog.DiscardHandler),
	}
}

// Validate reports every problem with o at once.
func (o Options) Validate() error {
	var errs []error
	if o.Prefix != "" && (!strings.HasPrefix(o.Prefix, "/") || !strings.HasSuffix(o.Prefix, "/")) {
		errs = append(errs, fmt.Errorf("prefix %q: must start and end with \"/\"", o.Prefix))
	}
	if o.EventTTL < 0 {
		errs = append(errs, fmt.Errorf("event ttl %v: must not be negative", o.EventTTL))
	} else if o.EventTTL > 0 && o.EventTTL < time.Second {
		errs = append(errs, fmt.Errorf("event ttl %v: must be at least 1s (etcd leases count seconds)", o.EventTTL))
	}
	if o.WatchBuffer < 0 {
		errs = append(errs, fmt.Errorf("watch buffer %d: must not be negative", o.WatchBuffer))
	}
	if o.CompactInterval < 0 {
		errs = append(errs, fmt.Errorf("compact interval %v: must not be negative (0 means no compaction)", o.CompactInterval))
	}
	return errors.Join(errs...)
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Prefix == "" {
		o.Prefix = d.Prefix
	}
	if o.EventTTL == 0 {
		o.EventTTL = d.EventTTL
	}
	if o.WatchBuffer == 0 {
		o.WatchBuffer = d.WatchBuffer
	}
	if o.Now == nil {
		o.Now = d.Now
	}
	if o.Logger == nil {
		o.Logger = d.Logger
	}
	return o
}
