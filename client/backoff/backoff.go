// Package backoff is skiff's one exponential backoff: how long to wait
// before trying again something that failed. The wait after the first
// failure is Initial; each further consecutive failure doubles it, up to
// Max; a success starts again from Initial. No jitter: a lab cluster has a
// handful of clients, and a student can read the numbers off the logs.
//
// Every retry in skiff uses it, each with its own numbers:
//
//	who                          Initial..Max   counts                  starts over when
//	client.Loop                  50ms..1m       failures of a key       the key reconciles
//	client.Informer              200ms..30s     failed lists, watches   a watch brings events
//	scheduler backoffQ           1s..10s        scheduling attempts     never (the pod leaves the queue)
//	podworker CrashLoopBackOff   10s..5m        restarts (1st at once)  the container ran 10 minutes
//	podworker ImagePullBackOff   10s..5m        failed pulls            the pull succeeds
//	gpuplugin registration       100ms..5s      failed registrations    one held for 30s
//	agent device write           200ms..5s      failed Node writes      a write lands
//	containerd wait, events      100ms..2s, 5s  failed calls            containerd answers
//	etcd join, promote, remove   1s..1s         503 answers (busy)      the cluster takes it
//
// The Kubernetes numbers (scheduler, kubelet) are Kubernetes' defaults.
//
// # Pieces
//
//   - Policy.Delay(n) is the formula, a pure function of the number of
//     consecutive failures. Callers that keep their own count (per key, per
//     pod, per container) use it directly.
//   - Backoff counts the failures of one retry loop and sleeps out each
//     delay on an injectable clock (k8s.io/utils/clock), so tests need no
//     real sleeps. Backoff.Retry is the whole loop: try, and while the
//     error is one to retry, wait and try again.
//
// # Why not client-go's
//
// k8s.io/client-go/util/flowcontrol.Backoff (what the kubelet uses) keeps
// per-key entries stamped with its own clock and starts a key over after
// 2×Max without a failure; k8s.io/apimachinery/pkg/util/wait.Backoff is a
// value that mutates as it steps. Neither answers "how long after the n-th
// failure?", which the scheduler queue (it orders a heap by expiry) and the
// pod worker (whose timestamps come from the runtime, not a clock) need.
// Their doubling is the same; Delay is that doubling, once, for everyone.
package backoff

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/clock"
)

// Policy is an exponential backoff: Initial after the first failure,
// doubled after each further one, never more than Max. A Max below
// Initial counts as Initial (the delay never grows); an Initial of zero or
// less means no delay at all.
type Policy struct {
	// Initial is the delay after the first failure.
	Initial time.Duration
	// Max caps the delay.
	Max time.Duration
}

// Delay returns the wait after failures consecutive failures: 0 for none,
// Initial for one, 2×Initial for two, 4×Initial for three, ... capped at
// Max. It never overflows, however large failures is.
func (p Policy) Delay(failures int) time.Duration {
	if failures <= 0 || p.Initial <= 0 {
		return 0
	}
	limit := max(p.Max, p.Initial)
	d := p.Initial
	for i := 1; i < failures; i++ {
		if d > limit-d { // d doubled would pass the cap (subtraction cannot overflow)
			return limit
		}
		d += d
	}
	return d
}

// Backoff counts the consecutive failures of one retry loop (a watch, a
// registration, a subscription) and waits out the delay of each. Set
// Policy; the zero Clock is the real one. A Backoff belongs to the one
// goroutine that runs the loop: it is not safe for concurrent use.
type Backoff struct {
	Policy
	// Clock sleeps; nil is the real clock. Tests pass
	// k8s.io/utils/clock/testing.FakeClock.
	Clock clock.Clock

	failures int
}

// Next counts a failure and returns the delay before the next try.
func (b *Backoff) Next() time.Duration {
	if b.failures < maxFailures {
		b.failures++
	}
	return b.Delay(b.failures)
}

// maxFailures bounds the count so it cannot overflow: 63 doublings of even
// 1ns pass any time.Duration, so from there on every delay is Max anyway.
const maxFailures = 64

// Failures returns the consecutive failures counted since the last Reset.
func (b *Backoff) Failures() int { return b.failures }

// Reset forgets the failures: the thing worked. The next delay is Initial.
func (b *Backoff) Reset() { b.failures = 0 }

// Sleep waits d on b's clock or until ctx ends; it reports whether d
// passed (false: ctx ended first, stop retrying).
func (b *Backoff) Sleep(ctx context.Context, d time.Duration) bool {
	var clk clock.Clock = clock.RealClock{}
	if b.Clock != nil {
		clk = b.Clock
	}
	if ctx.Err() != nil {
		return false
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// Wait counts a failure and sleeps its delay: Sleep(ctx, Next()).
func (b *Backoff) Wait(ctx context.Context) bool { return b.Sleep(ctx, b.Next()) }

// Retry calls try until it returns nil or an error that retryable does not
// want retried, waiting b's delays in between, and returns try's last
// error. When ctx ends first it returns that last error, saying it gave up.
// onRetry, when set, sees each error about to be retried (to log it, or
// tell a user once) before the wait.
func (b *Backoff) Retry(ctx context.Context, retryable func(error) bool, onRetry func(error), try func(context.Context) error) error {
	start := time.Now()
	for {
		err := try(ctx)
		if err == nil || !retryable(err) {
			return err
		}
		if onRetry != nil {
			onRetry(err)
		}
		if !b.Wait(ctx) {
			return fmt.Errorf("%w (gave up after %v)", err, time.Since(start).Round(time.Second))
		}
	}
}
