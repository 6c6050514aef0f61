package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The Job controller runs a Job's pods to completion, as Kubernetes'
// (pkg/controller/job). One reconcile of one Job:
//
//  1. Claim its pods (controller reference and selector, as ReplicaSets do).
//  2. Count: active pods, terminating pods, ready pods, and the finished
//     pods not yet counted. Every pod it creates carries the finalizer
//     batch.kubernetes.io/job-tracking, so a finished pod stays in the API
//     until it has been counted. Counting is in three writes, each safe to
//     repeat after a crash (kill -9) between any two:
//     a. the finished pod's uid goes into status.uncountedTerminatedPods
//     (an Indexed job's succeeded index goes straight into completedIndexes);
//     b. the pod's finalizer is removed;
//     c. uids whose pods have no finalizer any more leave the list and are
//     added to status.succeeded / status.failed.
//     A pod without the finalizer is never counted again, and a uid in the
//     list is counted exactly once: nothing is lost or counted twice.
//  3. Decide: failure (a FailJob rule of podFailurePolicy, backoffLimit,
//     activeDeadlineSeconds, maxFailedIndexes, failed indexes) or success
//     (completions reached). The decision is written first as an interim
//     condition (FailureTarget, SuccessCriteriaMet); the remaining pods are
//     deleted, and once none is left and everything is counted the terminal
//     condition follows (Failed, Complete with completionTime).
//  4. Otherwise manage pods: suspended, delete them all; too many, delete
//     the extra; too few, create (respecting the failure backoff, 10 s
//     doubling to 10 min, and for Indexed jobs the missing indexes).
//
// Events are job-controller's, worded as Kubernetes': SuccessfulCreate,
// SuccessfulDelete, FailedCreate, Suspended, Resumed, Completed, and the
// failure reason (BackoffLimitExceeded, ...) as a Warning.
type JobController struct {
	client client.Interface
	jobs   Lister // *api.Job
	pods   Lister // *api.Pod
	events EventRecorder
	log    *slog.Logger
	expect *expectations
	// removing holds, per job, the uids of pods whose finalizer this
	// controller removed and the cache may still show (not counted again).
	removing *finalizerExpectations
	// written holds, per job, the resourceVersions its own status writes
	// replaced: a cached job at one of them is older than what the
	// controller knows, and is not acted on.
	written *statusExpectations
	mu      sync.Mutex
	backoff map[string]backoffRecord // by job key, in memory as Kubernetes'
	// now is the clock (tests set it).
	now func() time.Time
}

const jobControllerName = "job-controller"

// Pod failure backoff, as Kubernetes' DefaultJobPodFailureBackOff and
// MaxJobPodFailureBackOff: a replacement for a failed pod waits 10 s,
// doubling with each further failure since the last success, up to 10 min.
const (
	jobPodFailureBackoff    = 10 * time.Second
	jobPodFailureBackoffMax = 10 * time.Minute
	// maxUncountedPods bounds status.uncountedTerminatedPods (Kubernetes: 500).
	maxUncountedPods = 500
)

func jobKind() *api.Kind { return api.MustKindOf(&api.Job{}) }

// NewJobController returns the controller; jobs and pods are caches of
// all namespaces.
func NewJobController(c client.Interface, jobs, pods Lister, events EventRecorder, log *slog.Logger) *JobController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if events == nil {
		events = nopRecorder{}
	}
	return &JobController{
		client:   c,
		jobs:     jobs,
		pods:     pods,
		events:   events,
		log:      log.With("controller", jobControllerName),
		expect:   newExpectations(),
		removing: &finalizerExpectations{m: map[string]map[string]bool{}},
		written:  &statusExpectations{m: map[string]map[string]bool{}},
		backoff:  map[string]backoffRecord{},
		now:      time.Now,
	}
}

