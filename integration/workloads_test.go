package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testwait"
)

// The workload kinds of issue 21 on real containerd, typed with the real
// kubectl, on one cluster of two in-process agents (n1, n2) shared by
// every step to keep the suite short:
//
//  1. a plain pod: apply → Running, the baseline of the timings below;
//  2. a DaemonSet: one pod per node, Running, `rollout status` complete;
//  3. a StatefulSet behind a headless Service: web-0 Running before web-1
//     is made, stable names and hostnames, a Bound claim per ordinal
//     (local-path), a file written in web-0 read by the next web-0;
//  4. a CronJob: `create job --from=cronjob/hello` runs its template now
//     and the pod's log says hello (the schedule itself is tested on a
//     fake clock in controlplane/controllers);
//  5. a PodDisruptionBudget over a Deployment: `drain --ignore-daemonsets`
//     of a node leaves its DaemonSet pod and evicts the Deployment's pods
//     only when the budget allows, retrying the budget's 429.
//
// Each apply → Running is logged next to the plain pod's, measured in
// this run (a ratio, never asserted: docs/performance.md).
func TestWorkloadsOnContainerd(t *testing.T) {
	e := newCtrdEnv(t)
	cp, c := startControlPlane(t, nil)
	for _, n := range []string{"n1", "n2"} {
		startServedAgent(t, cp, e.runtime(t), n) // logs and exec reach it
	}
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		nodes, _, err := client.List[*api.Node](context.Background(), c, "", api.ListOptions{})
		ready := 0
		for _, n := range nodes {
			for _, cond := range n.Status.Conditions {
				if cond.Type == api.NodeReady && cond.Status == api.ConditionTrue {
					ready++
				}
			}
		}
		return err == nil && ready == 2, "two Ready nodes"
	})
	k := kubectlFor(t, cp)
	dir := t.TempDir()
	apply := func(name, yaml string) time.Time {
		t.Helper()
		f := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		k.Must(t, "", "apply", "-f", f)
		return start
	}
	running := func(selector string, n int) func() (bool, string) {
		return func() (bool, string) {
			ps := listPods(t, c, "default", selector)
			return len(ps) == n && runningPods(ps) == n, selector + ": " + podSummary(ps)
		}
	}

	// 1. The baseline.
	start := apply("plain", plainPodYAML)
	testwait.Until(t, 90*time.Second, running("app=plain", 1))
	plain := time.Since(start)

	// 2. The DaemonSet: one pod on each node.
	start = apply("ds", workloadDaemonSetYAML)
	testwait.Until(t, 60*time.Second, running("app=agent", 2))
	ds := time.Since(start)
	nodes := map[string]bool{}
	for _, p := range listPods(t, c, "default", "app=agent") {
		nodes[p.Spec.NodeName] = true
	}
	if !nodes["n1"] || !nodes["n2"] {
		t.Errorf("DaemonSet pods on %v, want one on n1 and one on n2", nodes)
	}
	if out := k.Must(t, "", "rollout", "status", "ds/agent", "--timeout=30s"); !strings.Contains(out, `daemon set "agent" successfully rolled out`) {
		t.Errorf("rollout status ds: %q", out)
	}

	// 3. The StatefulSet: web-0 before web-1.
	start = apply("sts", workloadStatefulSetYAML)
	// web-0 Running (web-1 may follow before the next poll: not "exactly one").
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		ps := listPods(t, c, "default", "app=web")
		for _, p := range ps {
			if p.Name == "web-0" && runningPods([]*api.Pod{p}) == 1 {
				return true, ""
			}
		}
		return false, "web-0 Running: " + podSummary(ps)
	})
	web0 := time.Since(start)
	w0, err := client.Get[*api.Pod](context.Background(), c, "default", "web-0")
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 60*time.Second, running("app=web", 2))
	w1, err := client.Get[*api.Pod](context.Background(), c, "default", "web-1")
	if err != nil {
		t.Fatal(err)
	}
	if ready := readySince(w0); ready.IsZero() || w1.CreationTimestamp.Time.Before(ready.Add(-time.Second)) {
		t.Errorf("web-1 made at %v, before web-0 was Ready at %v", w1.CreationTimestamp.Time, ready)
	}
	if w0.Spec.Hostname != "web-0" || w0.Spec.Subdomain != "nginx" {
		t.Errorf("web-0 hostname %q subdomain %q, want web-0 and nginx", w0.Spec.Hostname, w0.Spec.Subdomain)
	}
	if out := k.Must(t, "", "exec", "web-0", "--", "hostname"); strings.TrimSpace(out) != "web-0" {
		t.Errorf("hostname in web-0: %q", out)
	}
	// Each ordinal has its claim, Bound (local-path, WaitForFirstConsumer);
	// a file written in web-0 is there for the next web-0.
	for _, name := range []string{"www-web-0", "www-web-1"} {
		pvc, err := client.Get[*api.PersistentVolumeClaim](context.Background(), c, "default", name)
		if err != nil || pvc.Status.Phase != api.ClaimBound {
			t.Errorf("claim %s: %v %+v", name, err, pvc)
		}
	}
	k.Must(t, "", "exec", "web-0", "--", "sh", "-c", "echo written-by-web-0 > /data/f")
	k.Must(t, "", "delete", "pod", "web-0", "--wait=true")
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		p, err := client.Get[*api.Pod](context.Background(), c, "default", "web-0")
		return err == nil && p.UID != w0.UID && runningPods([]*api.Pod{p}) == 1, "a new web-0 running"
	})
	if out := k.Must(t, "", "exec", "web-0", "--", "cat", "/data/f"); strings.TrimSpace(out) != "written-by-web-0" {
		t.Errorf("the new web-0 reads %q from its claim", out)
	}

	// 4. The CronJob's template, run now.
	apply("cronjob", workloadCronJobYAML)
	if out := k.Must(t, "", "create", "job", "hello-now", "--from=cronjob/hello"); strings.TrimSpace(out) != "job.batch/hello-now created" {
		t.Errorf("create job --from: %q", out)
	}
	if out := k.Must(t, "", "wait", "--for=condition=complete", "job/hello-now", "--timeout=60s"); strings.TrimSpace(out) != "job.batch/hello-now condition met" {
		t.Errorf("wait job: %q", out)
	}
	if out := k.Must(t, "", "logs", "job/hello-now"); !strings.Contains(out, "Hello from the Kubernetes cluster") {
		t.Errorf("logs job/hello-now: %q", out)
	}

	// 5. drain waits on the budget: minAvailable 2 of the 2 busy pods
	// refuses every eviction; with 1, drain evicts one at a time.
	apply("busy", workloadDeploymentYAML)
	testwait.Until(t, 60*time.Second, running("app=busy", 2))
	apply("pdb", workloadPDBYAML)
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		p, err := client.Get[*api.PodDisruptionBudget](context.Background(), c, "default", "busy-pdb")
		return err == nil && p.Status.ObservedGeneration == 1 && p.Status.CurrentHealthy == 2, "the budget's status"
	})
	// The plain pod has no controller: drain would refuse it.
	k.Must(t, "", "delete", "pod", "plain", "--wait=true")
	victim := listPods(t, c, "default", "app=busy")[0].Spec.NodeName
	r := k.Run(t, "", "drain", victim, "--ignore-daemonsets", "--timeout=5s")
	all := r.Stdout + r.Stderr
	if r.Err == nil || !strings.Contains(all, "Cannot evict pod as it would violate the pod's disruption budget.") {
		t.Errorf("drain of %s with minAvailable 2 of 2: err %v\n%s", victim, r.Err, all)
	}
	if !strings.Contains(all, "Warning: ignoring DaemonSet-managed Pods: default/agent-") {
		t.Errorf("drain does not say it leaves the DaemonSet pod:\n%s", all)
	}
	k.Must(t, "", "patch", "pdb", "busy-pdb", "--type=merge", "-p", `{"spec":{"minAvailable":1}}`)
	r = k.Run(t, "", "drain", victim, "--ignore-daemonsets", "--timeout=60s")
	if r.Err != nil || !strings.Contains(r.Stdout, "node/"+victim+" drained") {
		t.Errorf("drain of %s with minAvailable 1: %v\n%s%s", victim, r.Err, r.Stdout, r.Stderr)
	}
	for _, p := range listPods(t, c, "default", "") {
		switch {
		case p.Spec.NodeName != victim || p.DeletionTimestamp != nil:
		case strings.HasPrefix(p.Name, "agent-"), p.Status.Phase == api.PodSucceeded:
		default:
			t.Errorf("pod %s still on drained %s", p.Name, victim)
		}
	}
	if n := len(listPods(t, c, "default", "app=agent")); n != 2 {
		t.Errorf("%d DaemonSet pods after drain, want 2 (drain leaves them)", n)
	}
	k.Must(t, "", "uncordon", victim)

	t.Logf("apply → Running on containerd: plain pod %v; DaemonSet (2 pods) %v (%.2fx); StatefulSet web-0 %v (%.2fx)",
		plain.Round(time.Millisecond), ds.Round(time.Millisecond), ratio(ds, plain), web0.Round(time.Millisecond), ratio(web0, plain))
}

