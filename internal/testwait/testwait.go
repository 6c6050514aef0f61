// Package testwait is how skiff's tests wait for something to happen: poll
// a condition until it holds or a deadline passes, then fail the test saying
// what was awaited (STYLE 18: a bare time.Sleep is never synchronisation).
//
// The deadline is a bound on a slow machine, not a measurement: tests that
// measure time are benchmarks (docs/performance.md).
package testwait

import (
	"testing"
	"time"
)

// Interval is how often a condition is polled.
const Interval = 10 * time.Millisecond

// For polls cond until it returns true, or fails t after timeout with
// "timed out after TIMEOUT waiting for WHAT".
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ForEvery(t, Interval, timeout, what, cond)
}

// ForEvery is For polling every interval instead of Interval: for a cond
// that is costly to ask (an API call, a /proc read) or that samples
// something at a chosen rate while it waits.
func ForEvery(t testing.TB, interval, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	until(t, interval, timeout, func() (bool, string) { return cond(), what })
}

// Until polls cond until it reports true, or fails t after timeout with
// cond's last explanation, so a failure says what the state was, not only
// what was awaited.
func Until(t testing.TB, timeout time.Duration, cond func() (ok bool, why string)) {
	t.Helper()
	until(t, Interval, timeout, cond)
}

func until(t testing.TB, interval, timeout time.Duration, cond func() (ok bool, why string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, why)
		}
		time.Sleep(interval) // the poll interval of a deadline-bound wait
	}
}
