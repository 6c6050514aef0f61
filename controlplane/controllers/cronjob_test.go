package controllers

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

// CronJob controller tests: the clock is the fixture's (clk), moved by the
// test minute by minute; the test plays the job controller by finishing
// the Jobs the cronjob controller made. Nothing waits.

type cjFixture struct {
	t   *testing.T
	c   *fake.Client
	ev  *events
	cc  *CronJobController
	key string
	clk time.Time
}

// newCronJob is the Kubernetes docs' hello CronJob.
func newCronJob(schedule string, opts ...func(*api.CronJob)) *api.CronJob {
	cj := &api.CronJob{
		ObjectMeta: api.ObjectMeta{Name: "hello", Namespace: ns},
		Spec: api.CronJobSpec{
			Schedule: schedule,
			JobTemplate: api.JobTemplateSpec{
				ObjectMeta: api.ObjectMeta{Labels: map[string]string{"app": "hello"}},
				Spec: api.JobSpec{Template: api.PodTemplateSpec{Spec: api.PodSpec{
					RestartPolicy: api.RestartOnFailure,
					Containers:    []api.Container{{Name: "hello", Image: "busybox:1.28", Command: []string{"/bin/sh", "-c", "date; echo Hello from the Kubernetes cluster"}}},
				}}},
			},
		},
	}
	for _, o := range opts {
		o(cj)
	}
	return cj
}

// at is t0 plus minutes and seconds (t0 is 12:00:00 UTC).
func at(min, sec int) time.Time {
	return t0.Add(time.Duration(min)*time.Minute + time.Duration(sec)*time.Second)
}

func newCJFixture(t *testing.T, cj *api.CronJob) *cjFixture {
	t.Helper()
	f := &cjFixture{t: t, c: fake.New(), ev: &events{}, key: api.KeyOf(cj), clk: t0}
	f.c.SetClock(func() time.Time { return f.clk })
	if _, err := f.c.Create(t.Context(), cj); err != nil {
		t.Fatalf("create cronjob: %v", err)
	}
	f.cc = NewCronJobController(f.c, fakeLister{f.c, cronJobKind()}, fakeLister{f.c, jobKind()}, f.ev, testLogger(t))
	f.cc.now = func() time.Time { return f.clk }
	return f
}

// reconcileAt sets the clock and reconciles; it returns the requeue delay
// the controller asked for (0: none).
func (f *cjFixture) reconcileAt(now time.Time) time.Duration {
	f.t.Helper()
	f.clk = now
	err := f.cc.Reconcile(f.t.Context(), f.key)
	var ra *client.RequeueAfterError
	switch {
	case errors.As(err, &ra):
		return ra.After
	case err != nil:
		f.t.Fatalf("reconcile at %s: %v", now.Format(time.TimeOnly), err)
	}
	return 0
}

func (f *cjFixture) cronJob() *api.CronJob {
	return get[*api.CronJob](f.t, f.c, ns, "hello")
}

func (f *cjFixture) jobNames() []string {
	var out []string
	for _, j := range list[*api.Job](f.t, f.c, ns) {
		out = append(out, j.Name)
	}
	slices.Sort(out)
	return out
}

// finish ends a Job as its controller would: Complete (or Failed),
// started and finished at the clock.
func (f *cjFixture) finish(name, cond string) {
	f.t.Helper()
	j := get[*api.Job](f.t, f.c, ns, name)
	now := api.NewTime(f.clk)
	j.Status.StartTime, j.Status.CompletionTime = &now, &now
	j.Status.Conditions = []api.JobCondition{{Type: cond, Status: api.ConditionTrue}}
	if _, err := f.c.UpdateStatus(f.t.Context(), j); err != nil {
		f.t.Fatal(err)
	}
}

func jobName(t time.Time) string { return "hello-" + strconv.FormatInt(t.Unix()/60, 10) }

