package kueue

import (
	"errors"
	"fmt"
	"time"
)

// Config of the queue manager, the parts of Kueue's Configuration skiff has.
type Config struct {
	// WaitForPodsReady: all-or-nothing admission with a timeout.
	WaitForPodsReady WaitForPodsReady
}

// WaitForPodsReady is Kueue's waitForPodsReady: a workload whose pods are
// not all ready (or succeeded) within Timeout of its admission is evicted
// (Evicted, reason PodsReadyTimeout) and queued again after a backoff of
// BackoffBase·2^(n-1) (at most BackoffMax) for its n-th eviction.
type WaitForPodsReady struct {
	// Enable: on by default, as in Kueue 0.19.
	Enable bool
	// Timeout: Kueue's default is 5 minutes; skiff's is 2 minutes, so that
	// a lab sees a stuck job evicted within the lesson.
	Timeout time.Duration
	// BackoffBase: Kueue's default is 60 s; skiff's is 10 s for the same
	// reason.
	BackoffBase time.Duration
	// BackoffMax caps the backoff (Kueue: 3600 s).
	BackoffMax time.Duration
	// BackoffLimitCount: evictions after which the workload is deactivated
	// (Kueue: unset, requeue forever); 0 means unlimited.
	BackoffLimitCount int32
}

// DefaultConfig is the configuration `skiff server` runs with.
func DefaultConfig() Config {
	return Config{WaitForPodsReady: WaitForPodsReady{
		Enable:      true,
		Timeout:     2 * time.Minute,
		BackoffBase: 10 * time.Second,
		BackoffMax:  time.Hour,
	}}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	w := c.WaitForPodsReady
	if w.Enable {
		if w.Timeout <= 0 {
			errs = append(errs, fmt.Errorf("waitForPodsReady.timeout %s: must be positive", w.Timeout))
		}
		if w.BackoffBase <= 0 {
			errs = append(errs, fmt.Errorf("waitForPodsReady.requeuingStrategy.backoffBaseSeconds %s: must be positive", w.BackoffBase))
		}
		if w.BackoffMax < w.BackoffBase {
			errs = append(errs, fmt.Errorf("waitForPodsReady.requeuingStrategy.backoffMaxSeconds %s: must be at least the base %s", w.BackoffMax, w.BackoffBase))
		}
		if w.BackoffLimitCount < 0 {
			errs = append(errs, fmt.Errorf("waitForPodsReady.requeuingStrategy.backoffLimitCount %d: must not be negative", w.BackoffLimitCount))
		}
	}
	return errors.Join(errs...)
}

// backoff is the wait before the n-th requeue (n from 1).
func (w WaitForPodsReady) backoff(n int32) time.Duration {
	d := w.BackoffBase
	for i := int32(1); i < n && d < w.BackoffMax; i++ {
		d *= 2
	}
	return min(d, w.BackoffMax)
}
