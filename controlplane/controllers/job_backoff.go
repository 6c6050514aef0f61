package controllers

import (
	"slices"
	"time"

	"skiff.dev/skiff/api"
)

// The pod failure backoff, as Kubernetes' backoff_utils.go: a
// replacement for a failed pod waits, per job (and per index with
// backoffLimitPerIndex), from the last failure.

// Pod failure backoff, as Kubernetes' DefaultJobPodFailureBackOff and
// MaxJobPodFailureBackOff: a replacement for a failed pod waits 10 s,
// doubling with each further failure since the last success, up to 10 min.
const (
	jobPodFailureBackoff    = 10 * time.Second
	jobPodFailureBackoffMax = 10 * time.Minute
)

// finishedTime: the latest container finish, else the deletion time.
func finishedTime(p *api.Pod) time.Time {
	var t time.Time
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if cs.State.Terminated != nil && cs.State.Terminated.FinishedAt.After(t) {
			t = cs.State.Terminated.FinishedAt.Time
		}
	}
	if t.IsZero() && p.DeletionTimestamp != nil {
		t = p.DeletionTimestamp.Time
	}
	return t
}

// backoffRecord: failures since the last success and the last failure's
// time, for the pod replacement backoff.
type backoffRecord struct {
	failures int
	last     time.Time
}

func (r *JobController) backoffFor(key string) backoffRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.backoff[key]
}

func (r *JobController) setBackoff(key string, b backoffRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backoff[key] = b
}

// update adds newly finished pods, as Kubernetes' newBackoffRecord.
func (b backoffRecord) update(succeeded, failed []*api.Pod) backoffRecord {
	switch {
	case len(succeeded) == 0 && len(failed) == 0:
		return b
	case len(succeeded) == 0:
		return backoffRecord{failures: b.failures + len(failed), last: finishedTime(failed[len(failed)-1])}
	case len(failed) == 0:
		return backoffRecord{}
	}
	lastSuccess := finishedTime(succeeded[len(succeeded)-1])
	n := 0
	for _, p := range failed {
		if finishedTime(p).After(lastSuccess) {
			n++
		}
	}
	if n == 0 {
		return backoffRecord{}
	}
	return backoffRecord{failures: n, last: finishedTime(failed[len(failed)-1])}
}

// remaining is how long a replacement still waits: 10 s doubling per
// failure after the first, capped at 10 min, from the last failure.
func (b backoffRecord) remaining(now time.Time) time.Duration {
	if b.failures == 0 {
		return 0
	}
	d := jobPodFailureBackoff
	for i := 1; i < b.failures && d < jobPodFailureBackoffMax; i++ {
		d *= 2
	}
	d = min(d, jobPodFailureBackoffMax)
	if elapsed := now.Sub(b.last); elapsed < d {
		return d - elapsed
	}
	return 0
}

// Pod failure backoff, as Kubernetes' DefaultJobPodFailureBackOff and
