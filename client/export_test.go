package client

import (
	"time"

	"skiff.dev/skiff/client/backoff"
)

// SetInformerBackoff shortens an informer's retry delays for tests.
func SetInformerBackoff(i *Informer, base, max time.Duration) {
	i.backoff = backoff.Policy{Initial: base, Max: max}
}

// BackoffFor counts a failure of key and returns the loop's delay before
// its retry.
func BackoffFor(l *Loop, key string) time.Duration {
	d, _ := l.failed(key)
	return d
}

// MustRelist exposes which watch errors make the informer list again.
var MustRelist = mustRelist

// SetRecorderClock makes r read the time from now.
func SetRecorderClock(r *Recorder, now func() time.Time) { r.now = now }