// PodHandler enqueues the Job a pod belongs to (its controller reference,
// by name: a pod of a deleted job still has its finalizer removed), and
// for an orphan the jobs whose selector matches it.
func (r *JobController) PodHandler(enqueue func(key string)) client.Handler {
	h := func(obj api.Object) {
		m := obj.GetObjectMeta()
		if ref := api.ControllerOf(obj); ref != nil {
			if ref.Kind == "Job" {
				enqueue(api.Key(m.Namespace, ref.Name))
			}
			return
		}
		set := labels.Set(m.Labels)
		for _, j := range listAs[*api.Job](r.jobs.ListBy(nil, m.Namespace)) {
			if sel, err := j.Spec.Selector.AsSelector(); err == nil && !sel.Empty() && sel.Matches(set) {
				enqueue(api.KeyOf(j))
			}
		}
	}
	return client.Handler{
		OnAdd: h,
		OnUpdate: func(old, cur api.Object) {
			h(cur)
			if ref := api.ControllerOf(old); ref != nil && ref.Kind == "Job" {
				enqueue(api.Key(old.GetObjectMeta().Namespace, ref.Name))
			}
		},
		OnDelete: h,
	}
}

// jobSync is what one reconcile knows about one job.
type jobSync struct {
	job         *api.Job // a copy: status is changed in place and written
	key         string
	pods        []*api.Pod // claimed
	active      []*api.Pod
	terminating int32
	ready       int32
	uncounted   struct{ succeeded, failed map[string]bool }
	removing    map[string]bool // finalizer removal issued, not yet seen
	succeeded   int32
	failed      int32
	prevIndexes indexSet // completedIndexes as stored
	succIndexes indexSet // completed indexes, with the newly succeeded
	failIndexes indexSet // nil unless backoffLimitPerIndex
	finished    *api.JobCondition
	newBackoff  backoffRecord
	actions     []string
}

// Reconcile implements client.Reconciler for the job key "namespace/name".
func (r *JobController) Reconcile(ctx context.Context, key string) error {
	ns, name := client.SplitKey(key)
	cached, ok := getAs[*api.Job](r.jobs, ns, name)
	// Pods of a job that is gone (or of an older job of the same name)
	// keep no finalizer: nothing will ever count them.
	orphanErr := r.releaseOrphans(ctx, ns, name, cached)
	if !ok {
		r.expect.forget(key)
		r.removing.forget(key)
		r.written.forget(key)
		r.mu.Lock()
		delete(r.backoff, key)
		r.mu.Unlock()
		logReconcile(r.log, false, key, "gone", "gone", "none")
		return orphanErr
	}
	if r.written.stale(key, cached.ResourceVersion) {
		// The cache has not caught up with this controller's own status
		// writes: the job it shows may have counted nothing yet while the
		// pod cache already shows the finished pod without its finalizer,
		// and acting on it would create a pod for a job that is done. The
		// job's watch event brings it back; the requeue is the safety net.
		logReconcile(r.log, false, key, "cache behind own status write", "wait", "none")
		return client.RequeueAfter(expectationsTTL)
	}
	if api.IsJobFinished(cached) {
		// Done: only make sure no pod keeps its finalizer.
		err := r.releaseFinished(ctx, cached)
		logReconcile(r.log, false, key, "finished", "finished", "none")
		return errors.Join(orphanErr, err)
	}
	err := r.sync(ctx, key, api.Clone(cached))
	return requeueOnConflict(r.log, "job "+key, errors.Join(orphanErr, err))
}

