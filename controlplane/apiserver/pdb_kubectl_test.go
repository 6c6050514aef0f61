package apiserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/controllers"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
)

// The real kubectl with a PodDisruptionBudget and the disruption
// controller: create pdb (a protobuf body), get pdb columns, and drain of
// a node holding all 3 replicas of a Deployment with minAvailable 2: the
// first eviction goes through, the next are refused with kube-apiserver's
// 429 until a replacement is Ready on the other node, and kubectl retries
// until the node is drained.
func TestKubectlDrainWaitsOnDisruptionBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- controllers.Run(ctx, e.local, e.local, controllers.Options{}) }()
	t.Cleanup(func() { cancel(); <-done })
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)

	fakeNodes(t, e.local, "n1", "n2")
	// Every replica on n1: n2 is cordoned while they start.
	c.Must(t, "", "cordon", "n2")
	c.Must(t, "", "create", "deployment", "web", "--image=nginx", "--replicas=3")
	testwait.For(t, 20*time.Second, "3 ready replicas on n1", func() bool {
		d, err := client.Get[*api.Deployment](t.Context(), e.local, "default", "web")
		return err == nil && d.Status.ReadyReplicas == 3
	})
	c.Must(t, "", "uncordon", "n2")
	if out := c.Must(t, "", "create", "pdb", "web-pdb", "--selector=app=web", "--min-available=2"); strings.TrimSpace(out) != "poddisruptionbudget.policy/web-pdb created" {
		t.Fatalf("create pdb: %q", out)
	}
	testwait.For(t, 10*time.Second, "the budget's status", func() bool {
		p, err := client.Get[*api.PodDisruptionBudget](t.Context(), e.local, "default", "web-pdb")
		return err == nil && p.Status.ObservedGeneration == 1 && p.Status.DisruptionsAllowed == 1
	})
	lines := strings.Split(strings.TrimSpace(c.Must(t, "", "get", "pdb")), "\n")
	if h := strings.Join(strings.Fields(lines[0]), " "); h != "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "web-pdb 2 N/A 1 ") {
		t.Errorf("get pdb:\n%s", strings.Join(lines, "\n"))
	}
	r := c.Run(t, "", "drain", "n1", "--ignore-daemonsets", "--timeout=60s")
	if r.Err != nil {
		t.Fatalf("drain: %v\n%s\n%s", r.Err, r.Stdout, r.Stderr)
	}
	all := r.Stdout + r.Stderr
	for _, want := range []string{"node/n1 cordoned", "Cannot evict pod as it would violate the pod's disruption budget.", "(will retry after 5s)", "node/n1 drained"} {
		if !strings.Contains(all, want) {
			t.Errorf("drain output lacks %q:\n%s", want, all)
		}
	}
	pods, _, err := client.List[*api.Pod](context.Background(), e.local, "default", api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.NodeName == "n1" {
			t.Errorf("pod %s still on the drained n1", p.Name)
		}
	}
	// The drain ends once n1 is empty; the last replacement on n2 may not
	// be Ready yet, and the budget allows a disruption again only when it
	// is: wait for that, then describe must say so.
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		p, err := client.Get[*api.PodDisruptionBudget](t.Context(), e.local, "default", "web-pdb")
		if err != nil {
			return false, err.Error()
		}
		return p.Status.CurrentHealthy == 3 && p.Status.DisruptionsAllowed == 1, fmt.Sprintf("budget status %+v", p.Status)
	})
	if desc := c.Must(t, "", "describe", "pdb", "web-pdb"); !strings.Contains(desc, "Min available:  2") || !strings.Contains(desc, "Allowed disruptions:  1") {
		t.Errorf("describe pdb:\n%s", desc)
	}
}
