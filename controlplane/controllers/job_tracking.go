package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"skiff.dev/skiff/api"
)

// Counting a Job's finished pods exactly once, as Kubernetes' job
// controller tracks them (tracking_utils.go and the finalizer handling of
// job_controller.go): the batch.kubernetes.io/job-tracking finalizer,
// status.uncountedTerminatedPods, and the expectations that keep a
// reconcile from acting on a cache older than its own writes.

// maxUncountedPods bounds status.uncountedTerminatedPods (Kubernetes: 500).
const maxUncountedPods = 500

// newFinished lists the finished pods not yet counted: they have the
// finalizer, are not in uncountedTerminatedPods and (Indexed) have a
// valid index.
func (r *JobController) newFinished(s *jobSync) (succeeded, failed []*api.Pod) {
	for _, p := range s.pods {
		if !hasTrackingFinalizer(p) || s.removing[p.UID] || s.uncounted.succeeded[p.UID] || s.uncounted.failed[p.UID] {
			continue
		}
		if s.job.IsIndexed() {
			if ix := completionIndex(p); ix < 0 || ix >= int(*s.job.Spec.Completions) {
				continue
			}
		}
		switch {
		case p.Status.Phase == api.PodSucceeded:
			succeeded = append(succeeded, p)
		case isPodFailedForJob(p, s.job):
			failed = append(failed, p)
		}
	}
	sort.Slice(failed, func(i, j int) bool { return finishedTime(failed[i]).Before(finishedTime(failed[j])) })
	sort.Slice(succeeded, func(i, j int) bool { return finishedTime(succeeded[i]).Before(finishedTime(succeeded[j])) })
	return succeeded, failed
}

// track counts finished pods through uncountedTerminatedPods and the
// finalizer (the three steps in the type's doc), writes the interim and
// terminal conditions and the status, and records the terminal events.
func (r *JobController) track(ctx context.Context, s *jobSync, needsFlush bool) error {
	job := s.job
	now := r.now()
	uc := job.Status.UncountedTerminatedPods
	withFinalizer := map[string]bool{}
	for _, p := range s.pods {
		if hasTrackingFinalizer(p) && !s.removing[p.UID] {
			withFinalizer[p.UID] = true
		}
	}
	if countWithoutFinalizers(&job.Status, withFinalizer) {
		needsFlush = true
	}
	release, full, added := s.uncount(withFinalizer)
	if added {
		needsFlush = true
	}
	if job.IsIndexed() && s.storeIndexes() { // job_indexed.go
		needsFlush = true
	}
	if s.interimCondition(now) {
		needsFlush = true
	}
	// a. Flush the uids (and indexes) before removing finalizers.
	if needsFlush {
		if err := r.writeStatus(ctx, s); err != nil {
			return fmt.Errorf("job %s: add uncounted pods to status: %w", s.key, err)
		}
		r.setBackoff(s.key, s.newBackoff)
		needsFlush = false
	}
	// b. Remove the finalizers.
	var rmErrs []error
	if len(release) > 0 {
		r.removing.expect(s.key, release)
		for _, p := range release {
			if err := r.removeFinalizer(ctx, p); err != nil {
				r.removing.observed(s.key, p.UID)
				rmErrs = append(rmErrs, err)
				continue
			}
			delete(withFinalizer, p.UID)
		}
		s.actions = append(s.actions, fmt.Sprintf("counted %s", plural(len(release)-len(rmErrs), "finished pod")))
	}
	// c. Count the uids whose pods lost the finalizer.
	if countWithoutFinalizers(&job.Status, withFinalizer) {
		needsFlush = true
	}
	// The terminal condition, once every pod is counted and none is left.
	done := false
	if s.finished != nil && !full && len(uc.Succeeded)+len(uc.Failed) == 0 && s.terminating == 0 && len(rmErrs) == 0 {
		setJobCondition(job, s.finished.Type, api.ConditionTrue, s.finished.Reason, s.finished.Message, now)
		if s.finished.Type == api.JobComplete {
			t := api.NewTime(now)
			job.Status.CompletionTime = &t
		}
		done, needsFlush = true, true
	}
	if needsFlush {
		if err := r.writeStatus(ctx, s); err != nil {
			return errors.Join(append(rmErrs, fmt.Errorf("job %s: remove uncounted pods from status: %w", s.key, err))...)
		}
		if done {
			if s.finished.Type == api.JobComplete {
				r.events.Eventf(ctx, job, api.EventNormal, "Completed", "Job completed")
			} else {
				r.events.Eventf(ctx, job, api.EventWarning, s.finished.Reason, "%s", s.finished.Message)
			}
			s.actions = append(s.actions, "marked "+s.finished.Type)
		}
	}
	return errors.Join(rmErrs...)
}

