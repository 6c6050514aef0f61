package cli

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

// A HAMi node's describe shows each GPU's slices: the pod holding each,
// the memory and cores it took, and what is left of the GPU; a finished
// pod's slices are not counted.
func TestDescribeNodeHAMiSlices(t *testing.T) {
	n := &api.Node{ObjectMeta: api.ObjectMeta{Name: "gpu-1", Annotations: map[string]string{api.HAMiNodeRegister: api.EncodeHAMiNodeDevices([]api.HAMiNodeDevice{
		{ID: "GPU-a", Count: 10, Devmem: 40960, Devcore: 100, Type: "NVIDIA-NVIDIA A100-SXM4-40GB", Health: true},
		{ID: "GPU-b", Count: 10, Devmem: 40960, Devcore: 100, Type: "NVIDIA-NVIDIA A100-SXM4-40GB", Health: true}})}}}
	pod := func(name, phase string, pd api.HAMiPodDevices) *api.Pod {
		p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default",
			Annotations: map[string]string{api.HAMiDevicesAllocated: api.EncodeHAMiPodDevices(pd)}}}
		p.Spec.NodeName = "gpu-1"
		p.Spec.Containers = []api.Container{{Name: "main"}}
		p.Status.Phase = phase
		return p
	}
	c := func(uuid string, mem, cores int32) api.HAMiContainerDevice {
		return api.HAMiContainerDevice{UUID: uuid, Type: api.HAMiDeviceType, Usedmem: mem, Usedcores: cores}
	}
	cl := fake.New(n,
		pod("two-cards", api.PodRunning, api.HAMiPodDevices{{c("GPU-a", 3000, 30), c("GPU-b", 3000, 30)}}),
		pod("small", api.PodRunning, api.HAMiPodDevices{{c("GPU-a", 1000, 0)}}),
		pod("done", api.PodSucceeded, api.HAMiPodDevices{{c("GPU-b", 20000, 50)}}))
	var b bytes.Buffer
	if err := describeObject(context.Background(), &b, cl, api.MustKindOf(n), n, time.Now()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, re := range []string{
		`GPU devices:\s+\(HAMi vGPU slices\)`,
		`(?m)^\s+0\s+GPU-a\s+1/10\s+1000MiB\s+0%\s+default/small \(container main\)$`,
		`(?m)^\s+0\s+GPU-a\s+2/10\s+3000MiB\s+30%\s+default/two-cards \(container main\)$`,
		`(?m)^\s+0\s+GPU-a\s+free 8/10\s+36960MiB of 40960MiB\s+70% of 100%\s+<none>$`,
		`(?m)^\s+1\s+GPU-b\s+1/10\s+3000MiB\s+30%\s+default/two-cards \(container main\)$`,
		`(?m)^\s+1\s+GPU-b\s+free 9/10\s+37960MiB of 40960MiB\s+70% of 100%\s+<none>$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("describe node lacks %s:\n%s", re, out)
		}
	}
	if regexp.MustCompile(`default/done`).MatchString(out) {
		t.Errorf("a finished pod's slice is shown:\n%s", out)
	}
}
