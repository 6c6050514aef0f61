package cli

import (
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

// TestDescribeNodeAllocatedSaturates: describe node adds its pods' requests
// and limits by amounts that stop at the int64 bound. Two pods holding 2^62
// GPUs each (bound before validation rejected them) show the largest count,
// not 9223372036854775808 or a negative number, and the percentages of huge
// amounts do not overflow.
func TestDescribeNodeAllocatedSaturates(t *testing.T) {
	n := &api.Node{ObjectMeta: meta("", "node-1", time.Hour)}
	n.Status.Capacity = api.ResourceList{"cpu": resourceQ("8"), "memory": resourceQ("9223372036854775807"), api.ResourceNvidiaGPU: resourceQ("8")}
	n.Status.Allocatable = n.Status.Capacity
	var objs []api.Object
	objs = append(objs, n)
	for _, name := range []string{"a", "b"} {
		p := runningPod("default", name, "node-1", "10.0.0.3", time.Minute)
		p.Spec.Containers[0].Resources.Limits = api.ResourceList{
			"cpu": resourceQ("250m"), "memory": resourceQ("4611686018427387904"), api.ResourceNvidiaGPU: resourceQ("4611686018427387904")}
		objs = append(objs, p)
	}
	res := run(t, newFake(objs...), "", "describe", "node", "node-1")
	wantContainsLoose(t, res.out,
		"(2 in total)",
		"  cpu             500m (6%)  500m (6%)\n",
		"  memory          9223372036854775807 (100%)  9223372036854775807 (100%)\n",
		"  nvidia.com/gpu  9223372036854775807  9223372036854775807\n")
}