// uncount picks the pods to release from the tracking finalizer (every
// finished one, and all of them once the job is finished or deleted) and
// adds the uids of the newly finished ones to uncountedTerminatedPods (an
// Indexed job's succeeded pods count through completedIndexes instead).
// full: uncountedTerminatedPods reached maxUncountedPods, the rest waits
// for the next reconcile. changed: the status needs a write.
func (s *jobSync) uncount(withFinalizer map[string]bool) (release []*api.Pod, full, changed bool) {
	job := s.job
	uc := job.Status.UncountedTerminatedPods
	pods := slices.Clone(s.pods)
	if job.IsIndexed() {
		sort.SliceStable(pods, func(i, j int) bool { return completionIndex(pods[i]) < completionIndex(pods[j]) })
	}
	for _, p := range pods {
		if !withFinalizer[p.UID] {
			continue
		}
		failed := isPodFailedForJob(p, job)
		if !(job.DeletionTimestamp != nil || s.finished != nil || p.Status.Phase == api.PodSucceeded || failed) {
			continue // still running: keeps its finalizer
		}
		release = append(release, p)
		switch {
		case p.Status.Phase == api.PodSucceeded && !s.uncounted.failed[p.UID]:
			if job.IsIndexed() {
				ix := completionIndex(p)
				if ix >= 0 && ix < int(*job.Spec.Completions) && !s.prevIndexes[ix] {
					changed = true
				}
			} else if !s.uncounted.succeeded[p.UID] {
				uc.Succeeded = append(uc.Succeeded, p.UID)
				changed = true
			}
		case failed || (s.finished != nil && s.finished.Type != api.JobSuccessCriteriaMet && s.finished.Type != api.JobComplete):
			// Once the job has failed, every pod not succeeded counts as failed.
			ix := completionIndex(p)
			if !s.uncounted.failed[p.UID] && (!job.IsIndexed() || (ix >= 0 && ix < int(*job.Spec.Completions))) {
				if _, count, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p); count {
					uc.Failed = append(uc.Failed, p.UID)
					changed = true
				}
			}
		}
		if len(uc.Succeeded)+len(uc.Failed) >= maxUncountedPods {
			return release, true, changed
		}
	}
	return release, false, changed
}

// interimCondition writes the decided interim condition (FailureTarget,
// SuccessCriteriaMet), which goes first, before any finalizer is removed,
// and turns s.finished into the terminal one that follows once every pod
// is counted (Failed, Complete). It reports a change to write.
func (s *jobSync) interimCondition(now time.Time) bool {
	job := s.job
	switch {
	case s.finished != nil && s.finished.Type == api.JobFailureTarget:
		job.Status.Conditions = append(job.Status.Conditions, *s.finished)
		s.finished = newJobCondition(api.JobFailed, s.finished.Reason, s.finished.Message, now)
		return true
	case s.finished != nil && s.finished.Type == api.JobSuccessCriteriaMet:
		changed := false
		if job.Condition(api.JobSuccessCriteriaMet) == nil {
			job.Status.Conditions = append(job.Status.Conditions, *s.finished)
			changed = true
		}
		s.finished = newJobCondition(api.JobComplete, s.finished.Reason, s.finished.Message, now)
		return changed
	}
	return false
}

// countWithoutFinalizers moves the uids of pods that no longer carry the
// finalizer from uncountedTerminatedPods to the counters.
func countWithoutFinalizers(st *api.JobStatus, withFinalizer map[string]bool) bool {
	uc := st.UncountedTerminatedPods
	keep := func(uids []string) []string {
		var out []string
		for _, u := range uids {
			if withFinalizer[u] {
				out = append(out, u)
			}
		}
		return out
	}
	changed := false
	if k := keep(uc.Succeeded); len(k) != len(uc.Succeeded) {
		st.Succeeded += int32(len(uc.Succeeded) - len(k))
		uc.Succeeded, changed = k, true
	}
	if k := keep(uc.Failed); len(k) != len(uc.Failed) {
		st.Failed += int32(len(uc.Failed) - len(k))
		uc.Failed, changed = k, true
	}
	return changed
}

// writeStatus writes the job's status and keeps the answer's resourceVersion.
func (r *JobController) writeStatus(ctx context.Context, s *jobSync) error {
	out, err := r.client.UpdateStatus(ctx, s.job)
	if err != nil {
		return err
	}
	r.written.superseded(s.key, s.job.ResourceVersion)
	s.job.ResourceVersion = out.GetObjectMeta().ResourceVersion
	return nil
}

