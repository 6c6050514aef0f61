package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/testwait"
)

func TestCreateJob(t *testing.T) {
	fc := newFake()
	res := run(t, fc, "", "create", "job", "pi", "--image=busybox", "--", "echo", "hi")
	if res.code != 0 {
		t.Fatalf("create job: %+v", res)
	}
	wantLines(t, res.out, "job.batch/pi created")
	o, err := fc.Get(context.Background(), api.MustKindOf(&api.Job{}), "default", "pi")
	if err != nil {
		t.Fatal(err)
	}
	j := o.(*api.Job)
	c := j.Spec.Template.Spec.Containers
	if len(c) != 1 || c[0].Name != "pi" || c[0].Image != "busybox" || strings.Join(c[0].Command, " ") != "echo hi" || j.Spec.Template.Spec.RestartPolicy != "Never" {
		t.Errorf("job spec %+v", j.Spec.Template.Spec)
	}
	if j.Spec.Selector.MatchLabels[api.ControllerUIDLabel] != j.UID {
		t.Errorf("selector not generated: %v", j.Spec.Selector)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "job", "x", "--from=cronjob/nightly"}, `cronjobs.batch "nightly" not found`},
		{[]string{"create", "job", "x", "--from=deployment/web"}, "from must be an existing cronjob"},
		{[]string{"create", "job", "x", "--from=cronjob/hello", "--image=busybox"}, "either --image or --from must be specified"},
		{[]string{"create", "job", "x", "--from=cronjob/hello", "--", "echo"}, "cannot specify --from and command"},
		{[]string{"create", "job", "x", "--", "echo"}, "--image must be specified"},
		{[]string{"create", "job", "x", "y", "--image=busybox"}, "exactly one NAME is required"},
	} {
		res := run(t, fc, "", tc.args...)
		if res.code == 0 || !strings.Contains(res.err, tc.want) {
			t.Errorf("%v: %+v, want an error with %q", tc.args, res, tc.want)
		}
	}
}

func TestCreateJobFromCronJob(t *testing.T) {
	cj := &api.CronJob{ObjectMeta: meta("default", "hello", time.Hour), Spec: api.CronJobSpec{Schedule: "* * * * *",
		JobTemplate: api.JobTemplateSpec{
			ObjectMeta: api.ObjectMeta{Labels: map[string]string{"app": "hello"}, Annotations: map[string]string{"team": "ml"}},
			Spec: api.JobSpec{Template: api.PodTemplateSpec{Spec: api.PodSpec{RestartPolicy: "OnFailure",
				Containers: []api.Container{{Name: "hello", Image: "busybox:1.28"}}}}}}}}
	cj.UID = "cj-uid"
	fc := newFake(cj)
	res := run(t, fc, "", "create", "job", "hello-now", "--from=cronjob/hello")
	if res.code != 0 {
		t.Fatalf("create job --from: %+v", res)
	}
	wantLines(t, res.out, "job.batch/hello-now created")
	o, err := fc.Get(context.Background(), api.MustKindOf(&api.Job{}), "default", "hello-now")
	if err != nil {
		t.Fatal(err)
	}
	j := o.(*api.Job)
	if !api.IsControlledBy(j, "cj-uid") || j.Annotations[api.AnnotationCronJobInstantiate] != "manual" || j.Annotations["team"] != "ml" ||
		j.Labels["app"] != "hello" || j.Spec.Template.Spec.Containers[0].Image != "busybox:1.28" {
		t.Errorf("job %+v", j.ObjectMeta)
	}
}

// jobFixture is a finished Indexed job with one pod per index.
func jobFixtures() []api.Object {
	start, done := ago(90*time.Second), ago(30*time.Second)
	j := &api.Job{ObjectMeta: meta("default", "idx", 2*time.Minute)}
	j.UID = "u1"
	j.Spec = api.JobSpec{Completions: i32(3), Parallelism: i32(3), CompletionMode: ptr(api.IndexedCompletion),
		Selector: &api.LabelSelector{MatchLabels: map[string]string{api.ControllerUIDLabel: "u1"}},
		Template: api.PodTemplateSpec{
			ObjectMeta: api.ObjectMeta{Labels: map[string]string{api.ControllerUIDLabel: "u1", api.JobNameLabel: "idx",
				api.LegacyControllerUIDLabel: "u1", api.LegacyJobNameLabel: "idx"}},
			Spec: api.PodSpec{RestartPolicy: "Never", Containers: []api.Container{{Name: "main", Image: "busybox", Command: []string{"sh", "-c", "echo $JOB_COMPLETION_INDEX"}}}},
		}}
	j.Status = api.JobStatus{Succeeded: 3, Ready: i32(0), CompletedIndexes: "0-2", StartTime: &start, CompletionTime: &done,
		Conditions: []api.JobCondition{{Type: "SuccessCriteriaMet", Status: "True"}, {Type: "Complete", Status: "True"}}}
	p := runningPod("default", "idx-0-abcde", "node-1", "10.0.0.5", time.Minute)
	p.Labels = map[string]string{api.ControllerUIDLabel: "u1"}
	p.Status.Phase = api.PodSucceeded
	return []api.Object{j, p}
}

