package apiserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/controllers"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
)

// The real kubectl with batch/v1 Jobs and the real job controller: `create
// job` (a protobuf body), get jobs with kubectl's columns, the pod the
// controller makes (the test plays its node), describe job with the
// job-controller's events, wait --for=condition=complete, and delete job
// (kubectl's propagationPolicy Background).
func TestKubectlJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- controllers.Run(ctx, e.local, e.local, controllers.Options{}) }()
	t.Cleanup(func() { cancel(); <-done })
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)

	if out := c.Must(t, "", "create", "job", "pi", "--image=busybox", "--", "echo", "hi"); strings.TrimSpace(out) != "job.batch/pi created" {
		t.Fatalf("create job: %q", out)
	}
	j, err := client.Get[*api.Job](t.Context(), e.local, "default", "pi")
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Spec.Template.Spec.Containers[0]; got.Name != "pi" || strings.Join(got.Command, " ") != "echo hi" || j.Spec.Selector.MatchLabels[api.ControllerUIDLabel] != j.UID {
		t.Errorf("the created job: container %+v, selector %v", got, j.Spec.Selector)
	}
	out := c.Must(t, "", "get", "jobs")
	if h := strings.Fields(strings.SplitN(out, "\n", 2)[0]); strings.Join(h, " ") != "NAME STATUS COMPLETIONS DURATION AGE" {
		t.Errorf("get jobs header %q", h)
	}
	if out := c.Must(t, "", "get", "jobs", "-o", "wide"); !strings.Contains(out, "CONTAINERS") || !strings.Contains(out, "batch.kubernetes.io/controller-uid="+j.UID) {
		t.Errorf("get jobs -o wide:\n%s", out)
	}

	// The controller creates the pod; its node runs it to completion.
	var pod *api.Pod
	testwait.For(t, 10*time.Second, "the job's pod", func() bool {
		pods, _, err := client.List[*api.Pod](t.Context(), e.local, "default", api.ListOptions{LabelSelector: api.JobNameLabel + "=pi"})
		if err == nil && len(pods) == 1 {
			pod = pods[0]
		}
		return pod != nil
	})
	if !strings.HasPrefix(pod.Name, "pi-") || !hasFinalizer(pod, api.JobTrackingFinalizer) {
		t.Errorf("pod %s finalizers %v", pod.Name, pod.Finalizers)
	}
	pod.Status.Phase = api.PodSucceeded
	pod.Status.ContainerStatuses = []api.ContainerStatus{{Name: "pi", State: api.ContainerState{Terminated: &api.ContainerStateTerminated{Reason: "Completed"}}}}
	if _, err := e.local.UpdateStatus(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	if out := c.Must(t, "", "wait", "--for=condition=complete", "job/pi", "--timeout=20s"); strings.TrimSpace(out) != "job.batch/pi condition met" {
		t.Errorf("wait: %q", out)
	}
	r := strings.Fields(strings.Split(strings.TrimSpace(c.Must(t, "", "get", "job", "pi")), "\n")[1])
	if len(r) != 5 || r[1] != "Complete" || r[2] != "1/1" {
		t.Errorf("get job pi row %q, want Complete 1/1", r)
	}
	desc := c.Must(t, "", "describe", "job", "pi")
	for _, want := range []string{"Completions:", "Completion Mode:  NonIndexed", "Pods Statuses:    0 Active (0 Ready) / 1 Succeeded / 0 Failed",
		"Pod Template:", "SuccessfulCreate", "Created pod: " + pod.Name, "job-controller", "Completed", "Job completed"} {
		if !strings.Contains(desc, want) {
			t.Errorf("describe job lacks %q:\n%s", want, desc)
		}
	}
	if out := c.Must(t, "", "delete", "job", "pi"); !strings.Contains(out, `job.batch "pi" deleted`) {
		t.Errorf("delete: %q", out)
	}
	// The garbage collector takes the pod with it.
	testwait.For(t, 20*time.Second, "the job's pod to go", func() bool {
		_, err := e.local.Get(t.Context(), api.MustKindOf(&api.Pod{}), "default", pod.Name)
		return api.IsNotFound(err)
	})
}

func hasFinalizer(p *api.Pod, f string) bool {
	for _, x := range p.Finalizers {
		if x == f {
			return true
		}
	}
	return false
}
