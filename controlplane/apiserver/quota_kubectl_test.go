package apiserver

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"skiff.dev/skiff/internal/kubectltest"
)

// The real kubectl with quotas and limit ranges: the docs' objects apply;
// get quota prints NAME REQUEST LIMIT AGE with used/hard; describe quota,
// describe limitrange and describe namespace print kubectl's tables; a
// GPU pod over the quota is refused with Kubernetes' words; kubectl create
// quota works.
func TestKubectlQuota(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ensureNamespace(t, e, context.Background(), "bob")
	runQuotaController(t, e)
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	const docs = `apiVersion: v1
kind: ResourceQuota
metadata:
  name: gpus
  namespace: bob
spec:
  hard:
    requests.nvidia.com/gpu: 1
    requests.cpu: "4"
    limits.memory: 8Gi
    pods: "10"
---
apiVersion: v1
kind: LimitRange
metadata:
  name: cpu-min-max-demo-lr
  namespace: bob
spec:
  limits:
  - max:
      cpu: "800m"
    min:
      cpu: "200m"
    type: Container
`
	out := c.Must(t, docs, "apply", "-f", "-")
	for _, want := range []string{"resourcequota/gpus created", "limitrange/cpu-min-max-demo-lr created"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply: %s, want %q", out, want)
		}
	}
	waitUsed(t, e, "bob", "gpus", "requests.nvidia.com/gpu", "0")
	const pod = `apiVersion: v1
kind: Pod
metadata: {name: NAME, namespace: bob}
spec:
  containers:
  - name: cuda
    image: nvidia/cuda:12.4.0-base-ubuntu22.04
    resources:
      limits: {nvidia.com/gpu: 1, memory: 1Gi}
`
	c.Must(t, strings.ReplaceAll(pod, "NAME", "first"), "apply", "-f", "-")
	r := c.Run(t, strings.ReplaceAll(pod, "NAME", "second"), "apply", "-f", "-")
	want := `Error from server (Forbidden): error when creating "STDIN": pods "second" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=1`
	if r.Err == nil || strings.TrimSpace(r.Stderr) != want {
		t.Errorf("second GPU pod: %v %q, want %q", r.Err, r.Stderr, want)
	}
	waitUsed(t, e, "bob", "gpus", "requests.nvidia.com/gpu", "1")

	fields := func(l string) string { return strings.Join(strings.Fields(l), " ") }
	lines := strings.Split(strings.TrimSpace(c.Must(t, "", "get", "quota", "-n", "bob")), "\n")
	if len(lines) != 2 || fields(lines[0]) != "NAME REQUEST LIMIT AGE" ||
		!regexp.MustCompile(`^gpus pods: 1/10, requests.cpu: 800m/4, requests.nvidia.com/gpu: 1/1 limits.memory: 1Gi/8Gi \S+$`).MatchString(fields(lines[1])) {
		t.Errorf("get quota:\n%s", strings.Join(lines, "\n"))
	}
	describe := c.Must(t, "", "describe", "quota", "gpus", "-n", "bob")
	for _, re := range []string{`(?m)^Name:\s+gpus$`, `(?m)^Namespace:\s+bob$`, `(?m)^Resource\s+Used\s+Hard$`, `(?m)^--------\s+----\s+----$`,
		`(?m)^limits.memory\s+1Gi\s+8Gi$`, `(?m)^pods\s+1\s+10$`, `(?m)^requests.cpu\s+800m\s+4$`, `(?m)^requests.nvidia.com/gpu\s+1\s+1$`} {
		if !regexp.MustCompile(re).MatchString(describe) {
			t.Errorf("describe quota: no %s in\n%s", re, describe)
		}
	}
	lr := c.Must(t, "", "describe", "limitrange", "cpu-min-max-demo-lr", "-n", "bob")
	for _, re := range []string{`(?m)^Type\s+Resource\s+Min\s+Max\s+Default Request\s+Default Limit\s+Max Limit/Request Ratio$`,
		`(?m)^Container\s+cpu\s+200m\s+800m\s+800m\s+800m\s+-$`} {
		if !regexp.MustCompile(re).MatchString(lr) {
			t.Errorf("describe limitrange: no %s in\n%s", re, lr)
		}
	}
	ns := c.Must(t, "", "describe", "namespace", "bob")
	for _, re := range []string{`(?m)^Resource Quotas$`, `(?m)^\s+Name:\s+gpus$`, `(?m)^\s+requests.nvidia.com/gpu\s+1\s+1$`, `(?m)^Resource Limits$`, `(?m)^\s+Container\s+cpu\s+200m\s+800m`} {
		if !regexp.MustCompile(re).MatchString(ns) {
			t.Errorf("describe namespace: no %s in\n%s", re, ns)
		}
	}
	if out := c.Must(t, "", "get", "limits", "-n", "bob"); !regexp.MustCompile(`(?m)^NAME\s+CREATED AT\ncpu-min-max-demo-lr\s+\d{4}-\d\d-\d\dT`).MatchString(out) {
		t.Errorf("get limits:\n%s", out)
	}
	if out := c.Must(t, "", "create", "quota", "objects", "-n", "bob", "--hard=count/jobs.batch=2,configmaps=5"); !strings.Contains(out, "resourcequota/objects created") {
		t.Errorf("create quota: %s", out)
	}
}
