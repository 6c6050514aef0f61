package cli

import (
	"k8s.io/apimachinery/pkg/util/duration"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/table"
)

// describeJob writes a Job's sections as kubectl's describeJob.
func describeJob(w *describeWriter, j *api.Job) {
	w.line(0, "Name:\t%s\n", j.Name)
	w.line(0, "Namespace:\t%s\n", j.Namespace)
	w.line(0, "Selector:\t%s\n", table.Selector(j.Spec.Selector))
	w.labels(0, j.Labels)
	w.annotations(0, j.Annotations)
	controlledBy(w, j)
	s, st := j.Spec, j.Status
	if s.Parallelism != nil {
		w.line(0, "Parallelism:\t%d\n", *s.Parallelism)
	}
	if s.Completions != nil {
		w.line(0, "Completions:\t%d\n", *s.Completions)
	} else {
		w.line(0, "Completions:\t<unset>\n")
	}
	if s.CompletionMode != nil {
		w.line(0, "Completion Mode:\t%s\n", *s.CompletionMode)
	}
	if s.Suspend != nil {
		w.line(0, "Suspend:\t%v\n", *s.Suspend)
	}
	if s.BackoffLimit != nil {
		w.line(0, "Backoff Limit:\t%v\n", *s.BackoffLimit)
	}
	if s.TTLSecondsAfterFinished != nil {
		w.line(0, "TTL Seconds After Finished:\t%v\n", *s.TTLSecondsAfterFinished)
	}
	if st.StartTime != nil {
		w.line(0, "Start Time:\t%s\n", describeTime(st.StartTime.Time))
	}
	if st.CompletionTime != nil {
		w.line(0, "Completed At:\t%s\n", describeTime(st.CompletionTime.Time))
	}
	if st.StartTime != nil && st.CompletionTime != nil {
		w.line(0, "Duration:\t%s\n", duration.HumanDuration(st.CompletionTime.Sub(st.StartTime.Time)))
	}
	if s.ActiveDeadlineSeconds != nil {
		w.line(0, "Active Deadline Seconds:\t%ds\n", *s.ActiveDeadlineSeconds)
	}
	if st.Ready == nil {
		w.line(0, "Pods Statuses:\t%d Active / %d Succeeded / %d Failed\n", st.Active, st.Succeeded, st.Failed)
	} else {
		w.line(0, "Pods Statuses:\t%d Active (%d Ready) / %d Succeeded / %d Failed\n", st.Active, *st.Ready, st.Succeeded, st.Failed)
	}
	if j.IsIndexed() {
		w.line(0, "Completed Indexes:\t%s\n", capIndexes(st.CompletedIndexes))
		if s.BackoffLimitPerIndex != nil {
			failed := ""
			if st.FailedIndexes != nil {
				failed = *st.FailedIndexes
			}
			w.line(0, "Failed Indexes:\t%s\n", capIndexes(failed))
		}
	}
	printPodTemplate(w, 0, s.Template)
}

// capIndexes is kubectl's capIndexesListOrNone: "<none>", or the list up
// to the first comma at or after 50 characters, then "...".
func capIndexes(s string) string {
	const softLimit = 50
	if s == "" {
		return "<none>"
	}
	ix := softLimit
	for ; ix < len(s); ix++ {
		if s[ix] == ',' {
			break
		}
	}
	if ix >= len(s) {
		return s
	}
	return s[:ix+1] + "..."
}
