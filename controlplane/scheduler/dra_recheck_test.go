package scheduler

import (
	"slices"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testwait"
)

// The interleaving of the DRA/device-plugin race, scheduler side: the
// allocator chose gpu-0 from the slice the informer had; before PreBind
// wrote the allocation, the node took gpu-0 out of its slice to hand it
// out through nvidia.com/gpu (agent/dra/gpudriver Driver.Withdraw). PreBind
// reads the slice again after its write, takes the allocation back and
// does not bind the pod (it would wait at prepare until the other pod
// ends); the next try, from the new slice, allocates gpu-1.
func TestDynamicResourcesTakesBackADeviceThatLeftTheSlice(t *testing.T) {
	f := newDRAFixture(t, gpuNode("dgx-1", 0), gpuClass(), gpuSlice("dgx-1", "nvl-0", "nvl-0"), gpuClaim("c"), claimPodFor("p", "c"))
	tk := f.cycle()
	if tk == nil || tk.result.SelectedNode != "dgx-1" {
		t.Fatalf("first try: %+v", tk)
	}
	// The node withdraws gpu-0 now, between the allocator's choice and the write.
	s, err := client.Get[*api.ResourceSlice](f.ctx, f.c, "", "dgx-1-gpu.nvidia.com")
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Devices = slices.DeleteFunc(s.Spec.Devices, func(d api.Device) bool { return d.Name == "gpu-0" })
	s.Spec.Pool.Generation++
	if _, err := f.c.Update(f.ctx, s); err != nil {
		t.Fatal(err)
	}
	f.finish(tk)
	c := f.claim("c")
	if c.Status.Allocation != nil || len(c.Status.ReservedFor) != 0 {
		t.Fatalf("after the device left the slice: allocation %v reservedFor %v, want taken back", allocatedDevices(c), c.Status.ReservedFor)
	}
	if p := f.pod("gpu-demo", "p"); p.Spec.NodeName != "" {
		t.Fatalf("pod bound to %q with a device the node is handing out otherwise", p.Spec.NodeName)
	}
	evs := strings.Join(f.ev.take(), "\n")
	if !strings.Contains(evs, "device gpu-0 of pool dgx-1 (driver gpu.nvidia.com) left the ResourceSlices of node dgx-1") ||
		!strings.Contains(evs, "allocation taken back") {
		t.Errorf("the events do not say why the pod was not bound:\n%s", evs)
	}
	// Tried again (past its backoff) once the informer has the new slice
	// (a try before that is taken back the same way): gpu-1.
	testwait.For(t, 5*time.Second, "the pod bound on a later try", func() bool {
		f.clock = f.clock.Add(time.Minute)
		f.s.queue.Flush()
		f.step()
		return f.pod("gpu-demo", "p").Spec.NodeName == "dgx-1"
	})
	if got := allocatedDevices(f.claim("c")); !slices.Equal(got, []string{"gpu:gpu-1"}) {
		t.Errorf("second try allocated %v, want gpu:gpu-1", got)
	}
}
