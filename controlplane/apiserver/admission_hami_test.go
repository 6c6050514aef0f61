package apiserver

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/kubectltest"
)

// HAMi's webhook through the real kubectl: nvidia.com/priority becomes
// CUDA_TASK_PRIORITY in the container's environment (HAMi's example:
// 0 high, 1 low), init containers too; a gpumem-percentage over 100 is
// refused in HAMi's words as Kubernetes relays a webhook's refusal, and
// nothing is stored.
func TestKubectlHAMiWebhook(t *testing.T) {
	e := newEnv(t)
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	const pod = `apiVersion: v1
kind: Pod
metadata:
  name: prio
spec:
  initContainers:
  - name: init
    image: busybox
    resources:
      limits:
        nvidia.com/gpu: 1
        nvidia.com/priority: 1
  containers:
  - name: main
    image: busybox
    env:
    - name: KEEP
      value: "x"
    resources:
      limits:
        nvidia.com/gpu: 1
        nvidia.com/gpumem: 3000
        nvidia.com/priority: 0
  - name: plain
    image: busybox
`
	if out := strings.TrimSpace(c.Must(t, pod, "apply", "-f", "-")); out != "pod/prio created" {
		t.Fatalf("apply: %q", out)
	}
	got := c.Must(t, "", "get", "pod", "prio", "-o", `jsonpath={range .spec.initContainers[*]}{.name}={.env}{"\n"}{end}{range .spec.containers[*]}{.name}={.env}{"\n"}{end}`)
	want := `init=[{"name":"CUDA_TASK_PRIORITY","value":"1"}]
main=[{"name":"KEEP","value":"x"},{"name":"CUDA_TASK_PRIORITY","value":"0"}]
plain=
`
	if got != want {
		t.Fatalf("environments:\n%s\nwant:\n%s", got, want)
	}

	bad := strings.Replace(strings.Replace(pod, "name: prio", "name: toomuch", 1),
		"nvidia.com/gpumem: 3000", "nvidia.com/gpumem-percentage: 150", 1)
	r := c.Run(t, bad, "apply", "-f", "-")
	wantErr := `Error from server: error when creating "STDIN": admission webhook "vgpu.hami.io" denied the request: invalid nvidia.com/gpumem-percentage value 150 in container main: must be an integer between 0 and 100`
	if r.Err == nil || strings.TrimSpace(r.Stderr) != wantErr {
		t.Fatalf("apply gpumem-percentage 150: err %v\n%s\nwant:\n%s", r.Err, r.Stderr, wantErr)
	}
	if _, err := client.Get[*api.Pod](t.Context(), e.local, "default", "toomuch"); !api.IsNotFound(err) {
		t.Fatalf("refused pod stored: %v", err)
	}
}

// HAMiMutateAdmission alone: requests count for the percentage check when
// there is no limit; a priority in requests only is not HAMi's (it reads
// limits) and adds nothing.
func TestHAMiMutateAdmissionRequests(t *testing.T) {
	p := &api.Pod{Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Resources: api.ResourceRequirements{
		Requests: quantities(api.HAMiResourceMemPercentage, "101", api.HAMiResourcePriority, "0")}}}}}
	err := api.HAMiMutateAdmission(p)
	if err == nil || err.Error() != "invalid nvidia.com/gpumem-percentage value 101 in container c: must be an integer between 0 and 100" {
		t.Fatalf("err %v", err)
	}
	p.Spec.Containers[0].Resources.Requests[api.HAMiResourceMemPercentage] = resource.MustParse("100")
	if err := api.HAMiMutateAdmission(p); err != nil || len(p.Spec.Containers[0].Env) != 0 {
		t.Fatalf("err %v env %v", err, p.Spec.Containers[0].Env)
	}
}
