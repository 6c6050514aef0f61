package table

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"skiff.dev/skiff/api"
)

// The batch group (batch/v1), as Kubernetes' printJob.

func jobPrinter() Printer {
	spec, status := batchv1.JobSpec{}.SwaggerDoc(), batchv1.JobStatus{}.SwaggerDoc()
	return Printer{
		Columns: append([]metav1.TableColumnDefinition{
			nameColumn(),
			col("Status", "Status of the job."),
			col("Completions", status["succeeded"]),
			col("Duration", "Time required to complete the job."),
			ageColumn(),
		}, templateColumns(spec["selector"])...),
		Cells: func(o api.Object, now time.Time) []any {
			j := o.(*api.Job)
			names, images := containerCells(j.Spec.Template.Spec)
			return []any{j.Name, JobStatus(j), JobCompletions(j), JobDuration(j, now), Age(now, j.CreationTimestamp.Time),
				names, images, Selector(j.Spec.Selector)}
		},
	}
}

// cronJobPrinter is kubectl's printCronJob: NAME SCHEDULE TIMEZONE SUSPEND
// ACTIVE LAST SCHEDULE AGE; wide CONTAINERS IMAGES SELECTOR.
func cronJobPrinter() Printer {
	spec, status := batchv1.CronJobSpec{}.SwaggerDoc(), batchv1.CronJobStatus{}.SwaggerDoc()
	return Printer{
		Columns: append([]metav1.TableColumnDefinition{
			nameColumn(),
			col("Schedule", spec["schedule"]),
			col("Timezone", spec["timeZone"]),
			typed(col("Suspend", spec["suspend"]), "boolean"),
			typed(col("Active", status["active"]), "integer"),
			col("Last Schedule", status["lastScheduleTime"]),
			ageColumn(),
		}, templateColumns(batchv1.JobSpec{}.SwaggerDoc()["selector"])...),
		Cells: func(o api.Object, now time.Time) []any {
			cj := o.(*api.CronJob)
			names, images := containerCells(cj.Spec.JobTemplate.Spec.Template.Spec)
			tz := "<none>"
			if cj.Spec.TimeZone != nil {
				tz = *cj.Spec.TimeZone
			}
			suspend := "<unset>"
			if cj.Spec.Suspend != nil {
				suspend = "False"
				if *cj.Spec.Suspend {
					suspend = "True"
				}
			}
			last := "<none>"
			if t := cj.Status.LastScheduleTime; t != nil {
				last = Age(now, t.Time)
			}
			return []any{cj.Name, cj.Spec.Schedule, tz, suspend, int64(len(cj.Status.Active)), last, Age(now, cj.CreationTimestamp.Time),
				names, images, Selector(cj.Spec.JobTemplate.Spec.Selector)}
		},
	}
}

// JobStatus is the STATUS column: Complete, Failed, Terminating,
// Suspended, FailureTarget, SuccessCriteriaMet or Running, in kubectl's order.
func JobStatus(j *api.Job) string {
	has := func(t string) bool {
		c := j.Condition(t)
		return c != nil && c.Status == api.ConditionTrue
	}
	switch {
	case has(api.JobComplete):
		return "Complete"
	case has(api.JobFailed):
		return "Failed"
	case j.DeletionTimestamp != nil:
		return "Terminating"
	case has(api.JobSuspended):
		return "Suspended"
	case has(api.JobFailureTarget):
		return "FailureTarget"
	case has(api.JobSuccessCriteriaMet):
		return "SuccessCriteriaMet"
	}
	return "Running"
}

// JobCompletions is the COMPLETIONS column: "succeeded/completions", or
// without completions "succeeded/1" ("succeeded/1 of parallelism").
func JobCompletions(j *api.Job) string {
	if c := j.Spec.Completions; c != nil {
		return fmt.Sprintf("%d/%d", j.Status.Succeeded, *c)
	}
	if p := j.Spec.Parallelism; p != nil && *p > 1 {
		return fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, *p)
	}
	return fmt.Sprintf("%d/1", j.Status.Succeeded)
}

// JobDuration is the DURATION column: from startTime to completionTime (or
// now); empty before the job started.
func JobDuration(j *api.Job, now time.Time) string {
	switch {
	case j.Status.StartTime == nil:
		return ""
	case j.Status.CompletionTime == nil:
		return duration.HumanDuration(now.Sub(j.Status.StartTime.Time))
	}
	return duration.HumanDuration(j.Status.CompletionTime.Sub(j.Status.StartTime.Time))
}
