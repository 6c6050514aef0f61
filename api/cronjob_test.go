package api

import (
	"strings"
	"testing"
	"time"
)

func TestCronJobDefaultsAndTemplate(t *testing.T) {
	o, _, err := DecodeAny([]byte(`apiVersion: batch/v1
kind: CronJob
metadata: {name: hello, namespace: default}
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      selector: {matchLabels: {a: b}}
      manualSelector: true
      template:
        metadata: {labels: {a: b}}
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox}]
`))
	if err != nil {
		t.Fatal(err)
	}
	cj := o.(*CronJob)
	SetDefaults(cj)
	s := cj.Spec
	if s.ConcurrencyPolicy != AllowConcurrent || *s.Suspend || *s.SuccessfulJobsHistoryLimit != 3 || *s.FailedJobsHistoryLimit != 1 {
		t.Errorf("defaults %+v", s)
	}
	if s.JobTemplate.Spec.BackoffLimit != nil {
		t.Errorf("the job template got the Job's defaults (backoffLimit %d): Kubernetes leaves them to each Job", *s.JobTemplate.Spec.BackoffLimit)
	}
	var got []string
	for _, e := range Validate(cj) {
		got = append(got, e.Error())
	}
	want := []string{
		"spec.jobTemplate.spec.selector: Invalid value:",
		`spec.jobTemplate.spec.manualSelector: Unsupported value: true: supported values: "nil", "false"`,
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], want[0]) || !strings.HasSuffix(got[0], "`selector` will be auto-generated") || got[1] != want[1] {
		t.Errorf("errors %q", got)
	}
}

func TestCronScheduleTimeZone(t *testing.T) {
	tz := "America/New_York"
	cj := &CronJob{Spec: CronJobSpec{Schedule: "30 6 * * *", TimeZone: &tz}}
	sched, err := CronSchedule(cj)
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)
	if next := sched.Next(from); !next.Equal(time.Date(2025, 7, 1, 10, 30, 0, 0, time.UTC)) {
		t.Errorf("next %v, want 06:30 in New York (10:30 UTC in July)", next.UTC())
	}
	for _, bad := range []string{"", "Local", "../etc/passwd", "Nowhere/Land"} {
		if errs := validateTimeZone(&bad); len(errs) != 1 {
			t.Errorf("timeZone %q: %v, want one error", bad, errs)
		}
	}
}
