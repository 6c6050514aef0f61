package cli

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// TestAutoscaleGetDescribeHPA: autoscale makes kubectl's autoscaler; get
// prints kubectl's columns and describe its metrics, bounds and
// conditions.
func TestAutoscaleGetDescribeHPA(t *testing.T) {
	fc := newFake(getFixtures()...)
	res := run(t, fc, "", "autoscale", "deployment", "nginx-demo", "--cpu-percent=50", "--min=1", "--max=10", "-n", "gpu-demo")
	wantLines(t, res.out, "horizontalpodautoscaler.autoscaling/nginx-demo autoscaled")
	h, err := client.Get[*api.HorizontalPodAutoscaler](t.Context(), fc, "gpu-demo", "nginx-demo")
	if err != nil {
		t.Fatal(err)
	}
	if r := h.Spec.ScaleTargetRef; r.Kind != "Deployment" || r.APIVersion != "apps/v1" || r.Name != "nginx-demo" || *h.Spec.MinReplicas != 1 || h.Spec.MaxReplicas != 10 ||
		*h.Spec.Metrics[0].Resource.Target.AverageUtilization != 50 {
		t.Fatalf("autoscaler %+v", h.Spec)
	}
	util := int32(12)
	avg := resource.MustParse("30m")
	h.Status = api.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, DesiredReplicas: 2,
		CurrentMetrics: []api.MetricStatus{{Type: "Resource", Resource: &api.ResourceMetricStatus{Name: "cpu", Current: api.MetricValueStatus{AverageUtilization: &util, AverageValue: &avg}}}},
		Conditions:     []api.HorizontalPodAutoscalerCondition{{Type: "AbleToScale", Status: "True", Reason: "ReadyForNewScale", Message: "recommended size matches current size"}}}
	if _, err := fc.UpdateStatus(t.Context(), h); err != nil {
		t.Fatal(err)
	}
	res = run(t, fc, "", "get", "hpa", "-n", "gpu-demo")
	lines := strings.Split(strings.TrimSpace(res.out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "nginx-demo Deployment/nginx-demo cpu: 12%/50% 1 10 2") {
		t.Errorf("get hpa:\n%s", res.out)
	}
	res = run(t, fc, "", "describe", "hpa", "nginx-demo", "-n", "gpu-demo")
	for _, want := range []string{
		"Reference:                                             Deployment/nginx-demo",
		"Metrics:                                               ( current / target )",
		"  resource cpu on pods  (as a percentage of request):  12% (30m) / 50%",
		"Min replicas:                                          1",
		"Deployment pods:                                       2 current / 2 desired",
		"  AbleToScale  True    ReadyForNewScale  recommended size matches current size",
	} {
		if !strings.Contains(res.out, want) {
			t.Errorf("describe lacks %q:\n%s", want, res.out)
		}
	}
	if strings.Contains(res.out, "Decisions") {
		t.Errorf("describe with no decisions recorded has skiff's section:\n%s", res.out)
	}

	// The controller's decisions (api/trace_hpa.go): skiff's section after
	// kubectl's output (Events last), and trace hpa/NAME.
	t1 := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	steps := []string{"current 2 (min 1, max 10)", "pods metric DCGM_FI_DEV_GPU_UTIL: pods a=90 b=90; ratio 1.286 outside tolerance (|1 - 1.286| = 0.286 > 0.1) -> 3",
		"scaled 2 -> 3 (pods metric DCGM_FI_DEV_GPU_UTIL above target)"}
	if err := fc.AddObjectTrace(t.Context(), api.MustKindOf(h), "gpu-demo", "nginx-demo",
		api.NewHPADecisionSpan(t1, t1, 2, 3, steps), api.NewHPADecisionSpan(t1.Add(15*time.Second), t1.Add(15*time.Second), 3, 3, []string{"ScaleDownStabilized: held"})); err != nil {
		t.Fatal(err)
	}
	res = run(t, fc, "", "describe", "hpa", "nginx-demo", "-n", "gpu-demo")
	ev, sec := strings.Index(res.out, "\nEvents:"), strings.Index(res.out, "\nDecisions (skiff: the last 2 syncs, oldest first; `skiff trace hpa/nginx-demo`):\n"+
		"  2026-12-02T05:00:00Z  2 -> 3 replicas\n    current 2 (min 1, max 10)\n    pods metric DCGM_FI_DEV_GPU_UTIL: pods a=90 b=90; ratio 1.286")
	if ev < 0 || sec < ev || !strings.HasSuffix(res.out, "  2026-12-02T05:00:15Z  3 -> 3 replicas\n    ScaleDownStabilized: held\n") {
		t.Errorf("describe: want skiff's decisions after kubectl's Events:\n%s", res.out)
	}
	res = run(t, fc, "", "trace", "hpa/nginx-demo", "-n", "gpu-demo")
	if want := "2026-12-02T05:00:00Z  2 -> 3 replicas\n  " + strings.Join(steps, "\n  ") + "\n\n2026-12-02T05:00:15Z  3 -> 3 replicas\n  ScaleDownStabilized: held\n"; res.code != 0 || res.out != want {
		t.Errorf("trace hpa/nginx-demo: %+v\nwant:\n%s", res, want)
	}
	res = run(t, fc, "", "trace", "hpa", "nginx-demo", "-n", "gpu-demo", "-o", "json")
	if res.code != 0 || !strings.Contains(res.out, `"kind": "HorizontalPodAutoscaler"`) || !strings.Contains(res.out, `"desiredReplicas": 3`) {
		t.Errorf("trace hpa -o json: %+v", res)
	}
	res = run(t, fc, "", "trace", "deploy/nginx-demo", "-n", "gpu-demo")
	if res.code != 1 || !strings.Contains(res.err, "trace takes one pod or autoscaler") {
		t.Errorf("trace deploy: %+v", res)
	}

	res = run(t, fc, "", "autoscale", "deployment", "nginx-demo", "--max=0", "-n", "gpu-demo")
	if res.code != 1 || !strings.Contains(res.err, "--max=MAXPODS is required and must be at least 1, max: 0") {
		t.Errorf("--max=0: %+v", res)
	}
	res = run(t, fc, "", "autoscale", "pod", "web", "--max=3")
	if res.code != 1 || !strings.Contains(res.err, "cannot autoscale a Pod") {
		t.Errorf("pod: %+v", res)
	}
}
