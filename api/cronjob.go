package api

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	_ "time/tzdata" // spec.timeZone names an IANA zone: known whatever the host has installed

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/validation"
)

// CronJob (batch/v1) makes a Job from its jobTemplate at each time of its
// cron schedule. Its controller (controlplane/controllers/cronjob.go) names
// each Job <cronjob>-<scheduled time in minutes since the epoch>, keeps the
// running ones in status.active and the newest finished ones up to the
// history limits.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type CronJob struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired behaviour.
	Spec CronJobSpec `json:"spec,omitempty"`
	// Status is the observed state, written by the cronjob controller.
	Status CronJobStatus `json:"status,omitempty"`
}

// CronJobSpec of a cron job.
type CronJobSpec struct {
	// Schedule in cron format ("*/5 * * * *", "@hourly"), as Kubernetes
	// parses it (github.com/robfig/cron/v3, ParseStandard).
	Schedule string `json:"schedule"`
	// TimeZone of the schedule (an IANA name such as "Europe/Berlin");
	// unset: the controller's local time zone (skiff: UTC).
	TimeZone *string `json:"timeZone,omitempty"`
	// StartingDeadlineSeconds: a start missed by more than this is
	// skipped (MissSchedule) instead of run late.
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`
	// ConcurrencyPolicy when a start comes while a Job still runs: Allow
	// (default), Forbid (skip the start) or Replace (delete the running Job).
	ConcurrencyPolicy string `json:"concurrencyPolicy,omitempty"`
	// Suspend stops new starts (running Jobs go on).
	Suspend *bool `json:"suspend,omitempty"`
	// JobTemplate is the Job made at each start.
	JobTemplate JobTemplateSpec `json:"jobTemplate"`
	// SuccessfulJobsHistoryLimit: finished Jobs kept that completed (default 3).
	SuccessfulJobsHistoryLimit *int32 `json:"successfulJobsHistoryLimit,omitempty"`
	// FailedJobsHistoryLimit: finished Jobs kept that failed (default 1).
	FailedJobsHistoryLimit *int32 `json:"failedJobsHistoryLimit,omitempty"`
}

// JobTemplateSpec is the Job a CronJob makes: metadata and spec.
type JobTemplateSpec struct {
	// Metadata of the Jobs made (labels, annotations).
	ObjectMeta `json:"metadata,omitempty"`
	// Spec of the Jobs made; the selector is generated for each Job.
	Spec JobSpec `json:"spec,omitempty"`
}

// CronJobStatus is what the controller observed.
type CronJobStatus struct {
	// Active lists the Jobs of this CronJob that have not finished.
	Active []ObjectReference `json:"active,omitempty"`
	// LastScheduleTime is the scheduled time of the latest Job made.
	LastScheduleTime *Time `json:"lastScheduleTime,omitempty"`
	// LastSuccessfulTime is when a Job of this CronJob last completed.
	LastSuccessfulTime *Time `json:"lastSuccessfulTime,omitempty"`
}

// CronJob concurrency policies and well-known names.
const (
	AllowConcurrent   = "Allow"
	ForbidConcurrent  = "Forbid"
	ReplaceConcurrent = "Replace"
	// AnnotationCronJobScheduledTimestamp on a Job: the time it was
	// scheduled for, RFC 3339 in the CronJob's time zone.
	AnnotationCronJobScheduledTimestamp = "batch.kubernetes.io/cronjob-scheduled-timestamp"
	// AnnotationCronJobInstantiate marks a Job made by hand from a CronJob
	// (`create job --from=cronjob/NAME`): "manual".
	AnnotationCronJobInstantiate = "cronjob.kubernetes.io/instantiate"
	// maxCronJobNameLength leaves room for the "-<minutes>" of Job names
	// (63 - 11).
	maxCronJobNameLength = validation.DNS1035LabelMaxLength - 11
)

// CronSchedule parses a CronJob's schedule as its controller does: the
// standard five fields or a descriptor (@hourly, @every 1h30m), in
// spec.timeZone when one is set (Kubernetes' formatSchedule).
func CronSchedule(cj *CronJob) (cron.Schedule, error) {
	s := cj.Spec.Schedule
	if tz := cj.Spec.TimeZone; tz != nil && !strings.Contains(s, "TZ") {
		if _, err := time.LoadLocation(*tz); err == nil {
			s = "TZ=" + *tz + " " + s
		}
	}
	return cron.ParseStandard(s)
}

// CronJobNextRun is when a CronJob's next Job is due after now (what
// `skiff describe cronjob` shows); the zero time when it is suspended.
func CronJobNextRun(cj *CronJob, now time.Time) (time.Time, error) {
	if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
		return time.Time{}, nil
	}
	sched, err := CronSchedule(cj)
	if err != nil {
		return time.Time{}, err
	}
	return sched.Next(now), nil
}

func defaultCronJob(cj *CronJob) {
	s := &cj.Spec
	if s.ConcurrencyPolicy == "" {
		s.ConcurrencyPolicy = AllowConcurrent
	}
	if s.Suspend == nil {
		s.Suspend = ptr(false)
	}
	if s.SuccessfulJobsHistoryLimit == nil {
		s.SuccessfulJobsHistoryLimit = ptr[int32](3)
	}
	if s.FailedJobsHistoryLimit == nil {
		s.FailedJobsHistoryLimit = ptr[int32](1)
	}
	// Kubernetes defaults only the pod template of the Job template; the
	// Job's own defaults come when the controller creates each Job.
	defaultPodSpec(&s.JobTemplate.Spec.Template.Spec)
}

// validTimeZoneCharacters is Kubernetes' check of each part of a zone name.
var validTimeZoneCharacters = regexp.MustCompile(`^[A-Za-z\.\-_0-9+]{1,14}$`)

// validateCronJob is Kubernetes' ValidateCronJobCreate, its rules and
// words. A TZ in the schedule is refused (Kubernetes lets only CronJobs
// stored before it refused one keep theirs; skiff never stored one).
func validateCronJob(cj *CronJob) FieldErrors {
	errs := validateMeta(&cj.ObjectMeta, true, isDNS1123Subdomain)
	if len(cj.Name) > maxCronJobNameLength {
		errs = append(errs, Invalid("metadata.name", cj.Name, fmt.Sprintf("must be no more than %d characters", maxCronJobNameLength)))
	}
	s := &cj.Spec
	if s.Schedule == "" {
		errs = append(errs, Required("spec.schedule", ""))
	} else {
		errs = append(errs, validateSchedule(s.Schedule)...)
	}
	errs = append(errs, validateTimeZone(s.TimeZone)...)
	if s.StartingDeadlineSeconds != nil {
		errs = append(errs, nonNegative(*s.StartingDeadlineSeconds, "spec.startingDeadlineSeconds")...)
	}
	switch s.ConcurrencyPolicy {
	case "", AllowConcurrent, ForbidConcurrent, ReplaceConcurrent:
	default:
		errs = append(errs, NotSupported("spec.concurrencyPolicy", s.ConcurrencyPolicy, AllowConcurrent, ForbidConcurrent, ReplaceConcurrent))
	}
	for _, f := range []struct {
		v    *int32
		path string
	}{{s.SuccessfulJobsHistoryLimit, "spec.successfulJobsHistoryLimit"}, {s.FailedJobsHistoryLimit, "spec.failedJobsHistoryLimit"}} {
		if f.v != nil {
			errs = append(errs, nonNegative(int64(*f.v), f.path)...)
		}
	}
	return append(errs, validateJobTemplate(&s.JobTemplate)...)
}

// validateSchedule parses the schedule as the controller will, and
// refuses TZ= or CRON_TZ= in it: the time zone goes in spec.timeZone.
func validateSchedule(schedule string) FieldErrors {
	var errs FieldErrors
	if _, err := cron.ParseStandard(schedule); err != nil {
		errs = append(errs, Invalid("spec.schedule", schedule, err.Error()))
	}
	if strings.Contains(schedule, "TZ") {
		errs = append(errs, Invalid("spec.schedule", schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
	}
	return errs
}

// validateTimeZone is Kubernetes' validateTimeZone.
func validateTimeZone(tz *string) FieldErrors {
	if tz == nil {
		return nil
	}
	const p = "spec.timeZone"
	if *tz == "" {
		return FieldErrors{Invalid(p, *tz, "timeZone must be nil or non-empty string")}
	}
	for _, part := range strings.Split(*tz, "/") {
		if part == "." || part == ".." || strings.HasPrefix(part, "-") || !validTimeZoneCharacters.MatchString(part) {
			return FieldErrors{Invalid(p, *tz, fmt.Sprintf("unknown time zone %s", *tz))}
		}
	}
	if strings.EqualFold(*tz, "Local") {
		return FieldErrors{Invalid(p, *tz, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones")}
	}
	if _, err := time.LoadLocation(*tz); err != nil {
		return FieldErrors{Invalid(p, *tz, err.Error())}
	}
	return nil
}

// validateJobTemplate is Kubernetes' ValidateJobTemplateSpec: the Job spec
// as each Job will have it (with the selector its controller generates),
// and no selector of its own.
func validateJobTemplate(t *JobTemplateSpec) FieldErrors {
	const p = "spec.jobTemplate."
	var errs FieldErrors
	if t.Spec.Selector != nil {
		errs = append(errs, Invalid(p+"spec.selector", selectorValue(t.Spec.Selector), "`selector` will be auto-generated"))
	}
	if t.Spec.ManualSelector != nil && *t.Spec.ManualSelector {
		errs = append(errs, NotSupported(p+"spec.manualSelector", *t.Spec.ManualSelector, "nil", "false"))
	}
	j := Clone(&Job{ObjectMeta: ObjectMeta{Name: "template", UID: "uid-of-each-job"}, Spec: t.Spec})
	j.Spec.Selector, j.Spec.ManualSelector = nil, nil
	GenerateJobSelector(j)
	errs = append(errs, validateLabels(t.Labels, p+"metadata.labels")...)
	for _, e := range validateJobSpec(&j.Spec) {
		e.Field = p + e.Field
		errs = append(errs, e)
	}
	return errs
}

// NewManualJob is the Job `kubectl create job NAME --from=cronjob/CJ`
// makes: the CronJob's job template, annotated
// cronjob.kubernetes.io/instantiate=manual, owned (as its controller) by
// the CronJob, which then counts it in its history.
func NewManualJob(cj *CronJob, name string) *Job {
	t := Clone(cj).Spec.JobTemplate
	annotations := map[string]string{AnnotationCronJobInstantiate: "manual"}
	for k, v := range t.Annotations {
		annotations[k] = v
	}
	yes := true
	j := &Job{
		ObjectMeta: ObjectMeta{
			Name:            name,
			Namespace:       cj.Namespace,
			Annotations:     annotations,
			Labels:          t.Labels,
			OwnerReferences: []OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cj.Name, UID: cj.UID, Controller: &yes}},
		},
		Spec: t.Spec,
	}
	SetTypeMeta(j)
	return j
}
