package scheduler

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
)

// hamiNode is a node whose agent registered two 4 GiB cards for HAMi and
// advertises HAMi's nvidia.com/gpu (2 cards × 10 slices).
func hamiNode(name string) *api.Node {
	return gpuNode(name, 20, func(n *api.Node) {
		n.Annotations = map[string]string{api.HAMiNodeRegister: api.EncodeHAMiNodeDevices([]api.HAMiNodeDevice{
			{ID: "GPU-0", Count: 10, Devmem: 4096, Devcore: 100, Type: "NVIDIA-Tesla T4", Health: true},
			{ID: "GPU-1", Count: 10, Devmem: 4096, Devcore: 100, Type: "NVIDIA-Tesla T4", Health: true},
		})}
	})
}

func slice(mem, cores int64) func(*api.Pod) {
	return func(p *api.Pod) {
		l := p.Spec.Containers[0].Resources.Limits
		l[api.HAMiResourceMem] = *resource.NewQuantity(mem, resource.DecimalSI)
		l[api.HAMiResourceCores] = *resource.NewQuantity(cores, resource.DecimalSI)
	}
}

// HAMi's example pod shape through the whole scheduler: two 3000 MiB
// slices take both cards (spread: the second goes to the emptier card),
// written on the pods; a third is Pending in HAMi's words. On a node
// without HAMi's registration the slice resources are not there at all.
func TestHAMiSlicesScheduled(t *testing.T) {
	f := newFixture(t, defaultConfig(noPreemption), hamiNode("t4"))
	for _, name := range []string{"a", "b", "c"} {
		f.add(gpuPod(name, 1, slice(3000, 30)))
	}
	var cards []string
	for range 2 {
		res := f.step()
		if res == nil || res.SelectedNode != "t4" {
			t.Fatalf("not scheduled: %+v", res)
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		p := f.pod("gpu-demo", name)
		if p.Spec.NodeName == "" {
			continue // the one left for the third step
		}
		if p.Spec.NodeName != "t4" || p.Annotations[api.HAMiVGPUNode] != "t4" || p.Annotations[api.HAMiBindPhase] != "allocating" {
			t.Fatalf("pod %s: node %q annotations %v", name, p.Spec.NodeName, p.Annotations)
		}
		pd, err := api.DecodeHAMiPodDevices(p.Annotations[api.HAMiDevicesToAllocate])
		if err != nil || len(pd) != 1 || len(pd[0]) != 1 || pd[0][0].Usedmem != 3000 || pd[0][0].Usedcores != 30 {
			t.Fatalf("pod %s decision %v: %v", name, p.Annotations, err)
		}
		cards = append(cards, pd[0][0].UUID)
	}
	if len(cards) != 2 || cards[0] == cards[1] {
		t.Fatalf("both slices on %s: spread should use both cards", cards[0])
	}
	res := f.step()
	if res == nil || res.SelectedNode != "" {
		t.Fatalf("third slice scheduled: %+v", res)
	}
	if want := "0/1 nodes are available: 1 2/2 CardInsufficientMemory."; res.Message != want {
		t.Fatalf("message %q, want %q", res.Message, want)
	}
	// What describe pod shows (the trace's explanation): per GPU, used +
	// asked against the total.
	if ex := Explain(res); !strings.Contains(ex, "Why HAMi rejected node t4:") ||
		!strings.Contains(ex, "GPU 0 (GPU-0): CardInsufficientMemory: memory 3000 used + 3000 asked > 4096 MiB; cores 30 used + 30 asked of 100%; slices 1 used + 1 of 10") {
		t.Fatalf("explanation:\n%s", ex)
	}

	g := newFixture(t, defaultConfig(noPreemption), gpuNode("plain", 8), gpuPod("p", 1, slice(3000, 30)))
	if res := g.step(); res == nil || !strings.Contains(res.Message, "Insufficient nvidia.com/gpumem") {
		t.Fatalf("plain node: %+v", res)
	}
}
