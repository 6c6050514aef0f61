package table

import (
	"reflect"
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

func TestJobColumns(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	tmpl := api.PodTemplateSpec{Spec: api.PodSpec{Containers: []api.Container{{Name: "pi", Image: "busybox"}}}}
	sel := &api.LabelSelector{MatchLabels: map[string]string{api.ControllerUIDLabel: "u1"}}
	started, done := ago(90*time.Second), ago(30*time.Second)
	cond := func(t string) []api.JobCondition { return []api.JobCondition{{Type: t, Status: api.ConditionTrue}} }
	tests := []struct {
		name string
		job  api.Job
		want []string
	}{
		{"running", api.Job{Spec: api.JobSpec{Completions: i32(3), Parallelism: i32(3)}, Status: api.JobStatus{Succeeded: 1, StartTime: &started}},
			[]string{"Running", "1/3", "90s"}},
		{"complete", api.Job{Spec: api.JobSpec{Completions: i32(1)}, Status: api.JobStatus{Succeeded: 1, StartTime: &started, CompletionTime: &done, Conditions: append(cond(api.JobSuccessCriteriaMet), cond(api.JobComplete)...)}},
			[]string{"Complete", "1/1", "60s"}},
		{"failed", api.Job{Spec: api.JobSpec{Completions: i32(1)}, Status: api.JobStatus{StartTime: &started, Conditions: append(cond(api.JobFailureTarget), cond(api.JobFailed)...)}},
			[]string{"Failed", "0/1", "90s"}},
		{"failure target", api.Job{Spec: api.JobSpec{Completions: i32(1)}, Status: api.JobStatus{StartTime: &started, Conditions: cond(api.JobFailureTarget)}},
			[]string{"FailureTarget", "0/1", "90s"}},
		{"suspended, never started", api.Job{Spec: api.JobSpec{Completions: i32(2)}, Status: api.JobStatus{Conditions: cond(api.JobSuspended)}},
			[]string{"Suspended", "0/2", ""}},
		{"work queue (no completions)", api.Job{Spec: api.JobSpec{Parallelism: i32(4)}, Status: api.JobStatus{StartTime: &started}},
			[]string{"Running", "0/1 of 4", "90s"}},
	}
	p := For(api.MustKindOf(&api.Job{}))
	if got := Headers(p.Columns, true); !reflect.DeepEqual(got, []string{"NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"}) {
		t.Errorf("wide headers %v", got)
	}
	if got := Headers(p.Columns, false); !reflect.DeepEqual(got, []string{"NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"}) {
		t.Errorf("headers %v", got)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := tc.job
			j.ObjectMeta = meta("default", "pi", 2*time.Minute)
			j.Spec.Template, j.Spec.Selector = tmpl, sel
			want := append(append([]string{"pi"}, tc.want...), "2m", "pi", "busybox", "batch.kubernetes.io/controller-uid=u1")
			if got := row(p, &j, true); !reflect.DeepEqual(got, want) {
				t.Errorf("row %q, want %q", got, want)
			}
		})
	}
}

func TestCronJobColumns(t *testing.T) {
	no, tz := false, "Europe/Berlin"
	last := ago(40 * time.Second)
	cj := &api.CronJob{
		ObjectMeta: meta("default", "hello", 5*time.Minute),
		Spec: api.CronJobSpec{Schedule: "* * * * *", Suspend: &no, JobTemplate: api.JobTemplateSpec{Spec: api.JobSpec{
			Template: api.PodTemplateSpec{Spec: api.PodSpec{Containers: []api.Container{{Name: "hello", Image: "busybox:1.28"}}}}}}},
		Status: api.CronJobStatus{Active: []api.ObjectReference{{Name: "hello-1"}}, LastScheduleTime: &last},
	}
	p := For(api.MustKindOf(cj))
	if got := Headers(p.Columns, true); !reflect.DeepEqual(got, []string{"NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"}) {
		t.Errorf("wide headers %v", got)
	}
	if got := row(p, cj, true); !reflect.DeepEqual(got, []string{"hello", "* * * * *", "<none>", "False", "1", "40s", "5m", "hello", "busybox:1.28", "<none>"}) {
		t.Errorf("row %q", got)
	}
	cj.Spec.TimeZone, cj.Status.LastScheduleTime = &tz, nil
	if got := row(p, cj, false); got[2] != "Europe/Berlin" || got[5] != "<none>" {
		t.Errorf("row %q", got)
	}
}
