package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The CronJob controller makes a Job from a CronJob's template at each
// time of its schedule, as Kubernetes' (pkg/controller/cronjob, the v2
// controller). One reconcile of one CronJob:
//
//  1. Its Jobs are those it controls (controller reference, by uid). A
//     finished Job leaves status.active (SawCompletedJob); a completed one
//     moves status.lastSuccessfulTime; an active Job that no longer exists
//     leaves the list (MissingJob); an unfinished Job it controls that the
//     list lacks is reported (UnexpectedJob: made by `create job
//     --from=cronjob/NAME`, or the controller crashed between its writes).
//  2. Suspended, or a schedule or time zone that no longer parses: no new
//     Job.
//  3. The most recent scheduled time that has passed since the last one
//     (status.lastScheduleTime, or the CronJob's creation) is the one to
//     start; the ones before it were missed and are not run. More than 100
//     missed times is reported (TooManyMissedTimes). With
//     startingDeadlineSeconds, a time older than the deadline is not run
//     (MissSchedule), and times before the deadline are not even counted.
//  4. concurrencyPolicy: Forbid skips the start while a Job is active
//     (JobAlreadyActive); Replace deletes the active Jobs first; Allow runs
//     them side by side.
//  5. The Job is named <cronjob>-<scheduled time in minutes since the
//     epoch>: one name per scheduled time, so a Job is never made twice
//     for one time, whatever crashes in between. It is added to
//     status.active and lastScheduleTime moves to its time.
//  6. Finished Jobs beyond successfulJobsHistoryLimit (default 3) and
//     failedJobsHistoryLimit (default 1) are deleted, oldest first.
//  7. The reconcile comes back 100 ms after the next scheduled time (the
//     loop's delayed requeue): no periodic polling.
//
// Time is read from a clock the tests set (now), so the controller is
// tested minute by minute without waiting.
type CronJobController struct {
	client   client.Interface
	cronjobs Lister // *api.CronJob
	jobs     Lister // *api.Job
	events   EventRecorder
	log      *slog.Logger
	// now is the clock (tests set it).
	now func() time.Time
}

const cronJobControllerName = "cronjob-controller"

// nextScheduleDelta pads the requeue after a scheduled time (Kubernetes':
// clock skew between the timer and the clock).
const nextScheduleDelta = 100 * time.Millisecond

// tooManyMissed is the number of missed start times above which the
// controller warns (Kubernetes' 100).
const tooManyMissed = 100

func cronJobKind() *api.Kind { return api.MustKindOf(&api.CronJob{}) }

// NewCronJobController returns the controller; the listers are caches of
// all namespaces.
func NewCronJobController(c client.Interface, cronjobs, jobs Lister, events EventRecorder, log *slog.Logger) *CronJobController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if events == nil {
		events = nopRecorder{}
	}
	return &CronJobController{client: c, cronjobs: cronjobs, jobs: jobs, events: events,
		log: log.With("controller", cronJobControllerName), now: time.Now}
}

// JobHandler enqueues the CronJob that controls a Job.
func (r *CronJobController) JobHandler(enqueue func(key string)) client.Handler {
	return ownedHandler("CronJob", enqueue, func(string, labels.Set) []string { return nil })
}

// cjSync is what one reconcile knows and does about one CronJob.
type cjSync struct {
	cj   *api.CronJob // a copy: its status is what the reconcile writes
	key  string
	jobs []*api.Job
	now  time.Time
	did  []string
}

// Reconcile makes the Job of a CronJob's latest scheduled time when it is
// due, and keeps its status and history. It implements client.Reconciler.
func (r *CronJobController) Reconcile(ctx context.Context, key string) error {
	ns, name := client.SplitKey(key)
	cached, ok := getAs[*api.CronJob](r.cronjobs, ns, name)
	if !ok {
		logReconcile(r.log, false, key, "gone", "gone", "none")
		return nil
	}
	s := &cjSync{cj: api.Clone(cached), key: key, now: r.now()}
	for _, j := range listAs[*api.Job](r.jobs.ListBy(nil, ns)) {
		if api.IsControlledBy(j, cached.UID) {
			s.jobs = append(s.jobs, j)
		}
	}
	requeue, err := r.sync(ctx, s)
	r.cleanupFinished(ctx, s)
	var statusErr error
	if !reflect.DeepEqual(cached.Status, s.cj.Status) {
		if _, statusErr = r.client.UpdateStatus(ctx, s.cj); statusErr != nil && !api.IsNotFound(statusErr) {
			statusErr = fmt.Errorf("cronjob %s: update status: %w", key, statusErr)
		} else {
			statusErr = nil
		}
	}
	r.logLine(s, requeue)
	if err := errors.Join(err, statusErr); err != nil {
		return requeueOnConflict(r.log, "cronjob "+key, err)
	}
	if requeue != nil {
		return client.RequeueAfter(*requeue)
	}
	return nil
}

