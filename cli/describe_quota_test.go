package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
)

// skiff describe quota, limitrange and namespace print what the real
// kubectl prints for the same objects, byte for byte; skiff get quota
// has kubectl's columns.
func TestDescribeQuotaLikeKubectl(t *testing.T) {
	cp, conf := startTestControlPlane(t, t.TempDir())
	kc := kubectltest.Use(t, cp.URL(), cp.CA().CertPEM(), "unused")
	kc.Kubeconfig = conf
	file := filepath.Join(t.TempDir(), "quota.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: v1
kind: Namespace
metadata: {name: bob}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: gpus, namespace: bob}
spec:
  hard: {requests.nvidia.com/gpu: 1, requests.cpu: "4", limits.memory: 8Gi, pods: "10"}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: best-effort, namespace: bob}
spec:
  hard: {pods: "5"}
  scopes: [BestEffort]
---
apiVersion: v1
kind: LimitRange
metadata: {name: limits, namespace: bob}
spec:
  limits:
  - {type: Container, max: {cpu: 800m}, min: {cpu: 200m}, default: {memory: 512Mi}}
  - {type: Pod, max: {cpu: "2"}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := runCLI(t, "--kubeconfig", conf, "apply", "-f", file); res.code != 0 {
		t.Fatalf("apply: %s%s", res.out, res.err)
	}
	// A pod waits for its quotas' first count, as in Kubernetes ("status
	// unknown for quota" until the controller has set status.hard).
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		out := kc.Must(t, "", "get", "quota", "-n", "bob", "-o", "jsonpath={.items[*].status.hard.pods}")
		return out == "5 10", out // best-effort, gpus
	})
	pod := filepath.Join(t.TempDir(), "pod.yaml")
	if err := os.WriteFile(pod, []byte(`apiVersion: v1
kind: Pod
metadata: {name: cuda, namespace: bob}
spec:
  containers:
  - name: cuda
    image: nvidia/cuda:12.4.0-base-ubuntu22.04
    resources: {limits: {nvidia.com/gpu: 1}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := runCLI(t, "--kubeconfig", conf, "apply", "-f", pod); res.code != 0 {
		t.Fatalf("apply the pod: %s%s", res.out, res.err)
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		out := kc.Must(t, "", "get", "quota", "gpus", "-n", "bob", "-o", "jsonpath={.status.used}")
		return strings.Contains(out, `"requests.nvidia.com/gpu":"1"`), out
	})
	for _, args := range [][]string{
		{"describe", "quota", "gpus", "-n", "bob"},
		{"describe", "quota", "best-effort", "-n", "bob"},
		{"describe", "limitrange", "limits", "-n", "bob"},
		{"describe", "namespace", "bob"},
	} {
		want := kc.Must(t, "", args...)
		res := runCLI(t, append([]string{"--kubeconfig", conf}, args...)...)
		got := res.out
		if args[1] != "quota" {
			// kubectl prints a LimitRange item's resources in Go map
			// order, a different one each run: compare the lines as sets.
			got, want = sortedLines(got), sortedLines(want)
		}
		if res.code != 0 || got != want {
			t.Errorf("skiff %s:\n%s\nkubectl:\n%s", strings.Join(args, " "), res.out, want)
		}
	}
	res := runCLI(t, "--kubeconfig", conf, "create", "quota", "objects", "-n", "bob", "--hard=count/jobs.batch=2,configmaps=5", "--scopes=")
	if res.code != 0 || res.out != "resourcequota/objects created\n" {
		t.Errorf("create quota: %d %q %q", res.code, res.out, res.err)
	}
	if res := runCLI(t, "--kubeconfig", conf, "create", "quota", "bad", "-n", "bob", "--hard=nvidia.com/gpu=1"); res.code == 0 ||
		!strings.Contains(res.err, `spec.hard[nvidia.com/gpu]: Invalid value: "nvidia.com/gpu": not supported by skiff`) {
		t.Errorf("create quota on nvidia.com/gpu: %d %q", res.code, res.err)
	}
	res = runCLI(t, "--kubeconfig", conf, "get", "quota", "-n", "bob")
	lines := strings.Split(strings.TrimSpace(res.out), "\n")
	if len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "NAME REQUEST LIMIT AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[2]), " "), "gpus pods: 1/10, requests.cpu: 800m/4, requests.nvidia.com/gpu: 1/1 limits.memory: 512Mi/8Gi ") {
		t.Errorf("skiff get quota:\n%s", res.out)
	}
}

// sortedLines is s with its lines sorted.
func sortedLines(s string) string {
	lines := strings.Split(s, "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