func (r *JobController) sync(ctx context.Context, key string, job *api.Job) error {
	now := r.now()
	sel, err := job.Spec.Selector.AsSelector()
	if err != nil {
		r.log.Warn("invalid selector; nothing done", "key", key, "err", err)
		return nil
	}
	if job.Status.UncountedTerminatedPods == nil {
		job.Status.UncountedTerminatedPods = &api.UncountedTerminatedPods{}
	}
	satisfied := r.expect.pending(key, job.Namespace, r.pods, now) == 0
	pods, err := claim(ctx, r.client, job, sel, listAs[*api.Pod](r.pods.ListBy(nil, job.Namespace)))
	if err != nil {
		return fmt.Errorf("job %s: claim pods: %w", key, err)
	}
	s := &jobSync{job: job, key: key, pods: pods, removing: r.removing.pending(key, job.Namespace, r.pods)}
	s.uncounted.succeeded = setOf(job.Status.UncountedTerminatedPods.Succeeded)
	s.uncounted.failed = setOf(job.Status.UncountedTerminatedPods.Failed)
	for _, p := range pods {
		switch {
		case isPodActive(p):
			s.active = append(s.active, p)
			if isPodReady(p) {
				s.ready++
			}
		case p.DeletionTimestamp != nil && p.Status.Phase != api.PodSucceeded && p.Status.Phase != api.PodFailed:
			s.terminating++
		}
	}
	newSucceeded, newFailed := r.newFinished(s)
	s.succeeded = job.Status.Succeeded + int32(len(newSucceeded)) + int32(len(s.uncounted.succeeded))
	s.failed = job.Status.Failed + int32(countedFailures(job, newFailed)) + int32(len(s.uncounted.failed))
	if job.Status.StartTime == nil && !isSuspended(job) {
		t := api.NewTime(now)
		job.Status.StartTime = &t
	}
	s.newBackoff = r.backoffFor(key).update(newSucceeded, newFailed)

	// 3. Has the job reached its end?
	var requeue time.Duration
	if c := job.Condition(api.JobSuccessCriteriaMet); c != nil && c.Status == api.ConditionTrue {
		s.finished = c
	} else if c := job.Condition(api.JobFailureTarget); c != nil && c.Status == api.ConditionTrue {
		s.finished = newJobCondition(api.JobFailed, c.Reason, c.Message, now)
	} else if msg := failJobMessage(job, pods); msg != "" {
		s.finished = newJobCondition(api.JobFailureTarget, api.JobReasonPodFailurePolicy, msg, now)
	}
	if s.finished == nil {
		switch {
		case s.failed > *job.Spec.BackoffLimit || pastBackoffLimitOnFailure(job, pods):
			s.finished = newJobCondition(api.JobFailureTarget, api.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit", now)
		case pastActiveDeadline(job, now):
			s.finished = newJobCondition(api.JobFailureTarget, api.JobReasonDeadlineExceeded, "Job was active longer than specified deadline", now)
		case job.Spec.ActiveDeadlineSeconds != nil && !isSuspended(job):
			requeue = time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second - now.Sub(job.Status.StartTime.Time)
		}
	}
	if job.IsIndexed() {
		completions := int(*job.Spec.Completions)
		s.prevIndexes = parseIndexes(job.Status.CompletedIndexes, completions)
		s.succIndexes = s.prevIndexes.clone()
		for _, p := range pods {
			if ix := completionIndex(p); p.Status.Phase == api.PodSucceeded && ix >= 0 && ix < completions {
				if hasTrackingFinalizer(p) && !s.removing[p.UID] {
					s.succIndexes[ix] = true
				}
			}
		}
		s.succeeded = int32(len(s.succIndexes))
		if job.Spec.BackoffLimitPerIndex != nil {
			s.failIndexes = failedIndexes(job, pods)
			if s.finished == nil {
				if m := job.Spec.MaxFailedIndexes; m != nil && len(s.failIndexes) > int(*m) {
					s.finished = newJobCondition(api.JobFailureTarget, api.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes", now)
				} else if len(s.failIndexes) > 0 && len(s.failIndexes)+len(s.succIndexes) >= completions {
					s.finished = newJobCondition(api.JobFailureTarget, api.JobReasonFailedIndexes, "Job has failed indexes", now)
				}
			}
		}
	}

	// 4. Act.
	suspendChanged := false
	var manageErr error
	if s.finished != nil {
		wasActive := len(s.active)
		deleted, err := r.deletePods(ctx, s, s.active, false)
		if deleted != wasActive || !satisfied {
			s.finished = nil // pods left, or some not yet in the cache: not finished yet
		}
		manageErr = err
	} else {
		manageCalled := false
		if satisfied && job.DeletionTimestamp == nil {
			var wait time.Duration
			wait, manageErr = r.manage(ctx, s)
			if wait > 0 && (requeue == 0 || wait < requeue) {
				requeue = wait
			}
			manageCalled = true
		}
		active := int32(len(s.active))
		complete := false
		if job.Spec.Completions == nil {
			complete = s.succeeded > 0 && active == 0
		} else {
			complete = s.succeeded >= *job.Spec.Completions && active == 0
		}
		if complete {
			s.finished = newJobCondition(api.JobSuccessCriteriaMet, api.JobReasonCompletionsReached, "Reached expected number of succeeded pods", now)
		} else if manageCalled {
			if isSuspended(job) {
				if setJobCondition(job, api.JobSuspended, api.ConditionTrue, "JobSuspended", "Job suspended", now) {
					suspendChanged = true
					r.events.Eventf(ctx, job, api.EventNormal, "Suspended", "Job suspended")
				}
				// The deadline does not run while suspended. skiff clears
				// startTime here, so the template's scheduling directives
				// may change (validateJobUpdate); on a Kubernetes cluster
				// Kueue clears it when it suspends a job.
				if job.Status.StartTime != nil && len(s.active) == 0 {
					job.Status.StartTime = nil
					suspendChanged = true
				}
			} else if setJobCondition(job, api.JobSuspended, api.ConditionFalse, "JobResumed", "Job resumed", now) {
				suspendChanged = true
				r.events.Eventf(ctx, job, api.EventNormal, "Resumed", "Job resumed")
				t := api.NewTime(now)
				job.Status.StartTime = &t
			}
		}
	}
	active, ready := int32(len(s.active)), s.ready
	needsFlush := suspendChanged || active != job.Status.Active || !equalPtr(&ready, job.Status.Ready) || !equalPtr(&s.terminating, job.Status.Terminating)
	job.Status.Active = active
	job.Status.Ready = &ready
	terminating := s.terminating
	job.Status.Terminating = &terminating
	statusErr := r.track(ctx, s, needsFlush)
	r.logLine(s)
	if err := errors.Join(manageErr, statusErr); err != nil {
		return err
	}
	if r.expect.pending(key, job.Namespace, r.pods, now) > 0 {
		return client.RequeueAfter(expectationsTTL)
	}
	if requeue > 0 {
		return client.RequeueAfter(requeue)
	}
	return nil
}

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

// manage creates or deletes pods toward the wanted number of active ones.
// It returns how long to wait before creating (the failure backoff).
func (r *JobController) manage(ctx context.Context, s *jobSync) (time.Duration, error) {
	job := s.job
	if isSuspended(job) {
		_, err := r.deletePods(ctx, s, s.active, true)
		return 0, err
	}
	parallelism := *job.Spec.Parallelism
	active := int32(len(s.active))
	var want int32
	if job.Spec.Completions == nil {
		want = parallelism
		if s.succeeded > 0 {
			want = active
		}
	} else {
		want = max(min(*job.Spec.Completions-s.succeeded, parallelism), 0)
	}
	if rm := podsForRemoval(s, max(active-want, 0)); len(rm) > 0 {
		_, err := r.deletePods(ctx, s, rm[:min(len(rm), burstReplicas)], true)
		return 0, err
	}
	var terminating int32
	if onlyReplaceFailed(job) {
		terminating = s.terminating
	}
	diff := want - terminating - active
	if diff <= 0 {
		return 0, nil
	}
	var indexes []int
	if job.IsIndexed() {
		indexes = pendingIndexes(s, int(diff))
		if job.Spec.BackoffLimitPerIndex != nil {
			var wait time.Duration
			indexes, wait = readyIndexes(s, indexes, r.now())
			if len(indexes) == 0 {
				return wait, nil
			}
		}
		diff = int32(len(indexes))
	} else if wait := s.newBackoff.remaining(r.now()); wait > 0 {
		return wait, nil
	}
	var created []string
	for i := range min(int(diff), burstReplicas) {
		ix := -1
		if len(indexes) > i {
			ix = indexes[i]
		}
		pod := newPodForJob(s, ix)
		if _, err := r.client.Create(ctx, pod); err != nil {
			r.events.Eventf(ctx, job, api.EventWarning, "FailedCreate", "Error creating: %v", err)
			s.actions = append(s.actions, createdAction(created))
			return 0, fmt.Errorf("job %s: create pod: %w", s.key, err)
		}
		r.expect.expectCreate(s.key, pod.Name, r.now())
		r.events.Eventf(ctx, job, api.EventNormal, "SuccessfulCreate", "Created pod: %s", pod.Name)
		created = append(created, pod.Name)
		s.active = append(s.active, pod)
	}
	s.actions = append(s.actions, createdAction(created))
	return 0, nil
}

// deletePods deletes pods (uid precondition). With release, their
// finalizer is removed first: a pod the job deletes on purpose (suspend,
// too many) is not a failure. Without it (the job has ended) the finalizer
// stays until the pod is counted. Deleted pods leave s.active and count
// as terminating.
func (r *JobController) deletePods(ctx context.Context, s *jobSync, pods []*api.Pod, release bool) (int, error) {
	var errs []error
	var names []string
	gone := map[string]bool{}
	for _, p := range pods {
		if release && hasTrackingFinalizer(p) {
			if err := r.removeFinalizer(ctx, p); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		uid := p.UID
		err := r.client.Delete(ctx, podKind(), p.Namespace, p.Name, api.DeleteOptions{Preconditions: &api.Preconditions{UID: &uid}})
		if err != nil && !api.IsNotFound(err) && !api.IsConflict(err) {
			r.events.Eventf(ctx, s.job, api.EventWarning, "FailedDelete", "Error deleting: %v", err)
			errs = append(errs, fmt.Errorf("job %s: delete pod %s: %w", s.key, p.Name, err))
			continue
		}
		if err == nil {
			r.expect.expectDelete(s.key, p.Name, r.now())
			r.events.Eventf(ctx, s.job, api.EventNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
			names = append(names, p.Name)
		}
		gone[p.UID] = true
		if isPodReady(p) {
			s.ready--
		}
		s.terminating++
	}
	s.active = slices.DeleteFunc(s.active, func(p *api.Pod) bool { return gone[p.UID] })
	if len(names) > 0 {
		s.actions = append(s.actions, deletedAction(names))
	}
	return len(gone), errors.Join(errs...)
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
	pods := slices.Clone(s.pods)
	if job.IsIndexed() {
		sort.SliceStable(pods, func(i, j int) bool { return completionIndex(pods[i]) < completionIndex(pods[j]) })
	}
	var release []*api.Pod
	full := false
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
					needsFlush = true
				}
			} else if !s.uncounted.succeeded[p.UID] {
				uc.Succeeded = append(uc.Succeeded, p.UID)
				needsFlush = true
			}
		case failed || (s.finished != nil && s.finished.Type != api.JobSuccessCriteriaMet && s.finished.Type != api.JobComplete):
			// Once the job has failed, every pod not succeeded counts as failed.
			ix := completionIndex(p)
			if !s.uncounted.failed[p.UID] && (!job.IsIndexed() || (ix >= 0 && ix < int(*job.Spec.Completions))) {
				if _, count, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p); count {
					uc.Failed = append(uc.Failed, p.UID)
					needsFlush = true
				}
			}
		}
		if len(uc.Succeeded)+len(uc.Failed) >= maxUncountedPods {
			full = true
			break
		}
	}
	if job.IsIndexed() {
		if st := s.succIndexes.String(); st != job.Status.CompletedIndexes {
			job.Status.CompletedIndexes = st
			needsFlush = true
		}
		job.Status.Succeeded = int32(len(s.succIndexes))
		var failedStr *string
		if s.failIndexes != nil {
			str := s.failIndexes.String()
			failedStr = &str
		}
		if !equalPtr(failedStr, job.Status.FailedIndexes) {
			job.Status.FailedIndexes = failedStr
			needsFlush = true
		}
	}
	// The interim conditions go first, before any finalizer is removed.
	switch {
	case s.finished != nil && s.finished.Type == api.JobFailureTarget:
		job.Status.Conditions = append(job.Status.Conditions, *s.finished)
		needsFlush = true
		s.finished = newJobCondition(api.JobFailed, s.finished.Reason, s.finished.Message, now)
	case s.finished != nil && s.finished.Type == api.JobSuccessCriteriaMet:
		if job.Condition(api.JobSuccessCriteriaMet) == nil {
			job.Status.Conditions = append(job.Status.Conditions, *s.finished)
			needsFlush = true
		}
		s.finished = newJobCondition(api.JobComplete, s.finished.Reason, s.finished.Message, now)
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

func (r *JobController) logLine(s *jobSync) {
	j := s.job
	observed := fmt.Sprintf("%d active (%d ready), %d succeeded, %d failed, %d terminating", len(s.active), s.ready, j.Status.Succeeded, j.Status.Failed, s.terminating)
	desired := "suspended"
	if !isSuspended(j) {
		desired = fmt.Sprintf("parallelism %d", *j.Spec.Parallelism)
		if j.Spec.Completions != nil {
			desired += fmt.Sprintf(", completions %d", *j.Spec.Completions)
		}
	}
	var acts []string
	for _, a := range s.actions {
		if a != "none" {
			acts = append(acts, a)
		}
	}
	action := "none"
	if len(acts) > 0 {
		action = strings.Join(acts, "; ")
	}
	logReconcile(r.log, action != "none", s.key, observed, desired, action)
}

// newPodForJob builds a pod from the job's template with the tracking
// finalizer and a controller reference; index >= 0 makes it the pod of
// that completion index: named JOB-INDEX-RAND, hostname JOB-INDEX, the
// index in annotation and label, and JOB_COMPLETION_INDEX in every container.
func newPodForJob(s *jobSync, index int) *api.Pod {
	job := s.job
	t := api.Clone(job).Spec.Template
	pod := &api.Pod{
		ObjectMeta: api.ObjectMeta{
			Namespace:       job.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      append(slices.DeleteFunc(t.Finalizers, func(f string) bool { return f == api.JobTrackingFinalizer }), api.JobTrackingFinalizer),
			OwnerReferences: []api.OwnerReference{controllerRef(job)},
		},
		Spec: t.Spec,
	}
	if index < 0 {
		pod.Name = podName(job.Name)
	} else {
		ix := strconv.Itoa(index)
		prefix := job.Name + "-" + ix
		if len(prefix)+1 > 58 {
			prefix = job.Name[:58-len(ix)-2] + "-" + ix
		}
		pod.Name = prefix + "-" + utilrand.String(5)
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[api.JobCompletionIndexAnnotation] = ix
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[api.JobCompletionIndexAnnotation] = ix
		if pod.Spec.Hostname == "" {
			pod.Spec.Hostname = job.Name + "-" + ix
		}
		env := api.EnvVar{Name: api.JobCompletionIndexEnv, ValueFrom: &api.EnvVarSource{FieldRef: &api.ObjectFieldSelector{
			APIVersion: "v1", FieldPath: fmt.Sprintf("metadata.annotations['%s']", api.JobCompletionIndexAnnotation)}}}
		for _, cs := range [][]api.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range cs {
				if !slices.ContainsFunc(cs[i].Env, func(e api.EnvVar) bool { return e.Name == api.JobCompletionIndexEnv }) {
					cs[i].Env = append(cs[i].Env, env)
				}
			}
		}
		if job.Spec.BackoffLimitPerIndex != nil {
			if n := indexFailures(job, s.pods, index); n > 0 {
				pod.Annotations[api.JobIndexFailureCountAnno] = strconv.Itoa(n)
			}
		}
	}
	api.SetTypeMeta(pod)
	return pod
}

