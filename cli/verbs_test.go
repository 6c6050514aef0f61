package cli

import (
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/kubectl"
	"skiff.dev/skiff/internal/testwait"
)

func TestDelete(t *testing.T) {
	fc := newFake(getFixtures()...)
	res := run(t, fc, "", "delete", "pod", "web", "nope", "--wait=false")
	if res.code != 1 {
		t.Errorf("exit = %d, want 1", res.code)
	}
	wantLines(t, res.out, `pod "web" deleted`)
	wantLines(t, res.err, `Error from server (NotFound): pods "nope" not found`)

	res = run(t, fc, "", "delete", "deploy/nginx-demo", "svc/nginx-demo", "-n", "gpu-demo", "--wait=false")
	wantLines(t, res.out, `deployment.apps "nginx-demo" deleted`, `service "nginx-demo" deleted`)

	res = run(t, fc, "", "delete", "pods", "-l", "app=web", "-n", "gpu-demo", "--wait=false")
	wantLines(t, res.out, `pod "nginx-demo-abc" deleted`)

	res = run(t, fc, "", "delete", "namespace", "gpu-demo", "--wait=false")
	wantLines(t, res.out, `namespace "gpu-demo" deleted`)

	res = run(t, fc, "", "delete", "pods")
	if res.code != 1 || !strings.Contains(res.err, "no name was specified") {
		t.Errorf("delete without names: %+v", res)
	}
	res = run(t, fc, "", "delete", "pod", "nope", "--ignore-not-found")
	if res.code != 0 || res.out != "" {
		t.Errorf("--ignore-not-found: %+v", res)
	}
}

func TestDeleteFromFile(t *testing.T) {
	fc := newFake()
	f := writeFile(t, t.TempDir(), "a.yaml", nginxDemo)
	run(t, fc, "", "apply", "-f", f)
	res := run(t, fc, "", "delete", "-f", f, "--wait=false")
	wantLines(t, res.out, `namespace "gpu-demo" deleted`, `configmap "nginx-page" deleted`,
		`deployment.apps "nginx-demo" deleted`, `service "nginx-demo" deleted`)
}

func TestScale(t *testing.T) {
	fc := newFake(getFixtures()...)
	for _, args := range [][]string{
		{"scale", "deployment/nginx-demo", "--replicas=5", "-n", "gpu-demo"},
		{"scale", "deploy", "nginx-demo", "--replicas", "2", "-n", "gpu-demo"},
	} {
		res := run(t, fc, "", args...)
		wantLines(t, res.out, "deployment.apps/nginx-demo scaled")
	}
	d, _ := client.Get[*api.Deployment](t.Context(), fc, "gpu-demo", "nginx-demo")
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %d", *d.Spec.Replicas)
	}
	res := run(t, fc, "", "scale", "deploy", "nope", "--replicas=1")
	if res.code != 1 || res.err != "Error from server (NotFound): deployments.apps \"nope\" not found\n" {
		t.Errorf("missing: %+v", res)
	}
	res = run(t, fc, "", "scale", "pod", "web", "--replicas=1")
	if res.code != 1 || !strings.Contains(res.err, "cannot scale pods") {
		t.Errorf("pod: %+v", res)
	}
	res = run(t, fc, "", "scale", "deploy/nginx-demo")
	if res.code != 1 || !strings.Contains(res.err, "--replicas=COUNT flag is required") {
		t.Errorf("no --replicas: %+v", res)
	}
}

