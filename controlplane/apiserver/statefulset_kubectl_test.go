package apiserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/controllers"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
)

// webStatefulSet is the docs' StatefulSet Basics tutorial's web.yaml.
const webStatefulSet = `apiVersion: v1
kind: Service
metadata:
  name: nginx
  labels:
    app: nginx
spec:
  ports:
  - port: 80
    name: web
  clusterIP: None
  selector:
    app: nginx
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  serviceName: "nginx"
  replicas: 2
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - name: nginx
        image: registry.k8s.io/nginx-slim:0.21
        ports:
        - containerPort: 80
          name: web
        volumeMounts:
        - name: www
          mountPath: /usr/share/nginx/html
  volumeClaimTemplates:
  - metadata:
      name: www
    spec:
      accessModes: [ "ReadWriteOnce" ]
      resources:
        requests:
          storage: 1Gi
`

// fakeNodes plays the scheduler and the kubelets of the given nodes until
// the test ends: an unbound pod goes to the first node that is not
// cordoned, a bound one becomes Running and Ready, a deleting one goes.
func fakeNodes(t *testing.T, c client.Interface, nodes ...string) {
	t.Helper()
	for _, n := range nodes {
		node := &api.Node{ObjectMeta: api.ObjectMeta{Name: n}}
		node.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue}}
		if _, err := c.Create(t.Context(), node); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			pods, _, err := client.List[*api.Pod](ctx, c, "", api.ListOptions{})
			if err != nil {
				continue
			}
			for _, p := range pods {
				playNode(ctx, c, p, nodes)
			}
		}
	})
}

func playNode(ctx context.Context, c client.Interface, p *api.Pod, nodes []string) {
	switch {
	case p.DeletionTimestamp != nil:
		_ = c.Delete(ctx, podKind, p.Namespace, p.Name, api.DeleteOptions{GracePeriodSeconds: new(int64)})
	case p.Spec.NodeName == "":
		for _, n := range nodes {
			node, err := client.Get[*api.Node](ctx, c, "", n)
			if err != nil || node.Spec.Unschedulable {
				continue
			}
			if want := api.PodTargetNode(p); want != "" && want != n {
				continue
			}
			_ = c.Bind(ctx, &api.Binding{ObjectMeta: api.ObjectMeta{Name: p.Name, Namespace: p.Namespace}, Target: api.ObjectReference{Kind: "Node", Name: n}})
			return
		}
	case p.Status.Phase == api.PodPending:
		p.Status.Phase = api.PodRunning
		p.Status.Conditions = []api.PodCondition{{Type: api.PodReady, Status: api.ConditionTrue, LastTransitionTime: api.Now()}}
		_, _ = c.UpdateStatus(ctx, p)
	}
}

// The real kubectl with the tutorial's web StatefulSet and the
// statefulset controller: web-0 before web-1, a claim each, get sts
// columns, rollout status, scale, rollout history, get pvc.
func TestKubectlStatefulSet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- controllers.Run(ctx, e.local, e.local, controllers.Options{}) }()
	t.Cleanup(func() { cancel(); <-done })
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	file := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(file, []byte(webStatefulSet), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := c.Must(t, "", "apply", "-f", file); !strings.Contains(out, "service/nginx created") || !strings.Contains(out, "statefulset.apps/web created") {
		t.Fatalf("apply: %q", out)
	}
	// web-0 alone until it is Ready.
	testwait.For(t, 10*time.Second, "web-0", func() bool {
		_, err := client.Get[*api.Pod](t.Context(), e.local, "default", "web-0")
		return err == nil
	})
	if _, err := client.Get[*api.Pod](t.Context(), e.local, "default", "web-1"); !api.IsNotFound(err) {
		t.Fatalf("web-1 exists before web-0 is Ready: %v", err)
	}
	fakeNodes(t, e.local, "n1")
	if out := c.Must(t, "", "rollout", "status", "sts/web", "--timeout=30s"); !strings.Contains(out, "partitioned roll out complete: 2 new pods have been updated...") {
		t.Errorf("rollout status: %q", out)
	}
	w0, err := client.Get[*api.Pod](t.Context(), e.local, "default", "web-0")
	if err != nil {
		t.Fatal(err)
	}
	w1, err := client.Get[*api.Pod](t.Context(), e.local, "default", "web-1")
	if err != nil {
		t.Fatal(err)
	}
	if !w0.CreationTimestamp.Before(w1.CreationTimestamp.Time) && !w0.CreationTimestamp.Equal(w1.CreationTimestamp.Time) {
		t.Errorf("web-0 created at %v, after web-1 (%v)", w0.CreationTimestamp, w1.CreationTimestamp)
	}
	if w0.Spec.Hostname != "web-0" || w0.Spec.Subdomain != "nginx" {
		t.Errorf("web-0 hostname %q subdomain %q", w0.Spec.Hostname, w0.Spec.Subdomain)
	}
	lines := strings.Split(strings.TrimSpace(c.Must(t, "", "get", "sts")), "\n")
	if h := strings.Join(strings.Fields(lines[0]), " "); h != "NAME READY AGE" || !strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "web 2/2 ") {
		t.Errorf("get sts:\n%s", strings.Join(lines, "\n"))
	}
	pvcs := c.Must(t, "", "get", "pvc")
	if !strings.Contains(pvcs, "www-web-0") || !strings.Contains(pvcs, "www-web-1") {
		t.Errorf("get pvc:\n%s", pvcs)
	}
	if out := c.Must(t, "", "scale", "sts", "web", "--replicas=3"); strings.TrimSpace(out) != "statefulset.apps/web scaled" {
		t.Errorf("scale: %q", out)
	}
	testwait.For(t, 20*time.Second, "web-2 Ready", func() bool {
		s, err := client.Get[*api.StatefulSet](t.Context(), e.local, "default", "web")
		return err == nil && s.Status.ReadyReplicas == 3
	})
	if hist := c.Must(t, "", "rollout", "history", "sts/web"); !strings.Contains(hist, "statefulset.apps/web") || !strings.Contains(hist, "1         <none>") {
		t.Errorf("rollout history:\n%s", hist)
	}
	if desc := c.Must(t, "", "describe", "sts", "web"); !strings.Contains(desc, "create Claim www-web-2 Pod web-2 in StatefulSet web success") ||
		!strings.Contains(desc, "Volume Claims:") {
		t.Errorf("describe sts:\n%s", desc)
	}
}
