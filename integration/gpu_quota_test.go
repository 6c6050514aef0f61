package integration

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
)

// bobsGPUQuota is the lab room's GPU quota on real containerd with the
// real kubectl (a subtest of TestGPUOnSimulatedDGXA100, on its cluster,
// while its eight GPUs are free). The teacher sets up a room of two with
// `skiff classroom create` (a GPU each); bob, with the kubeconfig it
// wrote, runs one GPU pod, which sees one A100; his second is refused by
// his quota in Kubernetes' words although the node has seven GPUs free,
// and he cannot lift his quota. He cannot read or delete carol's pods or
// Secrets (Forbidden, Kubernetes' words). Once his first pod is deleted
// the second is admitted. `classroom delete` takes the room away and
// frees the GPUs for the next subtest.
func (g *gpuCluster) bobsGPUQuota(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gpu-lab")
	g.cli(t, "classroom", "create", "gpu-lab", "--names", "bob,carol", "--hard", "requests.nvidia.com/gpu=1,pods=10", "--dir", dir)
	t.Cleanup(func() {
		g.cli(t, "classroom", "delete", "gpu-lab")
		testwait.Until(t, 60*time.Second, func() (bool, string) {
			nss, _, err := client.List[*api.Namespace](context.Background(), g.c, "", api.ListOptions{LabelSelector: api.LabelClassroom + "=gpu-lab"})
			return err == nil && len(nss) == 0 && len(g.gpuAllocations(t)) == 0, "the room's namespaces or GPUs are still there"
		})
	})
	cc := g.cp.ClientConfig()
	admin := kubectltest.Use(t, cc.Server, cc.CAData, cc.Token)
	student := func(name string) *kubectltest.Cluster {
		kc := *admin
		kc.Kubeconfig = filepath.Join(dir, name+".kubeconfig")
		return &kc
	}
	bob, carol := student("bob"), student("carol")
	for _, kc := range []*kubectltest.Cluster{bob, carol} {
		testwait.Until(t, 10*time.Second, func() (bool, string) { // RBAC's index and the quota's first count
			r := kc.Run(t, "", "get", "quota", "student", "-o", "jsonpath={.status.used}")
			return r.Err == nil && strings.Contains(r.Stdout, `"requests.nvidia.com/gpu":"0"`), r.Stdout + r.Stderr
		})
	}
	carol.Must(t, `apiVersion: v1
kind: Secret
metadata: {name: carol-secret}
stringData: {token: carols-own}
---
apiVersion: v1
kind: Pod
metadata: {name: work}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: `+gpuImage+`
    command: ["sh", "-c", "`+gpuSleep+`"]
`, "apply", "-f", "-")

	pod := func(name string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
  - name: cuda
    image: ` + gpuImage + `
    command: ["sh", "-c", "nvidia-smi -L; ` + gpuSleep + `"]
    resources: {limits: {nvidia.com/gpu: 1}}
`
	}
	bob.Must(t, pod("first"), "apply", "-f", "-")
	bob.Must(t, "", "wait", "--for=condition=Ready", "pod/first", "--timeout=60s")
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		out := bob.Run(t, "", "logs", "first").Stdout
		return len(regexp.MustCompile(`(?m)^GPU \d+: NVIDIA A100`).FindAllString(out, -1)) == 1, out
	})
	r := bob.Run(t, pod("second"), "apply", "-f", "-")
	want := `Error from server (Forbidden): error when creating "STDIN": pods "second" is forbidden: exceeded quota: student, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=1`
	if r.Err == nil || strings.TrimSpace(r.Stderr) != want {
		t.Errorf("bob's second GPU pod: %v\n%s%s\nwant %s", r.Err, r.Stdout, r.Stderr, want)
	}
	if free := gpuAllocatable(g.node(t)) - int64(len(g.gpuAllocations(t))); free != 7 {
		t.Errorf("%d GPUs free on the node, want 7 (the quota refused, not the node)", free)
	}
	if out := bob.Must(t, "", "get", "quota"); !regexp.MustCompile(`(?m)^student\s+pods: 1/10, requests.nvidia.com/gpu: 1/1\s`).MatchString(out) {
		t.Errorf("bob's kubectl get quota:\n%s", out)
	}
	if out := g.cli(t, "classroom", "status", "gpu-lab"); !regexp.MustCompile(`(?m)^bob\s+Active\s+edit\s+pods: 1/10, requests.nvidia.com/gpu: 1/1\s`).MatchString(out) {
		t.Errorf("skiff classroom status:\n%s", out)
	}

	// Carol's work is not bob's to read or delete, nor his quota to lift.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "pods", "-n", "carol"}, `Error from server (Forbidden): pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "carol"`},
		{[]string{"delete", "pod", "work", "-n", "carol"}, `Error from server (Forbidden): pods "work" is forbidden: User "bob" cannot delete resource "pods" in API group "" in the namespace "carol"`},
		{[]string{"get", "secret", "carol-secret", "-n", "carol"}, `Error from server (Forbidden): secrets "carol-secret" is forbidden: User "bob" cannot get resource "secrets" in API group "" in the namespace "carol"`},
		{[]string{"get", "secrets", "-n", "carol"}, `Error from server (Forbidden): secrets is forbidden: User "bob" cannot list resource "secrets" in API group "" in the namespace "carol"`},
		{[]string{"delete", "secret", "carol-secret", "-n", "carol"}, `Error from server (Forbidden): secrets "carol-secret" is forbidden: User "bob" cannot delete resource "secrets" in API group "" in the namespace "carol"`},
		{[]string{"patch", "quota", "student", "--type=merge", "-p", `{"spec":{"hard":{"requests.nvidia.com/gpu":"8"}}}`}, `Error from server (Forbidden): resourcequotas "student" is forbidden: User "bob" cannot patch resource "resourcequotas" in API group "" in the namespace "bob"`},
	} {
		r := bob.Run(t, "", tc.args...)
		if r.Err == nil || strings.TrimSpace(r.Stderr) != tc.want {
			t.Errorf("bob: kubectl %s: %v\n%s%s\nwant %s", strings.Join(tc.args, " "), r.Err, r.Stdout, r.Stderr, tc.want)
		}
	}
	if out := carol.Must(t, "", "get", "secret", "carol-secret", "-o", "jsonpath={.data.token}"); out == "" {
		t.Errorf("carol's secret is gone")
	}
	if out := carol.Must(t, "", "get", "pod", "work", "-o", "jsonpath={.metadata.deletionTimestamp}"); out != "" {
		t.Errorf("carol's pod is being deleted: %s", out)
	}

	// His first pod gone, the quota lets the second in.
	bob.Must(t, "", "delete", "pod", "first")
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		r := bob.Run(t, pod("second"), "apply", "-f", "-")
		return r.Err == nil, r.Stderr
	})
}