// sync is steps 1 to 5; it returns when to come back (nil: only on a
// change).
func (r *CronJobController) sync(ctx context.Context, s *cjSync) (*time.Duration, error) {
	if err := r.reconcileActive(ctx, s); err != nil {
		return nil, err
	}
	cj := s.cj
	if cj.DeletionTimestamp != nil {
		return nil, nil
	}
	if tz := cj.Spec.TimeZone; tz != nil {
		if _, err := time.LoadLocation(*tz); err != nil {
			r.events.Eventf(ctx, cj, api.EventWarning, "UnknownTimeZone", "invalid timeZone: %q: %s", *tz, err)
			return nil, nil
		}
	}
	if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
		s.did = append(s.did, "none (suspended)")
		return nil, nil
	}
	sched, err := api.CronSchedule(cj)
	if err != nil {
		r.events.Eventf(ctx, cj, api.EventWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
		return nil, nil
	}
	scheduled, missed, err := mostRecentScheduleTime(cj, s.now, sched, true)
	if err != nil {
		r.events.Eventf(ctx, cj, api.EventWarning, "InvalidSchedule", "invalid schedule: %s : %s", cj.Spec.Schedule, err)
		return nil, nil
	}
	next := nextScheduleDuration(cj, s.now, sched)
	if scheduled == nil {
		return next, nil // nothing due yet
	}
	if missed > tooManyMissed {
		r.events.Eventf(ctx, cj, api.EventWarning, "TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil && scheduled.Add(time.Duration(*d)*time.Second).Before(s.now) {
		r.events.Eventf(ctx, cj, api.EventWarning, "MissSchedule", "Missed scheduled time to start a job: %s", scheduled.UTC().Format(time.RFC1123Z))
		s.did = append(s.did, "none (missed "+scheduled.UTC().Format(time.RFC3339)+", past startingDeadlineSeconds)")
		return next, nil
	}
	name := CronJobJobName(cj, *scheduled)
	if slices.ContainsFunc(cj.Status.Active, func(a api.ObjectReference) bool { return a.Name == name }) ||
		(cj.Status.LastScheduleTime != nil && cj.Status.LastScheduleTime.Equal(*scheduled)) {
		return next, nil // this time is done
	}
	if cj.Spec.ConcurrencyPolicy == api.ForbidConcurrent && len(cj.Status.Active) > 0 {
		r.events.Eventf(ctx, cj, api.EventNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
		s.did = append(s.did, "none (a Job is active and concurrencyPolicy is Forbid)")
		return next, nil
	}
	if cj.Spec.ConcurrencyPolicy == api.ReplaceConcurrent {
		for _, a := range slices.Clone(cj.Status.Active) {
			if err := r.deleteJob(ctx, s, a.Namespace, a.Name, a.UID); err != nil {
				return nil, err
			}
		}
	}
	if err := r.createJob(ctx, s, *scheduled); err != nil {
		return nil, err
	}
	return next, nil
}

// reconcileActive is step 1.
func (r *CronJobController) reconcileActive(ctx context.Context, s *cjSync) error {
	cj := s.cj
	children := map[string]bool{}
	for _, j := range s.jobs {
		children[j.UID] = true
		active := slices.ContainsFunc(cj.Status.Active, func(a api.ObjectReference) bool { return a.UID == j.UID })
		finished := api.IsJobFinished(j)
		switch {
		case !active && !finished:
			r.events.Eventf(ctx, cj, api.EventWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name)
		case active && finished:
			removeActive(cj, j.UID)
			r.events.Eventf(ctx, cj, api.EventNormal, "SawCompletedJob", "Saw completed job: %s, condition: %s", j.Name, finishedCondition(j))
		}
		if c := j.Condition(api.JobComplete); c != nil && c.Status == api.ConditionTrue && j.Status.CompletionTime != nil {
			if t := cj.Status.LastSuccessfulTime; t == nil || j.Status.CompletionTime.After(t.Time) {
				ct := *j.Status.CompletionTime
				cj.Status.LastSuccessfulTime = &ct
			}
		}
	}
	for _, a := range slices.Clone(cj.Status.Active) {
		if children[a.UID] {
			continue
		}
		// Not in the cache: ask the API before calling it gone.
		_, err := client.Get[*api.Job](ctx, r.client, a.Namespace, a.Name)
		switch {
		case api.IsNotFound(err):
			r.events.Eventf(ctx, cj, api.EventNormal, "MissingJob", "Active job went missing: %s", a.Name)
			removeActive(cj, a.UID)
		case err != nil:
			return fmt.Errorf("cronjob %s: read job %s: %w", s.key, a.Name, err)
		}
	}
	return nil
}

// finishedCondition is the type of a finished Job's terminal condition.
func finishedCondition(j *api.Job) string {
	for _, c := range j.Status.Conditions {
		if (c.Type == api.JobComplete || c.Type == api.JobFailed) && c.Status == api.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

func removeActive(cj *api.CronJob, uid string) {
	cj.Status.Active = slices.DeleteFunc(cj.Status.Active, func(a api.ObjectReference) bool { return a.UID == uid })
	if len(cj.Status.Active) == 0 {
		cj.Status.Active = nil
	}
}

// createJob makes the Job of scheduled (step 5). A Job of that name that
// this CronJob controls already exists when an earlier reconcile made it
// and could not write the status: it is put in the list again.
func (r *CronJobController) createJob(ctx context.Context, s *cjSync, scheduled time.Time) error {
	cj := s.cj
	job, err := NewJobFromCronJob(cj, scheduled)
	if err != nil {
		return err
	}
	out, err := r.client.Create(ctx, job)
	switch {
	case api.IsAlreadyExists(err):
		existing, gerr := client.Get[*api.Job](ctx, r.client, job.Namespace, job.Name)
		if gerr != nil {
			return fmt.Errorf("cronjob %s: read job %s: %w", s.key, job.Name, gerr)
		}
		if !api.IsControlledBy(existing, cj.UID) || slices.ContainsFunc(cj.Status.Active, func(a api.ObjectReference) bool { return a.UID == existing.UID }) {
			return nil
		}
		out = existing
	case err != nil:
		r.events.Eventf(ctx, cj, api.EventWarning, "FailedCreate", "Error creating job: %v", err)
		return fmt.Errorf("cronjob %s: create job %s: %w", s.key, job.Name, err)
	default:
		r.events.Eventf(ctx, cj, api.EventNormal, "SuccessfulCreate", "Created job %s", out.GetObjectMeta().Name)
		s.did = append(s.did, "created job "+out.GetObjectMeta().Name)
	}
	m := out.GetObjectMeta()
	cj.Status.Active = append(cj.Status.Active, api.ObjectReference{Kind: "Job", APIVersion: "batch/v1",
		Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion})
	t := api.NewTime(scheduled)
	cj.Status.LastScheduleTime = &t
	return nil
}

// CronJobJobName is the name of the Job of a scheduled time:
// <cronjob>-<minutes since the epoch>.
func CronJobJobName(cj *api.CronJob, scheduled time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, scheduled.Unix()/60)
}

// NewJobFromCronJob builds the Job of a scheduled time (Kubernetes'
// getJobFromTemplate2): the template's labels, annotations and spec, the
// scheduled time in the annotation batch.kubernetes.io/cronjob-scheduled-timestamp
// (in the CronJob's time zone), a controller reference to the CronJob.
func NewJobFromCronJob(cj *api.CronJob, scheduled time.Time) (*api.Job, error) {
	tz := ""
	if cj.Spec.TimeZone != nil {
		tz = *cj.Spec.TimeZone
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, err
	}
	t := api.Clone(cj).Spec.JobTemplate
	annotations := maps.Clone(t.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[api.AnnotationCronJobScheduledTimestamp] = scheduled.In(loc).Format(time.RFC3339)
	j := &api.Job{
		ObjectMeta: api.ObjectMeta{
			Name:            CronJobJobName(cj, scheduled),
			Namespace:       cj.Namespace,
			Labels:          t.Labels,
			Annotations:     annotations,
			OwnerReferences: []api.OwnerReference{controllerRef(cj)},
		},
		Spec: t.Spec,
	}
	api.SetTypeMeta(j)
	return j, nil
}

// deleteJob deletes a Job (and, in the background, its pods) and drops
// it from the active list.
func (r *CronJobController) deleteJob(ctx context.Context, s *cjSync, ns, name, uid string) error {
	err := r.client.Delete(ctx, jobKind(), ns, name, api.DeleteOptions{PropagationPolicy: "Background", Preconditions: &api.Preconditions{UID: &uid}})
	if err != nil && !api.IsNotFound(err) {
		r.events.Eventf(ctx, s.cj, api.EventWarning, "FailedDelete", "Deleted job: %v", err)
		return fmt.Errorf("cronjob %s: delete job %s: %w", s.key, name, err)
	}
	removeActive(s.cj, uid)
	r.events.Eventf(ctx, s.cj, api.EventNormal, "SuccessfulDelete", "Deleted job %s", name)
	s.did = append(s.did, "deleted job "+name)
	return nil
}

// cleanupFinished is step 6: the oldest finished Jobs beyond each limit go.
func (r *CronJobController) cleanupFinished(ctx context.Context, s *cjSync) {
	var succeeded, failed []*api.Job
	for _, j := range s.jobs {
		switch finishedCondition(j) {
		case api.JobComplete:
			succeeded = append(succeeded, j)
		case api.JobFailed:
			failed = append(failed, j)
		}
	}
	for _, l := range []struct {
		jobs  []*api.Job
		limit *int32
	}{{succeeded, s.cj.Spec.SuccessfulJobsHistoryLimit}, {failed, s.cj.Spec.FailedJobsHistoryLimit}} {
		if l.limit == nil || len(l.jobs) <= int(*l.limit) {
			continue
		}
		slices.SortStableFunc(l.jobs, byStartTime)
		for _, j := range l.jobs[:len(l.jobs)-int(*l.limit)] {
			if err := r.deleteJob(ctx, s, j.Namespace, j.Name, j.UID); err != nil {
				r.log.Warn("history cleanup", "key", s.key, "err", err)
			}
		}
	}
}

// byStartTime orders Jobs by status.startTime (none last), then name.
func byStartTime(a, b *api.Job) int {
	sa, sb := a.Status.StartTime, b.Status.StartTime
	switch {
	case sa == nil && sb != nil:
		return 1
	case sa != nil && sb == nil:
		return -1
	case sa != nil && !sa.Equal(sb.Time):
		return sa.Compare(sb.Time)
	}
	return strings.Compare(a.Name, b.Name)
}

func (r *CronJobController) logLine(s *cjSync, requeue *time.Duration) {
	cj := s.cj
	observed := fmt.Sprintf("%s active", plural(len(cj.Status.Active), "job"))
	if t := cj.Status.LastScheduleTime; t != nil {
		observed += ", last scheduled " + t.UTC().Format(time.RFC3339)
	}
	desired := "a job at each time of " + cj.Spec.Schedule
	if requeue != nil {
		desired += fmt.Sprintf(" (next in %s)", requeue.Round(time.Second))
	}
	action := "none"
	if len(s.did) > 0 {
		action = strings.Join(s.did, ", ")
	}
	logReconcile(r.log, len(s.did) > 0 && !strings.HasPrefix(action, "none"), s.key, observed, desired, action)
}

// mostRecentScheduleTime is Kubernetes' (cronjob/utils.go): from the last
// scheduled time (or the creation, or with a starting deadline at most
// that long ago), the latest scheduled time not after now (nil: none) and
// roughly how many times were passed since.
func mostRecentScheduleTime(cj *api.CronJob, now time.Time, sched cron.Schedule, withDeadline bool) (*time.Time, int64, error) {
	earliest := earliestScheduleTime(cj, now, withDeadline)
	t1 := sched.Next(earliest)
	t2 := sched.Next(t1)
	if now.Before(t1) {
		return nil, 0, nil
	}
	if now.Before(t2) {
		return &t1, 1, nil
	}
	// A schedule that is valid but never fires ("59 23 31 2 *") gives two
	// equal times.
	between := int64(t2.Sub(t1).Round(time.Second).Seconds())
	if between < 1 {
		return nil, 0, fmt.Errorf("time difference between two schedules is less than 1 second")
	}
	missed := int64(now.Sub(t1).Seconds())/between + 1
	var recent time.Time
	for t := sched.Next(t1.Add(time.Duration((missed-2)*between) * time.Second)); !t.After(now); t = sched.Next(t) {
		recent = t
	}
	if recent.IsZero() {
		return nil, missed, nil
	}
	return &recent, missed, nil
}

// earliestScheduleTime is where the search for due times starts.
func earliestScheduleTime(cj *api.CronJob, now time.Time, withDeadline bool) time.Time {
	earliest := cj.CreationTimestamp.Time
	if t := cj.Status.LastScheduleTime; t != nil {
		earliest = t.Time
	}
	if d := cj.Spec.StartingDeadlineSeconds; withDeadline && d != nil {
		if deadline := now.Add(-time.Duration(*d) * time.Second); deadline.After(earliest) {
			earliest = deadline
		}
	}
	return earliest.In(now.Location()) // a schedule without time zone is in the clock's
}

// nextScheduleDuration is how long until the next scheduled time after
// the last one, plus nextScheduleDelta (Kubernetes' nextScheduleTimeDuration).
func nextScheduleDuration(cj *api.CronJob, now time.Time, sched cron.Schedule) *time.Duration {
	recent, missed, err := mostRecentScheduleTime(cj, now, sched, false)
	from := now
	switch {
	case err != nil:
	case recent != nil:
		from = *recent
	case missed == 0:
		from = earliestScheduleTime(cj, now, false)
	}
	d := sched.Next(from).Add(nextScheduleDelta).Sub(now)
	return &d
}
