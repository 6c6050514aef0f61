package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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
// The files follow Kubernetes' split of pkg/controller/job: job.go (the
// reconcile: observe, decide, act, manage), job_tracking.go (counting
// through the finalizer and uncountedTerminatedPods), job_failure_policy.go
// (podFailurePolicy, backoffLimit, deadline), job_indexed.go (completion
// indexes), job_backoff.go (the pod failure backoff).
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

func jobKind() *api.Kind { return api.MustKindOf(&api.Job{}) }

// NewJobController returns the controller; jobs and pods are caches of
// all namespaces.
func NewJobController(c client.Interface, jobs, pods Lister, events EventRecorder, log *slog.Logger) *JobController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	indexControllers(pods) // claimCandidates
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
	s, satisfied, err := r.observe(ctx, key, job, now)
	if s == nil {
		return err
	}
	requeue := r.decide(s, now)
	wait, suspendChanged, manageErr := r.act(ctx, s, satisfied, now)
	if wait > 0 && (requeue == 0 || wait < requeue) {
		requeue = wait
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

// observe is steps 1 and 2 of a reconcile: claim the job's pods and count
// them (active, ready, terminating, newly finished), start the job's clock
// and compute its failure backoff. satisfied reports that the pod cache
// holds every pod this controller created or deleted. A nil jobSync with
// a nil error: the selector is invalid, nothing is done.
func (r *JobController) observe(ctx context.Context, key string, job *api.Job, now time.Time) (s *jobSync, satisfied bool, err error) {
	sel, err := job.Spec.Selector.AsSelector()
	if err != nil {
		r.log.Warn("invalid selector; nothing done", "key", key, "err", err)
		return nil, false, nil
	}
	if job.Status.UncountedTerminatedPods == nil {
		job.Status.UncountedTerminatedPods = &api.UncountedTerminatedPods{}
	}
	satisfied = r.expect.pending(key, job.Namespace, r.pods, now) == 0
	pods, err := claim(ctx, r.client, job, sel, claimCandidates[*api.Pod](r.pods, job))
	if err != nil {
		return nil, false, fmt.Errorf("job %s: claim pods: %w", key, err)
	}
	s = &jobSync{job: job, key: key, pods: pods, removing: r.removing.pending(key, job.Namespace, r.pods)}
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
	return s, satisfied, nil
}

// decide is step 3: has the job reached its end? It sets s.finished to
// the interim condition of a failure (FailureTarget) found now, or to the
// condition already decided; for an Indexed job it counts the indexes
// first. It returns how long until the active deadline passes (0: none).
func (r *JobController) decide(s *jobSync, now time.Time) (requeue time.Duration) {
	job := s.job
	if c := job.Condition(api.JobSuccessCriteriaMet); c != nil && c.Status == api.ConditionTrue {
		s.finished = c
	} else if c := job.Condition(api.JobFailureTarget); c != nil && c.Status == api.ConditionTrue {
		s.finished = newJobCondition(api.JobFailed, c.Reason, c.Message, now)
	} else if msg := failJobMessage(job, s.pods); msg != "" {
		s.finished = newJobCondition(api.JobFailureTarget, api.JobReasonPodFailurePolicy, msg, now)
	}
	if s.finished == nil {
		switch {
		case s.failed > *job.Spec.BackoffLimit || pastBackoffLimitOnFailure(job, s.pods):
			s.finished = newJobCondition(api.JobFailureTarget, api.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit", now)
		case pastActiveDeadline(job, now):
			s.finished = newJobCondition(api.JobFailureTarget, api.JobReasonDeadlineExceeded, "Job was active longer than specified deadline", now)
		case job.Spec.ActiveDeadlineSeconds != nil && !isSuspended(job):
			requeue = time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second - now.Sub(job.Status.StartTime.Time)
		}
	}
	if job.IsIndexed() {
		s.countIndexes(now) // job_indexed.go
	}
	return requeue
}

// act is step 4: a finished job's active pods are deleted (it stays
// unfinished while any is left, or the cache misses a pod); otherwise the
// pods are managed (manage), success is decided when the completions are
// reached, and suspension and resumption are recorded. wait is the
// failure backoff before the next create.
func (r *JobController) act(ctx context.Context, s *jobSync, satisfied bool, now time.Time) (wait time.Duration, suspendChanged bool, err error) {
	job := s.job
	if s.finished != nil {
		wasActive := len(s.active)
		deleted, err := r.deletePods(ctx, s, s.active, false)
		if deleted != wasActive || !satisfied {
			s.finished = nil // pods left, or some not yet in the cache: not finished yet
		}
		return 0, false, err
	}
	manageCalled := false
	if satisfied && job.DeletionTimestamp == nil {
		wait, err = r.manage(ctx, s)
		manageCalled = true
	}
	active := int32(len(s.active))
	complete := false
	if job.Spec.Completions == nil {
		complete = s.succeeded > 0 && active == 0
	} else {
		complete = s.succeeded >= *job.Spec.Completions && active == 0
	}
	switch {
	case complete:
		s.finished = newJobCondition(api.JobSuccessCriteriaMet, api.JobReasonCompletionsReached, "Reached expected number of succeeded pods", now)
	case manageCalled && isSuspended(job):
		if setJobCondition(job, api.JobSuspended, api.ConditionTrue, "JobSuspended", "Job suspended", now) {
			suspendChanged = true
			r.events.Eventf(ctx, job, api.EventNormal, "Suspended", "Job suspended")
		}
		// The deadline does not run while suspended. skiff clears
		// startTime here, so the template's scheduling directives may
		// change (validateJobUpdate); on a Kubernetes cluster Kueue
		// clears it when it suspends a job.
		if job.Status.StartTime != nil && len(s.active) == 0 {
			job.Status.StartTime = nil
			suspendChanged = true
		}
	case manageCalled && setJobCondition(job, api.JobSuspended, api.ConditionFalse, "JobResumed", "Job resumed", now):
		suspendChanged = true
		r.events.Eventf(ctx, job, api.EventNormal, "Resumed", "Job resumed")
		t := api.NewTime(now)
		job.Status.StartTime = &t
	}
	return wait, suspendChanged, err
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

func isSuspended(job *api.Job) bool { return job.Spec.Suspend != nil && *job.Spec.Suspend }

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

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