// rolloutFixture is a deployment at revision 2 with its two ReplicaSets.
func rolloutFixture() (*api.Deployment, []api.Object) {
	d := deployment("gpu-demo", "nginx-demo", 3, time.Hour)
	d.UID = "d-uid"
	d.Spec.Template.Spec.Containers[0].Image = "nginx:1.25-alpine"
	d.Annotations = map[string]string{api.AnnotationRevision: "2"}
	rs := func(name, image, rev string, replicas int32) *api.ReplicaSet {
		t := true
		r := &api.ReplicaSet{ObjectMeta: meta("gpu-demo", name, time.Hour)}
		r.Annotations = map[string]string{api.AnnotationRevision: rev}
		r.OwnerReferences = []api.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx-demo", UID: "d-uid", Controller: &t}}
		r.Spec.Replicas = i32(replicas)
		r.Spec.Selector = d.Spec.Selector
		r.Spec.Template = templateWithoutHash(d.Spec.Template) // a deep copy
		r.Spec.Template.Labels = map[string]string{"app": "nginx-demo", api.LabelPodTemplateHash: name[len(name)-4:]}
		r.Spec.Template.Spec.Containers[0].Image = image
		return r
	}
	old := rs("nginx-demo-aaaa", "nginx:alpine", "1", 0)
	old.Annotations[api.AnnotationChangeCause] = "first"
	return d, []api.Object{d, old, rs("nginx-demo-bbbb", "nginx:1.25-alpine", "2", 3)}
}

func TestRolloutHistory(t *testing.T) {
	_, objs := rolloutFixture()
	fc := newFake(objs...)
	res := run(t, fc, "", "rollout", "history", "deployment/nginx-demo", "-n", "gpu-demo")
	wantLines(t, res.out,
		"deployment.apps/nginx-demo",
		"REVISION  CHANGE-CAUSE",
		"1         first",
		"2         <none>")
	res = run(t, fc, "", "rollout", "history", "deploy", "nginx-demo", "-n", "gpu-demo", "--revision=1")
	wantContainsLoose(t, res.out, "deployment.apps/nginx-demo with revision #1\nPod Template:\n  Labels: app=nginx-demo\n", "Image: nginx:alpine")
	if strings.Contains(res.out, api.LabelPodTemplateHash) {
		t.Errorf("history shows the pod-template-hash label:\n%s", res.out)
	}
}

func TestRolloutUndo(t *testing.T) {
	_, objs := rolloutFixture()
	fc := newFake(objs...)
	res := run(t, fc, "", "rollout", "undo", "deployment/nginx-demo", "-n", "gpu-demo")
	wantLines(t, res.out, "deployment.apps/nginx-demo rolled back")
	d, _ := client.Get[*api.Deployment](t.Context(), fc, "gpu-demo", "nginx-demo")
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:alpine" {
		t.Errorf("image after undo = %s", img)
	}
	if _, ok := d.Spec.Template.Labels[api.LabelPodTemplateHash]; ok {
		t.Errorf("undo copied the pod-template-hash label")
	}
	res = run(t, fc, "", "rollout", "undo", "deployment/nginx-demo", "-n", "gpu-demo", "--to-revision=1")
	wantLines(t, res.out, "deployment.apps/nginx-demo skipped rollback (current template already matches revision 1)")
	res = run(t, fc, "", "rollout", "undo", "deployment/nginx-demo", "-n", "gpu-demo", "--to-revision=7")
	if res.code != 1 || res.err != "error: unable to find specified revision 7 in history\n" {
		t.Errorf("missing revision: %+v", res)
	}
}

func TestRolloutRestart(t *testing.T) {
	_, objs := rolloutFixture()
	fc := newFake(objs...)
	res := run(t, fc, "", "rollout", "restart", "deployment", "nginx-demo", "-n", "gpu-demo")
	wantLines(t, res.out, "deployment.apps/nginx-demo restarted")
	d, _ := client.Get[*api.Deployment](t.Context(), fc, "gpu-demo", "nginx-demo")
	if got := d.Spec.Template.Annotations[api.AnnotationRestartedAt]; got != testNow.Format(time.RFC3339) {
		t.Errorf("restartedAt = %q", got)
	}
}