// podsForRemoval: for an Indexed job the active pods with a bad,
// duplicated or already succeeded index; then, to reach at least n, the
// cheapest others (deleteFirst).
func podsForRemoval(s *jobSync, n int32) []*api.Pod {
	var rm, left []*api.Pod
	if s.job.IsIndexed() {
		pods := slices.Clone(s.active)
		slices.SortFunc(pods, func(a, b *api.Pod) int { return -deleteFirst(a, b) }) // the most valuable first
		seen := map[int]bool{}
		for _, p := range pods {
			ix := completionIndex(p)
			if ix < 0 || ix >= int(*s.job.Spec.Completions) || seen[ix] || s.succIndexes[ix] {
				rm = append(rm, p)
				continue
			}
			seen[ix] = true
			left = append(left, p)
		}
	} else {
		left = slices.Clone(s.active)
	}
	if len(rm) < int(n) {
		slices.SortFunc(left, deleteFirst)
		rm = append(rm, left[:int(n)-len(rm)]...)
	}
	return rm
}

// pendingIndexes: the lowest n indexes neither succeeded, failed, nor held
// by an active pod (nor a terminating one when only failed pods are replaced).
func pendingIndexes(s *jobSync, n int) []int {
	busy := map[int]bool{}
	for _, p := range s.active {
		busy[completionIndex(p)] = true
	}
	if onlyReplaceFailed(s.job) {
		for _, p := range s.pods {
			if p.DeletionTimestamp != nil && p.Status.Phase != api.PodSucceeded && p.Status.Phase != api.PodFailed {
				busy[completionIndex(p)] = true
			}
		}
	}
	var out []int
	for ix := 0; ix < int(*s.job.Spec.Completions) && len(out) < n; ix++ {
		if !busy[ix] && !s.succIndexes[ix] && !s.failIndexes[ix] {
			out = append(out, ix)
		}
	}
	return out
}