func TestCronJobEveryMinute(t *testing.T) {
	f := newCJFixture(t, newCronJob("* * * * *"))
	if d := f.reconcileAt(at(0, 30)); d != 30*time.Second+nextScheduleDelta {
		t.Errorf("requeue %s before the first time, want 30.1s", d)
	}
	if n := f.jobNames(); len(n) != 0 {
		t.Fatalf("jobs %v before the first scheduled time", n)
	}
	if d := f.reconcileAt(at(1, 0)); d != time.Minute+nextScheduleDelta {
		t.Errorf("requeue %s after a start, want 1m0.1s", d)
	}
	want := jobName(at(1, 0))
	if n := f.jobNames(); !slices.Equal(n, []string{want}) {
		t.Fatalf("jobs %v, want [%s]", n, want)
	}
	j := get[*api.Job](t, f.c, ns, want)
	cj := f.cronJob()
	if !api.IsControlledBy(j, cj.UID) || j.Labels["app"] != "hello" || j.Annotations[api.AnnotationCronJobScheduledTimestamp] != "2025-03-01T12:01:00Z" {
		t.Errorf("job %s: owner %v labels %v annotations %v", j.Name, j.OwnerReferences, j.Labels, j.Annotations)
	}
	if len(cj.Status.Active) != 1 || cj.Status.Active[0].Name != want || cj.Status.Active[0].UID != j.UID ||
		cj.Status.LastScheduleTime == nil || !cj.Status.LastScheduleTime.Equal(at(1, 0)) {
		t.Errorf("status %+v", cj.Status)
	}
	if evs := f.ev.take(); len(evs) != 1 || evs[0] != "Normal SuccessfulCreate Created job "+want {
		t.Errorf("events %q", evs)
	}
	// The same minute again (a Job event, a resync): nothing new.
	f.reconcileAt(at(1, 20))
	if n := f.jobNames(); len(n) != 1 {
		t.Fatalf("jobs %v after a second reconcile in the same minute", n)
	}
}

func TestCronJobKeepsThreeSucceededAndOneFailed(t *testing.T) {
	f := newCJFixture(t, newCronJob("* * * * *"))
	for m := 1; m <= 5; m++ {
		f.reconcileAt(at(m, 0))
		f.clk = at(m, 10)
		cond := api.JobComplete
		if m == 2 || m == 4 {
			cond = api.JobFailed
		}
		f.finish(jobName(at(m, 0)), cond)
		f.reconcileAt(at(m, 10))
	}
	// Succeeded: 1, 3, 5 (three kept); failed: 2 and 4, one kept (4).
	want := []string{jobName(at(1, 0)), jobName(at(3, 0)), jobName(at(4, 0)), jobName(at(5, 0))}
	slices.Sort(want)
	if got := f.jobNames(); !slices.Equal(got, want) {
		t.Errorf("jobs %v, want %v", got, want)
	}
	cj := f.cronJob()
	if len(cj.Status.Active) != 0 || cj.Status.LastSuccessfulTime == nil || !cj.Status.LastSuccessfulTime.Equal(at(5, 10)) {
		t.Errorf("status %+v", cj.Status)
	}
	evs := strings.Join(f.ev.take(), "\n")
	for _, w := range []string{"Normal SawCompletedJob Saw completed job: " + jobName(at(5, 0)) + ", condition: Complete",
		"Normal SawCompletedJob Saw completed job: " + jobName(at(4, 0)) + ", condition: Failed",
		"Normal SuccessfulDelete Deleted job " + jobName(at(2, 0))} {
		if !strings.Contains(evs, w) {
			t.Errorf("events lack %q:\n%s", w, evs)
		}
	}
	// Ten more minutes and one more start: still 3 + 1 (the limits hold).
	for m := 6; m <= 15; m++ {
		f.reconcileAt(at(m, 0))
		f.clk = at(m, 5)
		f.finish(jobName(at(m, 0)), api.JobComplete)
		f.reconcileAt(at(m, 5))
	}
	if got := f.jobNames(); len(got) != 4 {
		t.Errorf("after 15 minutes: jobs %v, want 3 succeeded and 1 failed", got)
	}
}