func TestRolloutStatus(t *testing.T) {
	tests := []struct {
		name   string
		status api.DeploymentStatus
		want   string
		done   bool
	}{
		{"not observed", api.DeploymentStatus{ObservedGeneration: 0}, "Waiting for deployment spec update to be observed...", false},
		{"updating", api.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 1}, `Waiting for deployment "nginx-demo" rollout to finish: 1 out of 3 new replicas have been updated...`, false},
		{"old pending", api.DeploymentStatus{ObservedGeneration: 1, Replicas: 4, UpdatedReplicas: 3}, `Waiting for deployment "nginx-demo" rollout to finish: 1 old replicas are pending termination...`, false},
		{"available", api.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 1}, `Waiting for deployment "nginx-demo" rollout to finish: 1 of 3 updated replicas are available...`, false},
		{"done", api.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}, `deployment "nginx-demo" successfully rolled out`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := deployment("gpu-demo", "nginx-demo", 3, time.Hour)
			d.Generation = 1
			d.Status = tc.status
			msg, done, err := kubectl.RolloutStatus(d)
			if err != nil || strings.TrimSuffix(msg, "\n") != tc.want || done != tc.done {
				t.Errorf("got %q %v %v", msg, done, err)
			}
		})
	}

	// A rollout that completes while we watch.
	d := deployment("gpu-demo", "nginx-demo", 3, time.Hour)
	d.Status.AvailableReplicas = 1
	fc := newFake(d)
	done := make(chan result)
	go func() {
		done <- run(t, fc, "", "rollout", "status", "deployment/nginx-demo", "-n", "gpu-demo", "--timeout=5s")
	}()
	testwait.For(t, 5*time.Second, "the watch to start", func() bool { return fc.WatchCount() > 0 })
	cur, _ := client.Get[*api.Deployment](t.Context(), fc, "gpu-demo", "nginx-demo")
	cur = api.Clone(cur)
	cur.Status.AvailableReplicas = 3
	if _, err := fc.UpdateStatus(t.Context(), cur); err != nil {
		t.Fatal(err)
	}
	res := <-done
	wantLines(t, res.out,
		`Waiting for deployment "nginx-demo" rollout to finish: 1 of 3 updated replicas are available...`,
		`deployment "nginx-demo" successfully rolled out`)
}

func TestDescribePodHasEvents(t *testing.T) {
	p := runningPod("gpu-demo", "gpu-inference-x", "", "", time.Minute)
	p.UID = "p-uid"
	p.Status = api.PodStatus{Phase: api.PodPending}
	p.Spec.Containers[0].Resources.Limits = api.ResourceList{api.ResourceNvidiaGPU: resourceQ("1")}
	ev := &api.Event{ObjectMeta: meta("gpu-demo", "gpu-inference-x.1", time.Minute),
		InvolvedObject: api.ObjectReference{Kind: "Pod", Namespace: "gpu-demo", Name: "gpu-inference-x", UID: "p-uid"},
		Type:           "Warning", Reason: "FailedScheduling", Message: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
		Source: api.EventSource{Component: "default-scheduler"}, Count: 3,
		FirstTimestamp: ago(time.Minute), LastTimestamp: ago(10 * time.Second)}
	other := &api.Event{ObjectMeta: meta("gpu-demo", "other.1", time.Minute),
		InvolvedObject: api.ObjectReference{Kind: "Pod", Namespace: "gpu-demo", Name: "other"}, Reason: "Scheduled"}
	fc := newFake(p, ev, other)
	res := run(t, fc, "", "describe", "pod", "gpu-inference-x", "-n", "gpu-demo")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.err)
	}
	wantContainsLoose(t, res.out,
		"Name:             gpu-inference-x\n",
		"Namespace:        gpu-demo\n",
		"Status:           Pending\n",
		"      nvidia.com/gpu:  1\n",
		"Events:\n  Type     Reason            Age                 From               Message\n"+
			"  ----     ------            ----                ----               -------\n"+
			"  Warning  FailedScheduling  10s (x3 over 1m)  default-scheduler  0/1 nodes are available: 1 Insufficient nvidia.com/gpu.\n")
	if strings.Contains(res.out, "Scheduled") && !strings.Contains(res.out, "FailedScheduling") {
		t.Errorf("another pod's event shown")
	}

	// A name prefix works as in kubectl; no events prints <none>.
	res = run(t, newFake(runningPod("default", "web-123", "n", "1.2.3.4", time.Minute)), "", "describe", "pods", "web")
	wantContainsLoose(t, res.out, "Name: web-123\n", "Events: <none>\n")
}