// readyIndexes keeps the indexes whose last failure's backoff has passed,
// and otherwise says how long until the first one has.
func readyIndexes(s *jobSync, indexes []int, now time.Time) ([]int, time.Duration) {
	var out []int
	var wait time.Duration
	for _, ix := range indexes {
		var last *api.Pod
		for _, p := range s.pods {
			if completionIndex(p) == ix && isPodFailedForJob(p, s.job) && (last == nil || finishedTime(p).After(finishedTime(last))) {
				last = p
			}
		}
		if last == nil {
			out = append(out, ix)
			continue
		}
		rec := backoffRecord{failures: indexFailures(s.job, s.pods, ix), last: finishedTime(last)}
		if w := rec.remaining(now); w == 0 {
			out = append(out, ix)
		} else if wait == 0 || w < wait {
			wait = w
		}
	}
	return out, wait
}

// indexFailures is how often index has failed (and counted): the highest
// failure-count annotation of its pods plus one for a counted failed pod.
func indexFailures(job *api.Job, pods []*api.Pod, index int) int {
	n := 0
	for _, p := range pods {
		if completionIndex(p) != index {
			continue
		}
		c, _ := strconv.Atoi(p.Annotations[api.JobIndexFailureCountAnno])
		if isPodFailedForJob(p, job) {
			if _, count, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p); count {
				c++
			}
		}
		n = max(n, c)
	}
	return n
}

