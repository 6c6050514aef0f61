package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The TTL-after-finished controller deletes a finished Job (Complete or
// Failed) spec.ttlSecondsAfterFinished after it finished, as Kubernetes'
// ttl-after-finished-controller: the finish time is the terminal
// condition's lastTransitionTime; before deleting, the Job is read again
// from the API (the TTL may have changed), and the delete is Foreground
// with a uid precondition, so its pods go with it and a new Job of the
// same name is left alone.
type TTLAfterFinishedController struct {
	client client.Interface
	jobs   Lister // *api.Job
	log    *slog.Logger
	now    func() time.Time
}

const ttlAfterFinishedControllerName = "ttl-after-finished-controller"

// NewTTLAfterFinishedController returns the controller over a cache of jobs.
func NewTTLAfterFinishedController(c client.Interface, jobs Lister, log *slog.Logger) *TTLAfterFinishedController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &TTLAfterFinishedController{client: c, jobs: jobs, log: log.With("controller", ttlAfterFinishedControllerName), now: time.Now}
}

// Reconcile implements client.Reconciler for the job key.
func (r *TTLAfterFinishedController) Reconcile(ctx context.Context, key string) error {
	ns, name := client.SplitKey(key)
	job, ok := getAs[*api.Job](r.jobs, ns, name)
	if !ok || job.DeletionTimestamp != nil || job.Spec.TTLSecondsAfterFinished == nil {
		return nil
	}
	wait, expired := r.expiry(job)
	if !expired {
		if wait > 0 {
			logReconcile(r.log, false, key, "finished", fmt.Sprintf("deleted in %s", wait.Round(time.Second)), "none")
			return client.RequeueAfter(wait)
		}
		return nil // not finished
	}
	// The cache may be old: decide again on the job as the API has it.
	fresh, err := r.client.Get(ctx, jobKind(), ns, name)
	if api.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("job %s: get: %w", key, err)
	}
	fj := fresh.(*api.Job)
	if fj.UID != job.UID || fj.Spec.TTLSecondsAfterFinished == nil {
		return nil
	}
	if wait, expired := r.expiry(fj); !expired {
		return client.RequeueAfter(wait)
	}
	uid := fj.UID
	err = r.client.Delete(ctx, jobKind(), ns, name, api.DeleteOptions{PropagationPolicy: "Foreground", Preconditions: &api.Preconditions{UID: &uid}})
	if err != nil && !api.IsNotFound(err) && !api.IsConflict(err) {
		return fmt.Errorf("job %s: delete after ttl: %w", key, err)
	}
	logReconcile(r.log, true, key, "finished, ttl expired", "deleted", "deleted the job (propagation Foreground)")
	return nil
}

// expiry says how long until the finished job's TTL expires, or that it has.
func (r *TTLAfterFinishedController) expiry(job *api.Job) (time.Duration, bool) {
	var finished time.Time
	for _, c := range job.Status.Conditions {
		if (c.Type == api.JobComplete || c.Type == api.JobFailed) && c.Status == api.ConditionTrue {
			finished = c.LastTransitionTime.Time
		}
	}
	if finished.IsZero() {
		return 0, false
	}
	left := finished.Add(time.Duration(*job.Spec.TTLSecondsAfterFinished) * time.Second).Sub(r.now())
	if left > 0 {
		return left, false
	}
	return 0, true
}