func TestDescribeDeploymentAndNode(t *testing.T) {
	_, objs := rolloutFixture()
	fc := newFake(objs...)
	res := run(t, fc, "", "describe", "deploy/nginx-demo", "-n", "gpu-demo")
	wantContainsLoose(t, res.out,
		"Replicas:               3 desired | 3 updated | 3 total | 3 available | 0 unavailable\n",
		"StrategyType:           RollingUpdate\n",
		"RollingUpdateStrategy:  25% max unavailable, 25% max surge\n",
		"Pod Template:\n",
		"NewReplicaSet:          nginx-demo-bbbb (0/3 replicas created)\n",
		"Events:                 <none>\n")

	n := &api.Node{ObjectMeta: meta("", "node-1", time.Hour)}
	n.Status.Capacity = api.ResourceList{"cpu": resourceQ("2"), "memory": resourceQ("4Gi"), api.ResourceNvidiaGPU: resourceQ("1")}
	n.Status.Allocatable = n.Status.Capacity
	pod := runningPod("default", "gpu", "node-1", "10.0.0.3", time.Minute)
	pod.Spec.Containers[0].Resources.Limits = api.ResourceList{"cpu": resourceQ("500m"), api.ResourceNvidiaGPU: resourceQ("1")}
	res = run(t, newFake(n, pod), "", "describe", "node", "node-1")
	wantContainsLoose(t, res.out, "Capacity:\n  cpu:             2\n", "nvidia.com/gpu:  1\n",
		"Non-terminated Pods:", "(1 in total)", "  cpu             500m (25%)  500m (25%)\n", "  nvidia.com/gpu  1           1\n")
}

func TestExplainAndAPIResources(t *testing.T) {
	res := run(t, newFake(), "", "explain", "deployment.spec.replicas")
	if res.code != 0 {
		t.Fatalf("explain: %+v", res)
	}
	wantContains(t, res.out, "KIND:       Deployment", "replicas")
	res = run(t, newFake(), "", "explain", "widgets")
	if res.code != 1 {
		t.Errorf("explain widgets: %+v", res)
	}
	res = run(t, newFake(), "", "api-resources")
	wantContainsLoose(t, res.out, "NAME SHORTNAMES APIVERSION NAMESPACED KIND\n", "deployments deploy apps/v1 true Deployment\n",
		"priorityclasses pc scheduling.k8s.io/v1 false PriorityClass\n")
	if strings.Contains(res.out, "podtraces") {
		t.Errorf("internal kind listed")
	}
}

func TestTrace(t *testing.T) {
	p := runningPod("default", "gpu-test", "node-1", "", time.Minute)
	fc := newFake(p)
	t0 := testNow.Add(-time.Minute)
	span := func(comp, step string, off, dur time.Duration, msg string) api.TraceSpan {
		return api.TraceSpan{Component: comp, Step: step, Start: api.MicroTime{Time: t0.Add(off)}, End: api.MicroTime{Time: t0.Add(off + dur)}, Message: msg}
	}
	if err := fc.AddTrace(t.Context(), "default", "gpu-test",
		span("apiserver", "admit", 0, 2*time.Millisecond, "validated"),
		span("scheduler", "bind", 10*time.Millisecond, 3*time.Millisecond, "bound to node-1"),
	); err != nil {
		t.Fatal(err)
	}
	res := run(t, fc, "", "trace", "pod", "gpu-test")
	wantLines(t, res.out,
		"OFFSET    COMPONENT   STEP    NODE   DURATION   MESSAGE",
		"+0.0ms    apiserver   admit   -      2.0ms      validated",
		"+10.0ms   scheduler   bind    -      3.0ms      bound to node-1",
		"Total: 13.0ms from the first step to the last (2 steps)")
	res = run(t, fc, "", "trace", "pod/gpu-test", "-o", "json")
	wantContains(t, res.out, `"component": "scheduler"`)
}

