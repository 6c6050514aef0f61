package integration

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/cli"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/runtime"
)

// An Indexed Job of 3 completions on real containerd: each pod (busybox)
// prints $JOB_COMPLETION_INDEX (from the downward API, the index
// annotation) and its hostname; the Job completes, `skiff wait
// --for=condition=complete` returns, and each pod's log shows its own
// index and hostname.
func TestIndexedJobOnContainerd(t *testing.T) {
	e := newCtrdEnv(t)
	cp, c := startControlPlane(t, nil)
	rt := e.runtime(t)
	startAgent(t, cp, rt, "n1", filepath.Join(t.TempDir(), "agent"), func(a *agent.Config) {
		a.BaseBackoff, a.MaxBackoff = time.Second, 4*time.Second
	})
	cfgPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := client.WriteKubeconfig(cfgPath, cp.ClientConfig()); err != nil {
		t.Fatal(err)
	}
	skiff := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := cli.Main(context.Background(), append([]string{"--kubeconfig", cfgPath}, args...), &out, &errOut)
		if err != nil {
			return out.String() + errOut.String(), err
		}
		return out.String(), nil
	}

	const job = `apiVersion: batch/v1
kind: Job
metadata: {name: idx}
spec:
  completions: 3
  parallelism: 3
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox:1.36
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "echo index=$JOB_COMPLETION_INDEX host=$(hostname)"]
`
	f := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(f, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := skiff("apply", "-f", f); err != nil || !strings.Contains(out, "job.batch/idx created") {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if out, err := skiff("wait", "--for=condition=complete", "job/idx", "--timeout=90s"); err != nil || strings.TrimSpace(out) != "job.batch/idx condition met" {
		pods := listPods(t, c, "default", api.JobNameLabel+"=idx")
		t.Fatalf("wait: %v\n%s\npods: %s", err, out, podSummary(pods))
	}
	j, err := client.Get[*api.Job](context.Background(), c, "default", "idx")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, cond := range j.Status.Conditions {
		types = append(types, cond.Type+"="+cond.Status)
	}
	if !slices.Equal(types, []string{"SuccessCriteriaMet=True", "Complete=True"}) || j.Status.Succeeded != 3 || j.Status.CompletedIndexes != "0-2" {
		t.Errorf("job status: conditions %v succeeded %d completedIndexes %q", types, j.Status.Succeeded, j.Status.CompletedIndexes)
	}
	pods := listPods(t, c, "default", api.JobNameLabel+"=idx")
	if len(pods) != 3 {
		t.Fatalf("%d pods, want 3: %s", len(pods), podSummary(pods))
	}
	for _, p := range pods {
		ix := p.Annotations[api.JobCompletionIndexAnnotation]
		want := "index=" + ix + " host=idx-" + ix
		// The container's own log (this node serves no log endpoint).
		var logs bytes.Buffer
		if err := rt.Logs(context.Background(), containerIDOf(t, p), runtime.LogOptions{Tail: -1}, &logs); err != nil {
			t.Fatalf("logs of %s: %v", p.Name, err)
		}
		if got := strings.TrimSpace(logs.String()); got != want {
			t.Errorf("pod %s logs %q, want %q", p.Name, got, want)
		}
		if slices.Contains(p.Finalizers, api.JobTrackingFinalizer) {
			t.Errorf("pod %s keeps the tracking finalizer after it was counted", p.Name)
		}
	}
	if out, err := skiff("get", "jobs"); err != nil || !strings.Contains(out, "Complete") || !strings.Contains(out, "3/3") {
		t.Errorf("get jobs: %v\n%s", err, out)
	}
}
