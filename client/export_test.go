package client

import "time"

// SetInformerBackoff shortens an informer's retry delays for tests.
func SetInformerBackoff(i *Informer, base, max time.Duration) {
	i.baseBackoff, i.maxBackoff = base, max
}

// BackoffFor exposes the loop's delay after the nth consecutive failure.
func BackoffFor(l *Loop, key string) time.Duration {
	d, _ := l.failed(key)
	return d
}