func TestErrorText(t *testing.T) {
	k, _ := api.LookupResource("pods")
	dk, _ := api.LookupResource("deploy")
	tests := []struct {
		err  error
		want string
	}{
		{api.NewNotFound(k, "x"), `Error from server (NotFound): pods "x" not found`},
		{api.NewAlreadyExists(dk, "web"), `Error from server (AlreadyExists): deployments.apps "web" already exists`},
		{api.NewInvalid(dk, "web", api.FieldErrors{api.Invalid("spec.replicas", -1, "must be greater than or equal to 0")}),
			`The Deployment.apps "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0`},
		{errReportedText(), "error: boom"},
	}
	for _, tc := range tests {
		if got := errorText(tc.err); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	if ExitCode(nil) != 0 || ExitCode(errReported()) != 1 || ExitCode(&ExitError{Code: 3}) != 3 {
		t.Error("ExitCode")
	}
}

func errReportedText() error { return errorString("boom") }

type errorString string

func (e errorString) Error() string { return string(e) }

func resourceQ(s string) api.Quantity { return mustQuantity(s) }

// An unbound pod's trace ends with the last attempt's per-node record
// (for a claim: which request and selector ruled out the devices), as
// describe pod shows it; a bound pod's trace is the table alone.
func TestTraceExplainsTheLastFailedAttempt(t *testing.T) {
	t0 := testNow.Add(-time.Minute)
	filter := api.TraceSpan{Component: "scheduler", Step: "filter", Start: api.MicroTime{Time: t0}, End: api.MicroTime{Time: t0.Add(time.Millisecond)},
		Message: "0/1 nodes are available: 1 cannot allocate all claims.",
		Details: map[string]any{"plugins": []any{"DynamicResources"}, "total": 1, "evaluated": 1, "message": "0/1 nodes are available: 1 cannot allocate all claims.",
			"nodes": []any{map[string]any{"node": "dgx-1", "fit": false, "plugin": "DynamicResources", "reasons": []any{"cannot allocate all claims"},
				"details": []any{"claim default/c, request gpu: 8 ruled out by the request's selector #0"}}}}}
	bind := api.TraceSpan{Component: "scheduler", Step: "bind", Start: api.MicroTime{Time: t0.Add(time.Second)}, End: api.MicroTime{Time: t0.Add(time.Second)}, Message: "bound to dgx-1"}
	for _, tc := range []struct {
		name      string
		spans     []api.TraceSpan
		explained bool
	}{
		{"unbound", []api.TraceSpan{filter}, true},
		{"bound after a failed attempt", []api.TraceSpan{filter, bind}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFake(runningPod("default", "p", "", "", time.Minute))
			if err := fc.AddTrace(t.Context(), "default", "p", tc.spans...); err != nil {
				t.Fatal(err)
			}
			res := run(t, fc, "", "trace", "pod", "p")
			if res.code != 0 {
				t.Fatalf("trace: %+v", res)
			}
			for _, want := range []string{"Last scheduling attempt:", "claim default/c, request gpu: 8 ruled out by the request's selector #0"} {
				if got := strings.Contains(res.out, want); got != tc.explained {
					t.Errorf("%q in the output: %v, want %v:\n%s", want, got, tc.explained, res.out)
				}
			}
		})
	}
}

// describe pod says when a pod's probes are simulated, and which fail.
func TestDescribePodSimulatedProbes(t *testing.T) {
	p := runningPod("default", "web", "sim-1", "10.0.0.1", time.Minute)
	p.Spec.Containers[0].ReadinessProbe = &api.Probe{HTTPGet: &api.HTTPGetAction{Path: "/", Port: api.IntOrString{IntVal: 80}}}
	p.Annotations = map[string]string{api.AnnotationSimulatedProbeFailure: "readiness"}
	sim := &api.Node{ObjectMeta: meta("", "sim-1", time.Hour)}
	sim.Labels = map[string]string{api.LabelSkiffSimulated: "true"}
	res := run(t, newFake(p, sim), "", "describe", "pod", "web")
	wantContainsLoose(t, res.out, "Probes: simulated (node sim-1 runs no processes: probes pass unless annotation skiff.dev/simulated-probe-failure names them; failing: readiness)\n")

	real := &api.Node{ObjectMeta: meta("", "sim-1", time.Hour)}
	res = run(t, newFake(p, real), "", "describe", "pod", "web")
	if strings.Contains(res.out, "Probes:") {
		t.Errorf("a pod on a real node described as simulated:\n%s", res.out)
	}
}