func TestGetAndDescribeJob(t *testing.T) {
	fc := newFake(jobFixtures()...)
	res := run(t, fc, "", "get", "jobs")
	wantLines(t, res.out,
		"NAME   STATUS     COMPLETIONS   DURATION   AGE",
		"idx    Complete   3/3           60s        2m")
	res = run(t, fc, "", "get", "job", "idx", "-o", "wide")
	wantContainsLoose(t, res.out, "CONTAINERS IMAGES SELECTOR", "main busybox batch.kubernetes.io/controller-uid=u1")
	res = run(t, fc, "", "describe", "job", "idx")
	wantContainsLoose(t, res.out,
		"Name: idx", "Selector: batch.kubernetes.io/controller-uid=u1", "Parallelism: 3", "Completions: 3",
		"Completion Mode: Indexed", "Start Time: ", "Completed At: ", "Duration: 60s",
		"Pods Statuses: 0 Active (0 Ready) / 3 Succeeded / 0 Failed", "Completed Indexes: 0-2", "Pod Template:",
		"Command:", "echo $JOB_COMPLETION_INDEX")
}

func TestLogsJobPicksItsPod(t *testing.T) {
	sf := &streamingFake{Client: newFake(jobFixtures()...)}
	res := runNode(t, sf, "logs", "job/idx")
	if res.code != 0 || res.out != "a line\n" || len(sf.queries) != 1 {
		t.Errorf("logs job/idx: %+v", res)
	}
}

func TestWait(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		code    int
		out     string
		errPart string
	}{
		{"condition met", []string{"wait", "--for=condition=complete", "job/idx", "--timeout=5s"}, 0, "job.batch/idx condition met\n", ""},
		{"condition with a value", []string{"wait", "--for=condition=Complete=True", "jobs", "idx", "--timeout=0"}, 0, "job.batch/idx condition met\n", ""},
		{"timeout 0, not met", []string{"wait", "--for=condition=Failed", "job/idx", "--timeout=0"}, 1, "", "timed out waiting for the condition on jobs/idx"},
		{"delete of a missing object", []string{"wait", "--for=delete", "pod/nope", "--timeout=1s"}, 0, "pod/nope condition met\n", ""},
		{"jsonpath refused", []string{"wait", "--for=jsonpath={.status.phase}=Running", "pod/x"}, 1, "", "supports --for=condition=NAME[=VALUE] and --for=delete"},
		{"--all refused", []string{"wait", "--for=delete", "pods", "--all"}, 1, "", "unknown flag: --all"},
		{"no --for", []string{"wait", "job/idx"}, 1, "", "--for must be set"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFake(jobFixtures()...)
			res := run(t, fc, "", tc.args...)
			if res.code != tc.code || res.out != tc.out || !strings.Contains(res.err, tc.errPart) {
				t.Errorf("%v: code %d out %q err %q", tc.args, res.code, res.out, res.err)
			}
		})
	}
}

// wait watches: a job that completes after the wait began is seen.
func TestWaitWatches(t *testing.T) {
	objs := jobFixtures()
	j := objs[0].(*api.Job)
	j.Status.Conditions = nil
	fc := newFake(j)
	done := make(chan result, 1)
	go func() { done <- run(t, fc, "", "wait", "--for=condition=complete", "job/idx", "--timeout=20s") }()
	// Once the wait is watching, complete the job.
	testwait.For(t, 10*time.Second, "wait to watch the job", func() bool { return fc.WatchCount() > 0 })
	u := api.Clone(j)
	u.Status.Conditions = []api.JobCondition{{Type: "Complete", Status: "True"}}
	if _, err := fc.UpdateStatus(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.code != 0 || res.out != "job.batch/idx condition met\n" {
		t.Errorf("wait: %+v", res)
	}
}