// removeFinalizer takes the job-tracking finalizer off a pod; a pod that is
// gone counts as done. A conflict (the agent wrote the pod's status) reads
// the pod again.
func (r *JobController) removeFinalizer(ctx context.Context, p *api.Pod) error {
	cur := p
	for attempt := 0; ; attempt++ {
		u := api.Clone(cur)
		u.Finalizers = slices.DeleteFunc(u.Finalizers, func(f string) bool { return f == api.JobTrackingFinalizer })
		_, err := r.client.Update(ctx, u)
		switch {
		case err == nil || api.IsNotFound(err):
			return nil
		case api.IsConflict(err) && attempt < 3:
			fresh, gerr := r.client.Get(ctx, podKind(), p.Namespace, p.Name)
			if api.IsNotFound(gerr) {
				return nil
			}
			if gerr != nil {
				return fmt.Errorf("remove finalizer of pod %s: %w", api.KeyOf(p), gerr)
			}
			if fresh.GetObjectMeta().UID != p.UID || !hasTrackingFinalizer(fresh.(*api.Pod)) {
				return nil
			}
			cur = fresh.(*api.Pod)
		default:
			return fmt.Errorf("remove finalizer of pod %s: %w", api.KeyOf(p), err)
		}
	}
}

// releaseOrphans removes the finalizer of pods whose controller is a Job
// of this name that no longer exists (job is nil, or has another uid).
func (r *JobController) releaseOrphans(ctx context.Context, ns, name string, job *api.Job) error {
	var errs []error
	for _, p := range listAs[*api.Pod](r.pods.ListBy(nil, ns)) {
		ref := api.ControllerOf(p)
		if ref == nil || ref.Kind != "Job" || ref.Name != name || !hasTrackingFinalizer(p) {
			continue
		}
		if job != nil && ref.UID == job.UID {
			continue
		}
		if err := r.removeFinalizer(ctx, p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// releaseFinished removes the finalizers a finished job's pods still carry.
func (r *JobController) releaseFinished(ctx context.Context, job *api.Job) error {
	var errs []error
	for _, p := range listAs[*api.Pod](r.pods.ListBy(nil, job.Namespace)) {
		if api.IsControlledBy(p, job.UID) && hasTrackingFinalizer(p) {
			if err := r.removeFinalizer(ctx, p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func hasTrackingFinalizer(p *api.Pod) bool {
	return slices.Contains(p.Finalizers, api.JobTrackingFinalizer)
}

func setOf(uids []string) map[string]bool {
	m := make(map[string]bool, len(uids))
	for _, u := range uids {
		m[u] = true
	}
	return m
}

// finalizerExpectations: per job, the uids of pods whose finalizer was
// removed while the cache may still show it. They are skipped (not counted
// again) until the cache shows the pod without it, or gone.
type finalizerExpectations struct {
	mu sync.Mutex
	m  map[string]map[string]bool // job key → uid → true
}

func (e *finalizerExpectations) expect(key string, pods []*api.Pod) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m[key] == nil {
		e.m[key] = map[string]bool{}
	}
	for _, p := range pods {
		e.m[key][p.UID] = true
	}
}

func (e *finalizerExpectations) observed(key, uid string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m[key], uid)
}

func (e *finalizerExpectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}

// pending drops the uids the cache agrees with and returns the rest.
func (e *finalizerExpectations) pending(key, namespace string, pods Lister) map[string]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	set := e.m[key]
	if len(set) == 0 {
		return nil
	}
	still := map[string]bool{}
	for _, o := range pods.ListBy(nil, namespace) {
		if p, ok := o.(*api.Pod); ok && set[p.UID] && hasTrackingFinalizer(p) {
			still[p.UID] = true
		}
	}
	e.m[key] = still
	return maps.Clone(still)
}

// statusExpectations: per job, the resourceVersions that the controller's
// own status writes replaced. The job controller's counterpart of the
// pod expectations above, for its own object: Kubernetes' job controller
// keeps finishedJobExpectations for the same reason (a finished job whose
// Complete condition the cache does not show yet must not get pods).
//
// Each write is an update with the version it read as precondition, so
// the versions from the one a reconcile read to the one its last write
// produced form one chain, every one but the last replaced by this
// controller. A cache moves only forward: a cached job at any other
// version is at least as new as the last write, and the set is dropped.
type statusExpectations struct {
	mu sync.Mutex
	m  map[string]map[string]bool // job key → replaced resourceVersions
}

// superseded records that a status write replaced version rv of job key.
func (e *statusExpectations) superseded(key, rv string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m[key] == nil {
		e.m[key] = map[string]bool{}
	}
	e.m[key][rv] = true
}

// stale reports whether a cached job at version rv predates a status write
// of this controller; once the cache shows a newer one it forgets them.
func (e *statusExpectations) stale(key, rv string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m[key][rv] {
		return true
	}
	delete(e.m, key)
	return false
}

func (e *statusExpectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