// readySince is when the pod's Ready condition last became True.
func readySince(p *api.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == api.PodReady && c.Status == api.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// The pods below stop at once on SIGTERM, so drain does not wait out a
// grace period.
const plainPodYAML = `apiVersion: v1
kind: Pod
metadata:
  name: plain
  labels: {app: plain}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox:1.36
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
`

const workloadDaemonSetYAML = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: main
        image: busybox:1.36
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
`

const workloadStatefulSetYAML = `apiVersion: v1
kind: Service
metadata:
  name: nginx
  labels: {app: web}
spec:
  clusterIP: None
  selector: {app: web}
  ports:
  - port: 80
    name: web
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  serviceName: nginx
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: main
        image: busybox:1.36
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
        volumeMounts:
        - name: www
          mountPath: /data
  volumeClaimTemplates:
  - metadata:
      name: www
    spec:
      accessModes: [ "ReadWriteOnce" ]
      resources:
        requests:
          storage: 1Gi
`

// The Kubernetes docs' hello CronJob, with the local busybox.
const workloadCronJobYAML = `apiVersion: batch/v1
kind: CronJob
metadata:
  name: hello
spec:
  schedule: "* * * * *"
  suspend: true
  jobTemplate:
    spec:
      template:
        spec:
          containers:
          - name: hello
            image: busybox:1.36
            imagePullPolicy: IfNotPresent
            command:
            - /bin/sh
            - -c
            - date; echo Hello from the Kubernetes cluster
          restartPolicy: OnFailure
`

const workloadDeploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: busy
spec:
  replicas: 2
  selector:
    matchLabels: {app: busy}
  template:
    metadata:
      labels: {app: busy}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: main
        image: busybox:1.36
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
`

const workloadPDBYAML = `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: busy-pdb
spec:
  minAvailable: 2
  selector:
    matchLabels: {app: busy}
`