func TestCronJobMissedStarts(t *testing.T) {
	t.Run("only the latest missed time runs", func(t *testing.T) {
		f := newCJFixture(t, newCronJob("* * * * *"))
		f.reconcileAt(at(4, 30)) // the controller was away for minutes 1 to 4
		if got := f.jobNames(); !slices.Equal(got, []string{jobName(at(4, 0))}) {
			t.Errorf("jobs %v, want only minute 4's", got)
		}
		if evs := f.ev.take(); slices.ContainsFunc(evs, func(e string) bool { return strings.Contains(e, "TooManyMissedTimes") }) {
			t.Errorf("events %q: 4 missed times is not too many", evs)
		}
	})
	t.Run("over 100 missed times warn", func(t *testing.T) {
		f := newCJFixture(t, newCronJob("* * * * *"))
		f.reconcileAt(at(150, 0))
		evs := f.ev.take()
		if len(evs) != 2 || evs[0] != "Warning TooManyMissedTimes too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew" {
			t.Errorf("events %q", evs)
		}
		if got := f.jobNames(); !slices.Equal(got, []string{jobName(at(150, 0))}) {
			t.Errorf("jobs %v, want the latest time's", got)
		}
	})
	t.Run("a deadline skips a late start", func(t *testing.T) {
		f := newCJFixture(t, newCronJob("*/10 * * * *", func(cj *api.CronJob) { cj.Spec.StartingDeadlineSeconds = ptr[int64](20) }))
		f.reconcileAt(at(10, 45)) // 45 s late for 12:10
		if n := f.jobNames(); len(n) != 0 {
			t.Errorf("jobs %v: a start 45 s late with a 20 s deadline", n)
		}
		// Times older than the deadline are not even looked at (as in
		// Kubernetes' v2 controller): no Job, no event.
		if evs := f.ev.take(); len(evs) != 0 {
			t.Errorf("events %q", evs)
		}
		f.reconcileAt(at(20, 5)) // 5 s late for 12:20: runs
		if got := f.jobNames(); !slices.Equal(got, []string{jobName(at(20, 0))}) {
			t.Errorf("jobs %v, want 12:20's", got)
		}
	})
}

func TestCronJobConcurrencyPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   []string // jobs after the second start, the first still running
		event  string
	}{
		{api.AllowConcurrent, []string{jobName(at(1, 0)), jobName(at(2, 0))}, "Normal SuccessfulCreate Created job " + jobName(at(2, 0))},
		{api.ForbidConcurrent, []string{jobName(at(1, 0))}, "Normal JobAlreadyActive Not starting job because prior execution is running and concurrency policy is Forbid"},
		{api.ReplaceConcurrent, []string{jobName(at(2, 0))}, "Normal SuccessfulDelete Deleted job " + jobName(at(1, 0))},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			f := newCJFixture(t, newCronJob("* * * * *", func(cj *api.CronJob) { cj.Spec.ConcurrencyPolicy = tc.policy }))
			f.reconcileAt(at(1, 0))
			f.ev.take()
			f.reconcileAt(at(2, 0))
			if got := f.jobNames(); !slices.Equal(got, tc.want) {
				t.Errorf("jobs %v, want %v", got, tc.want)
			}
			if evs := f.ev.take(); !slices.Contains(evs, tc.event) {
				t.Errorf("events %q lack %q", evs, tc.event)
			}
			if tc.policy == api.ForbidConcurrent {
				// Once the running Job finishes, the next time starts.
				f.clk = at(2, 30)
				f.finish(jobName(at(1, 0)), api.JobComplete)
				f.reconcileAt(at(3, 0))
				if got := f.jobNames(); !slices.Contains(got, jobName(at(3, 0))) {
					t.Errorf("jobs %v: no start after the active one finished", got)
				}
			}
		})
	}
}