// failedIndexes: the stored failedIndexes, and every index that failed
// more than backoffLimitPerIndex times or matched a FailIndex rule.
func failedIndexes(job *api.Job, pods []*api.Pod) indexSet {
	completions := int(*job.Spec.Completions)
	out := indexSet{}
	if job.Status.FailedIndexes != nil {
		out = parseIndexes(*job.Status.FailedIndexes, completions)
	}
	for _, p := range pods {
		ix := completionIndex(p)
		if ix < 0 || ix >= completions || !isPodFailedForJob(p, job) {
			continue
		}
		_, _, action := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p)
		if action == api.PodFailurePolicyActionFailIndex || indexFailures(job, pods, ix) > int(*job.Spec.BackoffLimitPerIndex) {
			out[ix] = true
		}
	}
	return out
}

// matchPodFailurePolicy, as Kubernetes': the first rule a failed pod
// matches gives the job failure message (FailJob), whether the failure
// counts toward backoffLimit (not for Ignore) and the action.
func matchPodFailurePolicy(policy *api.PodFailurePolicy, p *api.Pod) (msg string, count bool, action string) {
	if policy == nil {
		return "", true, ""
	}
	for i, rule := range policy.Rules {
		var matched string
		if rule.OnExitCodes != nil {
			cs := matchOnExitCodes(p, rule.OnExitCodes)
			if cs == nil {
				continue
			}
			matched = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d",
				cs.Name, p.Namespace, p.Name, cs.State.Terminated.ExitCode, rule.Action, i)
		} else if len(rule.OnPodConditions) > 0 {
			c := matchOnPodConditions(p, rule.OnPodConditions)
			if c == nil {
				continue
			}
			matched = fmt.Sprintf("Pod %s/%s has condition %v matching %v rule at index %d", p.Namespace, p.Name, c.Type, rule.Action, i)
		} else {
			continue
		}
		switch rule.Action {
		case api.PodFailurePolicyActionIgnore:
			return "", false, rule.Action
		case api.PodFailurePolicyActionFailIndex, api.PodFailurePolicyActionCount:
			return "", true, rule.Action
		case api.PodFailurePolicyActionFailJob:
			return matched, true, rule.Action
		}
	}
	return "", true, ""
}

