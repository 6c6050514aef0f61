package cli

import (
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

// describe pod lists kubectl debug's containers under "Ephemeral
// Containers:", after Containers, as kubectl prints them.
func TestDescribePodEphemeralContainers(t *testing.T) {
	p := runningPod("default", "web", "node-1", "10.244.0.5", time.Hour)
	p.Spec.EphemeralContainers = []api.EphemeralContainer{{Container: api.Container{Name: "debugger-x7k2p", Image: "busybox", Command: []string{"sh"}}}}
	p.Status.EphemeralContainerStatuses = []api.ContainerStatus{{Name: "debugger-x7k2p", ContainerID: "containerd://abc",
		State: api.ContainerState{Terminated: &api.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}
	r := run(t, fake.New(p), "", "describe", "pod", "web")
	if r.code != 0 {
		t.Fatalf("describe: %s", r.err)
	}
	i, j := strings.Index(r.out, "\nContainers:\n"), strings.Index(r.out, "\nEphemeral Containers:\n  debugger-x7k2p:\n    Container ID:  containerd://abc\n    Image:         busybox\n")
	if i < 0 || j < i || !strings.Contains(r.out[j:], "Reason:       Completed") {
		t.Errorf("describe pod:\n%s", r.out)
	}
}
