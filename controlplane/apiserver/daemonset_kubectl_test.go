package apiserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/controllers"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
)

// fluentdDaemonSet is the Kubernetes docs' DaemonSet, in namespace default.
const fluentdDaemonSet = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: fluentd-elasticsearch
  labels:
    k8s-app: fluentd-logging
spec:
  selector:
    matchLabels:
      name: fluentd-elasticsearch
  template:
    metadata:
      labels:
        name: fluentd-elasticsearch
    spec:
      tolerations:
      - key: node-role.kubernetes.io/control-plane
        operator: Exists
        effect: NoSchedule
      containers:
      - name: fluentd-elasticsearch
        image: quay.io/fluentd_elasticsearch/fluentd:v5.0.1
        resources:
          limits:
            memory: 200Mi
          requests:
            cpu: 100m
            memory: 200Mi
      terminationGracePeriodSeconds: 30
`

// The real kubectl with apps/v1 DaemonSets and the real daemonset
// controller on two nodes: apply, get ds with kubectl's columns, the pods
// the controller makes (the test plays the scheduler and the nodes),
// rollout status, set image, rollout history from the ControllerRevisions,
// rollout undo (kubectl's strategic merge patch of the revision's data),
// get controllerrevisions.
func TestKubectlDaemonSet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, n := range []string{"n1", "n2"} {
		node := &api.Node{ObjectMeta: api.ObjectMeta{Name: n}}
		node.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue}}
		if _, err := e.local.Create(t.Context(), node); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- controllers.Run(ctx, e.local, e.local, controllers.Options{}) }()
	t.Cleanup(func() { cancel(); <-done })
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	file := filepath.Join(t.TempDir(), "ds.yaml")
	if err := os.WriteFile(file, []byte(fluentdDaemonSet), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := c.Must(t, "", "apply", "-f", file); strings.TrimSpace(out) != "daemonset.apps/fluentd-elasticsearch created" {
		t.Fatalf("apply: %q", out)
	}
	runPods := func(image string) {
		t.Helper()
		testwait.For(t, 10*time.Second, "a pod of "+image+" on each node", func() bool {
			pods, _, err := client.List[*api.Pod](t.Context(), e.local, "default", api.ListOptions{LabelSelector: "name=fluentd-elasticsearch"})
			if err != nil {
				return false
			}
			ok := 0
			for _, p := range pods {
				if p.DeletionTimestamp != nil {
					// The node stops it.
					_ = e.local.Delete(t.Context(), podKind, "default", p.Name, api.DeleteOptions{GracePeriodSeconds: new(int64)})
					continue
				}
				if p.Spec.Containers[0].Image != image {
					continue
				}
				if p.Spec.NodeName == "" {
					if err := e.local.Bind(t.Context(), &api.Binding{ObjectMeta: api.ObjectMeta{Name: p.Name, Namespace: "default"}, Target: api.ObjectReference{Kind: "Node", Name: api.PodTargetNode(p)}}); err != nil {
						return false
					}
					continue
				}
				if p.Status.Phase != api.PodRunning {
					p.Status.Phase = api.PodRunning
					p.Status.Conditions = []api.PodCondition{{Type: api.PodReady, Status: api.ConditionTrue, LastTransitionTime: api.Now()}}
					_, _ = e.local.UpdateStatus(t.Context(), p)
					continue
				}
				ok++
			}
			return ok == 2
		})
	}
	runPods("quay.io/fluentd_elasticsearch/fluentd:v5.0.1")
	if out := c.Must(t, "", "rollout", "status", "ds/fluentd-elasticsearch", "--timeout=20s"); !strings.Contains(out, `daemon set "fluentd-elasticsearch" successfully rolled out`) {
		t.Errorf("rollout status: %q", out)
	}
	out := c.Must(t, "", "get", "ds")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if h := strings.Join(strings.Fields(lines[0]), " "); h != "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE" {
		t.Errorf("get ds header %q", h)
	}
	if r := strings.Fields(lines[1]); len(r) != 8 || strings.Join(r[:7], " ") != "fluentd-elasticsearch 2 2 2 2 2 <none>" {
		t.Errorf("get ds row %q", r)
	}

	// A new image is a new revision, rolled out one node at a time.
	c.Must(t, "", "set", "image", "ds/fluentd-elasticsearch", "fluentd-elasticsearch=quay.io/fluentd_elasticsearch/fluentd:v5.0.2")
	runPods("quay.io/fluentd_elasticsearch/fluentd:v5.0.2")
	hist := c.Must(t, "", "rollout", "history", "ds/fluentd-elasticsearch")
	if !strings.Contains(hist, "daemonset.apps/fluentd-elasticsearch") || !strings.Contains(hist, "REVISION  CHANGE-CAUSE") ||
		!strings.Contains(hist, "1         <none>") || !strings.Contains(hist, "2         <none>") {
		t.Errorf("rollout history:\n%s", hist)
	}
	revs := c.Must(t, "", "get", "controllerrevisions")
	if !strings.Contains(revs, "CONTROLLER") || strings.Count(revs, "daemonset.apps/fluentd-elasticsearch") != 2 {
		t.Errorf("get controllerrevisions:\n%s", revs)
	}
	if out := c.Must(t, "", "rollout", "undo", "ds/fluentd-elasticsearch"); strings.TrimSpace(out) != "daemonset.apps/fluentd-elasticsearch rolled back" {
		t.Errorf("rollout undo: %q", out)
	}
	runPods("quay.io/fluentd_elasticsearch/fluentd:v5.0.1")
	ds, err := client.Get[*api.DaemonSet](t.Context(), e.local, "default", "fluentd-elasticsearch")
	if err != nil {
		t.Fatal(err)
	}
	if g := ds.Annotations[api.AnnotationDeprecatedTemplateGeneration]; g != "3" {
		t.Errorf("template generation %q after two template changes, want 3", g)
	}
	hist = c.Must(t, "", "rollout", "history", "ds/fluentd-elasticsearch")
	if !strings.Contains(hist, "2         <none>") || !strings.Contains(hist, "3         <none>") || strings.Contains(hist, "1         <none>") {
		t.Errorf("rollout history after undo (revision 1 renumbered to 3):\n%s", hist)
	}
	if out := c.Must(t, "", "delete", "ds", "fluentd-elasticsearch"); !strings.Contains(out, `daemonset.apps "fluentd-elasticsearch" deleted`) {
		t.Errorf("delete: %q", out)
	}
}