func TestCronJobSuspendAndTimeZone(t *testing.T) {
	f := newCJFixture(t, newCronJob("0 21 * * *", func(cj *api.CronJob) {
		cj.Spec.TimeZone = ptr("Asia/Tokyo") // 21:00 in Tokyo is 12:00 UTC
		cj.Spec.Suspend = ptr(true)
	}))
	f.reconcileAt(at(24*60, 10))
	if n := f.jobNames(); len(n) != 0 {
		t.Fatalf("a suspended CronJob made %v", n)
	}
	cj := f.cronJob()
	cj.Spec.Suspend = ptr(false)
	if _, err := f.c.Update(t.Context(), cj); err != nil {
		t.Fatal(err)
	}
	f.reconcileAt(at(24*60, 20))
	want := jobName(at(24*60, 0))
	if got := f.jobNames(); !slices.Equal(got, []string{want}) {
		t.Fatalf("jobs %v, want %s (21:00 Tokyo)", got, want)
	}
	if a := get[*api.Job](t, f.c, ns, want).Annotations[api.AnnotationCronJobScheduledTimestamp]; a != "2025-03-02T21:00:00+09:00" {
		t.Errorf("scheduled timestamp %q, want it in Tokyo time", a)
	}
	next, err := api.CronJobNextRun(f.cronJob(), at(24*60, 20))
	if err != nil || !next.Equal(at(48*60, 0)) {
		t.Errorf("next run %v (%v), want the next day's 12:00 UTC", next, err)
	}
}

func TestCronJobActiveListRepairs(t *testing.T) {
	f := newCJFixture(t, newCronJob("* * * * *"))
	// A Job made by hand from the CronJob (create job --from=cronjob/hello).
	manual, err := NewJobFromCronJob(f.cronJob(), at(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	manual.Name = "hello-manual"
	if _, err := f.c.Create(t.Context(), manual); err != nil {
		t.Fatal(err)
	}
	f.reconcileAt(at(0, 30))
	if evs := f.ev.take(); !slices.Contains(evs, "Warning UnexpectedJob Saw a job that the controller did not create or forgot: hello-manual") {
		t.Errorf("events %q", evs)
	}
	// A Job of the active list deleted behind the controller's back.
	f.reconcileAt(at(1, 0))
	if err := f.c.Delete(t.Context(), jobKind(), ns, jobName(at(1, 0)), api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.reconcileAt(at(1, 30))
	if evs := f.ev.take(); !slices.Contains(evs, "Normal MissingJob Active job went missing: "+jobName(at(1, 0))) {
		t.Errorf("events %q", evs)
	}
	if a := f.cronJob().Status.Active; len(a) != 0 {
		t.Errorf("active %v after the job went missing", a)
	}
}

func TestCronJobCrashBetweenCreateAndStatus(t *testing.T) {
	f := newCJFixture(t, newCronJob("* * * * *"))
	// The status write fails once, as if the controller died right after
	// making the Job.
	failed := false
	f.c.Intercept(func(a fake.Action) error {
		if a.Verb == "update" && a.Kind == "CronJob" && a.Subresource == "status" && !failed {
			failed = true
			return errors.New("killed")
		}
		return nil
	})
	f.clk = at(1, 0)
	if err := f.cc.Reconcile(t.Context(), f.key); err == nil {
		t.Fatal("reconcile hid the failed status write")
	}
	f.reconcileAt(at(1, 5)) // a new controller: the Job exists; it is taken back
	if got := f.jobNames(); len(got) != 1 {
		t.Fatalf("jobs %v: one scheduled time made two Jobs", got)
	}
	if a := f.cronJob().Status.Active; len(a) != 1 || a[0].Name != jobName(at(1, 0)) {
		t.Errorf("active %v, want the Job made before the crash", a)
	}
}
