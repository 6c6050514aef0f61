package framework

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
)

func gpuPod(name, gpus string) *PodInfo {
	return NewPodInfo(&api.Pod{
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "c",
			Resources: api.ResourceRequirements{Limits: api.ResourceList{api.ResourceNvidiaGPU: resource.MustParse(gpus)}}}}},
	})
}

// TestNodeInfoSumsSaturate: a node's sums stop at math.MaxInt64 and, once
// they have, removing a pod recounts the others instead of subtracting from
// a sum that no longer holds the truth.
func TestNodeInfoSumsSaturate(t *testing.T) {
	const half = "4611686018427387904" // 2^62
	tests := []struct {
		name   string
		pods   []string // GPUs of each pod, added in order
		remove int      // index of the pod removed afterwards
		full   int64    // GPUs requested with every pod
		after  int64    // GPUs requested after the removal
	}{
		{"small sums are exact", []string{"1", "2", "4"}, 1, 7, 5},
		{"2^62 + 2^62 saturates", []string{half, half, "1"}, 2, math.MaxInt64, math.MaxInt64},
		{"removal from a saturated sum recounts", []string{half, half, "3"}, 0, math.MaxInt64, 1<<62 + 3},
		{"1e400 counts as the most, not as 0", []string{"1e400", "2"}, 0, math.MaxInt64, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := NewNodeInfo(&api.Node{ObjectMeta: api.ObjectMeta{Name: "n"}})
			var pods []*PodInfo
			for i, g := range tt.pods {
				p := gpuPod(string(rune('a'+i)), g)
				pods = append(pods, p)
				n.AddPod(p)
			}
			if got := n.Requested.Scalar[api.ResourceNvidiaGPU]; got != tt.full {
				t.Fatalf("requested with every pod = %d, want %d", got, tt.full)
			}
			if !n.RemovePod(pods[tt.remove].Key) {
				t.Fatal("pod not found")
			}
			if got := n.Requested.Scalar[api.ResourceNvidiaGPU]; got != tt.after {
				t.Errorf("requested after removing pod %d = %d, want %d", tt.remove, got, tt.after)
			}
		})
	}
}

// The GPU amounts kept beside the maps (AllocatableScalar,
// RequestedScalar) follow every change of the maps: node replaced, pods
// added and removed (saturating ones too), clones.
func TestNodeInfoGPUFieldsFollowMaps(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 26))
	node := func(gpus string) *api.Node {
		n := &api.Node{ObjectMeta: api.ObjectMeta{Name: "n"}}
		if gpus != "" {
			n.Status.Allocatable = api.ResourceList{api.ResourceNvidiaGPU: resource.MustParse(gpus)}
		}
		return n
	}
	amounts := []string{"", "0", "1", "8", "9223372036854775807"}
	n := &NodeInfo{}
	var keys []string
	for i := range 5000 {
		switch r.IntN(4) {
		case 0:
			n.SetNode(node(amounts[r.IntN(len(amounts))]))
		case 1:
			key := fmt.Sprint("p", i)
			n.AddPod(gpuPod(key, amounts[1+r.IntN(len(amounts)-1)]))
			keys = append(keys, "default/"+key)
		case 2:
			if len(keys) > 0 {
				j := r.IntN(len(keys))
				n.RemovePod(keys[j])
				keys = slices.Delete(keys, j, j+1)
			}
		case 3:
			n = n.Clone()
		}
		if n.Node == nil {
			continue
		}
		if got, want := n.AllocatableScalar(api.ResourceNvidiaGPU), n.Allocatable.Scalar[api.ResourceNvidiaGPU]; got != want {
			t.Fatalf("step %d: AllocatableScalar = %d, map %d", i, got, want)
		}
		if got, want := n.RequestedScalar(api.ResourceNvidiaGPU), n.Requested.Scalar[api.ResourceNvidiaGPU]; got != want {
			t.Fatalf("step %d: RequestedScalar = %d, map %d", i, got, want)
		}
	}
}

// A clone and its original change apart: pods added to one are not in the
// other's sums, and a node replaced in one leaves the other's allocatable
// (whose map the two share until then) as it was.
func TestNodeInfoCloneIndependent(t *testing.T) {
	node := func(gpus string) *api.Node {
		return &api.Node{ObjectMeta: api.ObjectMeta{Name: "n"},
			Status: api.NodeStatus{Allocatable: api.ResourceList{api.ResourceNvidiaGPU: resource.MustParse(gpus)}}}
	}
	n := &NodeInfo{}
	n.SetNode(node("8"))
	n.AddPod(gpuPod("a", "2"))
	c := n.Clone()
	c.AddPod(gpuPod("b", "1"))
	n.SetNode(node("4"))
	if got := c.Allocatable.Scalar[api.ResourceNvidiaGPU]; got != 8 {
		t.Errorf("the clone's allocatable GPUs = %d after the original's node changed, want 8", got)
	}
	if got := n.Allocatable.Scalar[api.ResourceNvidiaGPU]; got != 4 {
		t.Errorf("the original's allocatable GPUs = %d, want 4", got)
	}
	if n, c := n.Requested.Scalar[api.ResourceNvidiaGPU], c.Requested.Scalar[api.ResourceNvidiaGPU]; n != 2 || c != 3 {
		t.Errorf("requested GPUs: original %d, clone %d; want 2 and 3", n, c)
	}
}
