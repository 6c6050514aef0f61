package store

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Options configure a Bolt store. Zero numeric fields take their default
// (see DefaultOptions); Validate rejects negative ones.
type Options struct {
	// HistorySize is how many watch events are kept in memory for watchers
	// that resume from a revision. 10,000 covers a few minutes of a busy
	// teaching cluster (hundreds of pods) at about 1 KiB each, ~10 MiB.
	HistorySize int
	// WatchBuffer is how many events may wait for one watcher before it is
	// closed as too slow. 1,000 absorbs a burst (a deployment scaled by
	// hundreds) while a reader is busy, and bounds memory per watcher.
	WatchBuffer int
	// MaxBatch is the most writes committed in one transaction. 1,000 keeps
	// a batch (and its transaction's dirty pages) to about 1 MiB of pods.
	MaxBatch int
	// MaxBatchDelay is how long the committer may wait for more writes when
	// fewer are queued than the previous batch held: that batch's writers,
	// just woken, are usually about to send their next write, and one more
	// fsync costs more than the wait. It never waits longer than the
	// previous commit took, and a lone writer (previous batch of one) never
	// waits. 2ms: about one commit on an ordinary SSD (bbolt fsyncs twice
	// per commit). 0 never waits.
	MaxBatchDelay time.Duration
	// EventTTL is how long an Event lives after its lastTimestamp (or its
	// creationTimestamp when it has none). One hour, as Kubernetes.
	EventTTL time.Duration
	// SweepInterval is how often expired Events are looked for. One minute:
	// small against the TTL, cheap (one read transaction, and none while
	// no stored Event can have expired: expire.go).
	SweepInterval time.Duration
	// NoSync skips fsync on commit: fast, but a power loss can lose or
	// corrupt recent writes. False by default; for tests and benchmarks.
	NoSync bool
	// Now is the clock, for creationTimestamp and Event expiry. Tests
	// inject one; nil means time.Now.
	Now func() time.Time
	// Logger receives the store's few log lines; nil discards them.
	Logger *slog.Logger
}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		HistorySize:   10000,
		WatchBuffer:   1000,
		MaxBatch:      1000,
		MaxBatchDelay: 2 * time.Millisecond,
		EventTTL:      time.Hour,
		SweepInterval: time.Minute,
		Now:           time.Now,
		Logger:        slog.New(slog.DiscardHandler),
	}
}

// Validate reports every problem with o at once.
func (o Options) Validate() error {
	var errs []error
	if o.HistorySize < 0 {
		errs = append(errs, fmt.Errorf("history size %d: must not be negative", o.HistorySize))
	}
	if o.WatchBuffer < 0 {
		errs = append(errs, fmt.Errorf("watch buffer %d: must not be negative", o.WatchBuffer))
	}
	if o.MaxBatch < 0 {
		errs = append(errs, fmt.Errorf("max batch %d: must not be negative", o.MaxBatch))
	}
	if o.MaxBatchDelay < 0 {
		errs = append(errs, fmt.Errorf("max batch delay %v: must not be negative", o.MaxBatchDelay))
	}
	if o.EventTTL < 0 {
		errs = append(errs, fmt.Errorf("event ttl %v: must not be negative", o.EventTTL))
	}
	if o.SweepInterval < 0 {
		errs = append(errs, fmt.Errorf("sweep interval %v: must not be negative", o.SweepInterval))
	}
	return errors.Join(errs...)
}

// withDefaults fills zero fields from DefaultOptions.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.HistorySize == 0 {
		o.HistorySize = d.HistorySize
	}
	if o.WatchBuffer == 0 {
		o.WatchBuffer = d.WatchBuffer
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = d.MaxBatch
	}
	if o.EventTTL == 0 {
		o.EventTTL = d.EventTTL
	}
	if o.SweepInterval == 0 {
		o.SweepInterval = d.SweepInterval
	}
	if o.Now == nil {
		o.Now = d.Now
	}
	if o.Logger == nil {
		o.Logger = d.Logger
	}
	return o
}
