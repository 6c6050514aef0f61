package apiserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/controllers"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
)

// helloCronJob is the Kubernetes docs' CronJob.
const helloCronJob = `apiVersion: batch/v1
kind: CronJob
metadata:
  name: hello
spec:
  schedule: "* * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          containers:
          - name: hello
            image: busybox:1.28
            imagePullPolicy: IfNotPresent
            command:
            - /bin/sh
            - -c
            - date; echo Hello from the Kubernetes cluster
          restartPolicy: OnFailure
`

// The real kubectl with batch/v1 CronJobs and the controllers: apply the
// docs' hello, get cronjob with kubectl's columns, create job
// --from=cronjob/hello (kubectl builds the Job, owned by the CronJob, and
// the cronjob controller reports it as UnexpectedJob), describe cronjob,
// a schedule with TZ refused in Kubernetes' words. The scheduled runs
// themselves are the controller's unit tests (a fake clock) and the
// integration test (real minutes).
func TestKubectlCronJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- controllers.Run(ctx, e.local, e.local, controllers.Options{}) }()
	t.Cleanup(func() { cancel(); <-done })
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	file := filepath.Join(t.TempDir(), "hello.yaml")
	if err := os.WriteFile(file, []byte(helloCronJob), 0o644); err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	if out := c.Must(t, "", "apply", "-f", file); strings.TrimSpace(out) != "cronjob.batch/hello created" {
		t.Fatalf("apply: %q", out)
	}
	lines := strings.Split(strings.TrimSpace(c.Must(t, "", "get", "cronjob")), "\n")
	if h := strings.Join(strings.Fields(lines[0]), " "); h != "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE" {
		t.Errorf("get cronjob header %q", h)
	}
	// The schedule fires at every minute's start: when one began between
	// the apply and the get, the controller may have started a run
	// already (ACTIVE 1, LAST SCHEDULE 0s).
	want := "hello * * * * * <none> False 0 <none>"
	if !time.Now().Truncate(time.Minute).Equal(applied.Truncate(time.Minute)) {
		want = "hello * * * * * <none> False "
	}
	if !strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), want) {
		t.Errorf("get cronjob row %q, want it to begin %q", lines[1], want)
	}
	if out := c.Must(t, "", "create", "job", "hello-now", "--from=cronjob/hello"); strings.TrimSpace(out) != "job.batch/hello-now created" {
		t.Fatalf("create job --from: %q", out)
	}
	j, err := client.Get[*api.Job](t.Context(), e.local, "default", "hello-now")
	if err != nil {
		t.Fatal(err)
	}
	cj, err := client.Get[*api.CronJob](t.Context(), e.local, "default", "hello")
	if err != nil {
		t.Fatal(err)
	}
	if !api.IsControlledBy(j, cj.UID) || j.Annotations[api.AnnotationCronJobInstantiate] != "manual" {
		t.Errorf("job %s: owners %v annotations %v", j.Name, j.OwnerReferences, j.Annotations)
	}
	testwait.For(t, 10*time.Second, "the cronjob controller's UnexpectedJob event", func() bool {
		return strings.Contains(c.Must(t, "", "describe", "cronjob", "hello"), "Saw a job that the controller did not create or forgot: hello-now")
	})
	desc := c.Must(t, "", "describe", "cronjob", "hello")
	for _, want := range []string{"Schedule:                      * * * * *", "Concurrency Policy:            Allow",
		"Successful Job History Limit:  3", "Failed Job History Limit:      1", "UnexpectedJob", "cronjob-controller"} {
		if !strings.Contains(desc, want) {
			t.Errorf("describe cronjob lacks %q:\n%s", want, desc)
		}
	}
	bad := strings.Replace(helloCronJob, `"* * * * *"`, `"TZ=Europe/Berlin 0 9 * * *"`, 1)
	if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := c.Run(t, "", "apply", "-f", file); r.Err == nil || !strings.Contains(r.Stderr, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead") {
		t.Errorf("apply with TZ in the schedule: %v\n%s", r.Err, r.Stderr)
	}
}
