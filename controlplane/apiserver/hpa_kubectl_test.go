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

// phpApache is the Kubernetes docs' php-apache Deployment (the HPA
// walkthrough), without its Service.
const phpApache = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: php-apache
spec:
  selector:
    matchLabels:
      run: php-apache
  template:
    metadata:
      labels:
        run: php-apache
    spec:
      containers:
      - name: php-apache
        image: registry.k8s.io/hpa-example
        ports:
        - containerPort: 80
        resources:
          limits:
            cpu: 500m
          requests:
            cpu: 200m
`

// The real kubectl with HorizontalPodAutoscalers and the HPA controller:
// the walkthrough's kubectl autoscale, get hpa with kubectl's columns, the
// autoscaler read at autoscaling/v1 (kubectl get horizontalpodautoscalers.v1.autoscaling), and
// describe hpa with the controller's condition and event when no metrics
// come (no node serves any here: the controller reads metrics.k8s.io
// through the server, as over HTTPS).
func TestKubectlHPA(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- controllers.Run(ctx, e.local, e.local, controllers.Options{HPA: controllers.HPAConfig{SyncPeriod: time.Second},
			HPAMetrics: controllers.APIMetrics{C: e.srv.RawLocal()}})
	}()
	t.Cleanup(func() { cancel(); <-done })
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	file := filepath.Join(t.TempDir(), "php-apache.yaml")
	if err := os.WriteFile(file, []byte(phpApache), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Must(t, "", "apply", "-f", file)
	if out := c.Must(t, "", "autoscale", "deployment", "php-apache", "--cpu-percent=50", "--min=1", "--max=10"); strings.TrimSpace(out) != "horizontalpodautoscaler.autoscaling/php-apache autoscaled" {
		t.Fatalf("autoscale: %q", out)
	}
	h, err := client.Get[*api.HorizontalPodAutoscaler](t.Context(), e.local, "default", "php-apache")
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Spec.Metrics) != 1 || h.Spec.Metrics[0].Resource == nil || *h.Spec.Metrics[0].Resource.Target.AverageUtilization != 50 || h.Spec.ScaleTargetRef.Kind != "Deployment" {
		t.Fatalf("stored autoscaler %+v", h.Spec)
	}
	lines := strings.Split(strings.TrimSpace(c.Must(t, "", "get", "hpa")), "\n")
	if hd := strings.Join(strings.Fields(lines[0]), " "); hd != "NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE" {
		t.Errorf("get hpa header %q", hd)
	}
	if !strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "php-apache Deployment/php-apache cpu: <unknown>/50% 1 10") {
		t.Errorf("get hpa row %q", lines[1])
	}
	if out := c.Must(t, "", "get", "horizontalpodautoscalers.v1.autoscaling", "php-apache", "-o", "jsonpath={.apiVersion} {.spec.targetCPUUtilizationPercentage}"); out != "autoscaling/v1 50" {
		t.Errorf("at v1: %q", out)
	}
	testwait.For(t, 20*time.Second, "the controller's FailedGetResourceMetric condition", func() bool {
		return strings.Contains(c.Must(t, "", "describe", "hpa", "php-apache"), "FailedGetResourceMetric")
	})
	desc := c.Must(t, "", "describe", "hpa", "php-apache")
	for _, want := range []string{"Reference:", "Deployment/php-apache", "resource cpu on pods  (as a percentage of request):  <unknown> / 50%",
		"Min replicas:", "Max replicas:", "AbleToScale", "SucceededGetScale", "ScalingActive  False   FailedGetResourceMetric",
		"the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu",
		"horizontal-pod-autoscaler"} {
		if !strings.Contains(desc, want) {
			t.Errorf("describe hpa lacks %q:\n%s", want, desc)
		}
	}
}