func matchOnExitCodes(p *api.Pod, req *api.PodFailurePolicyOnExitCodesRequirement) *api.ContainerStatus {
	for _, list := range [][]api.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for i, cs := range list {
			t := cs.State.Terminated
			if t == nil || t.ExitCode == 0 || (req.ContainerName != nil && *req.ContainerName != cs.Name) {
				continue
			}
			in := slices.Contains(req.Values, t.ExitCode)
			if (req.Operator == "In" && in) || (req.Operator == "NotIn" && !in) {
				return &list[i]
			}
		}
	}
	return nil
}

func matchOnPodConditions(p *api.Pod, patterns []api.PodFailurePolicyOnPodConditionsPattern) *api.PodCondition {
	for i, c := range p.Status.Conditions {
		for _, pat := range patterns {
			if c.Type == pat.Type && c.Status == pat.Status {
				return &p.Status.Conditions[i]
			}
		}
	}
	return nil
}

// failJobMessage: the message of the first failed pod matching a FailJob rule.
func failJobMessage(job *api.Job, pods []*api.Pod) string {
	if job.Spec.PodFailurePolicy == nil {
		return ""
	}
	for _, p := range pods {
		if isPodFailedForJob(p, job) {
			if msg, _, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// countedFailures: failed pods minus those an Ignore rule matches.
func countedFailures(job *api.Job, failed []*api.Pod) int {
	n := 0
	for _, p := range failed {
		if _, count, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p); count {
			n++
		}
	}
	return n
}

// pastBackoffLimitOnFailure: for restartPolicy OnFailure, the container
// restarts of running and pending pods reach backoffLimit.
func pastBackoffLimitOnFailure(job *api.Job, pods []*api.Pod) bool {
	if job.Spec.Template.Spec.RestartPolicy != api.RestartOnFailure {
		return false
	}
	var n int32
	for _, p := range pods {
		if p.Status.Phase == api.PodRunning || p.Status.Phase == api.PodPending {
			for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
				n += cs.RestartCount
			}
		}
	}
	if *job.Spec.BackoffLimit == 0 {
		return n > 0
	}
	return n >= *job.Spec.BackoffLimit
}

func pastActiveDeadline(job *api.Job, now time.Time) bool {
	if job.Spec.ActiveDeadlineSeconds == nil || job.Status.StartTime == nil || isSuspended(job) {
		return false
	}
	return now.Sub(job.Status.StartTime.Time) >= time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second
}

func isSuspended(job *api.Job) bool { return job.Spec.Suspend != nil && *job.Spec.Suspend }

// onlyReplaceFailed: podReplacementPolicy Failed (always with a podFailurePolicy).
func onlyReplaceFailed(job *api.Job) bool {
	return (job.Spec.PodReplacementPolicy != nil && *job.Spec.PodReplacementPolicy == api.PodReplacementFailed) || job.Spec.PodFailurePolicy != nil
}

// isPodFailedForJob: Failed, or (unless only failed pods are replaced)
// deleted before it succeeded.
func isPodFailedForJob(p *api.Pod, job *api.Job) bool {
	if p.Status.Phase == api.PodFailed {
		return true
	}
	if onlyReplaceFailed(job) {
		return false
	}
	return p.DeletionTimestamp != nil && p.Status.Phase != api.PodSucceeded
}

func hasTrackingFinalizer(p *api.Pod) bool {
	return slices.Contains(p.Finalizers, api.JobTrackingFinalizer)
}

// completionIndex reads the pod's index annotation (-1: none or invalid).
func completionIndex(p *api.Pod) int {
	v, ok := p.Annotations[api.JobCompletionIndexAnnotation]
	if !ok {
		return -1
	}
	ix, err := strconv.Atoi(v)
	if err != nil || ix < 0 {
		return -1
	}
	return ix
}

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

func newJobCondition(t, reason, msg string, now time.Time) *api.JobCondition {
	return &api.JobCondition{Type: t, Status: api.ConditionTrue, Reason: reason, Message: msg,
		LastProbeTime: api.NewTime(now), LastTransitionTime: api.NewTime(now)}
}

// setJobCondition sets (or adds, unless status is False) a condition, as
// Kubernetes' ensureJobConditionStatus; it reports a change.
func setJobCondition(job *api.Job, t, status, reason, msg string, now time.Time) bool {
	if c := job.Condition(t); c != nil {
		if c.Status == status && c.Reason == reason && c.Message == msg {
			return false
		}
		*c = *newJobCondition(t, reason, msg, now)
		c.Status = status
		return true
	}
	if status == api.ConditionFalse {
		return false
	}
	c := newJobCondition(t, reason, msg, now)
	c.Status = status
	job.Status.Conditions = append(job.Status.Conditions, *c)
	return true
}

func setOf(uids []string) map[string]bool {
	m := make(map[string]bool, len(uids))
	for _, u := range uids {
		m[u] = true
	}
	return m
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// indexSet is a set of completion indexes; String compresses it as
// Kubernetes does ("1,3-5").
type indexSet map[int]bool

func (s indexSet) clone() indexSet { return maps.Clone(s) }

func (s indexSet) String() string {
	idx := slices.Sorted(maps.Keys(s))
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(idx[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", idx[i], idx[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// parseIndexes reads "1,3-5", keeping indexes below completions.
func parseIndexes(s string, completions int) indexSet {
	out := indexSet{}
	for part := range strings.SplitSeq(s, ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for ix := a; ix <= b && ix < completions; ix++ {
			out[ix] = true
		}
	}
	return out
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
