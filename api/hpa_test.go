package api

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestHPADefaults(t *testing.T) {
	o, _, err := DecodeAny([]byte(`apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: default}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 5
  behavior:
    scaleDown:
      policies: [{type: Pods, value: 1, periodSeconds: 60}]
`))
	if err != nil {
		t.Fatal(err)
	}
	h := o.(*HorizontalPodAutoscaler)
	SetDefaults(h)
	s := h.Spec
	if *s.MinReplicas != 1 {
		t.Errorf("minReplicas %d, want 1", *s.MinReplicas)
	}
	if len(s.Metrics) != 1 || s.Metrics[0].Resource == nil || s.Metrics[0].Resource.Name != "cpu" || *s.Metrics[0].Resource.Target.AverageUtilization != 80 {
		t.Errorf("metrics %+v, want cpu at 80%%", s.Metrics)
	}
	up, down := s.Behavior.ScaleUp, s.Behavior.ScaleDown
	if *up.StabilizationWindowSeconds != 0 || *up.SelectPolicy != "Max" || len(up.Policies) != 2 || up.Policies[0] != (HPAScalingPolicy{Type: "Pods", Value: 4, PeriodSeconds: 15}) ||
		up.Policies[1] != (HPAScalingPolicy{Type: "Percent", Value: 100, PeriodSeconds: 15}) {
		t.Errorf("scaleUp %+v, want Kubernetes' default rules", up)
	}
	if down.StabilizationWindowSeconds != nil || *down.SelectPolicy != "Max" || len(down.Policies) != 1 || down.Policies[0].PeriodSeconds != 60 {
		t.Errorf("scaleDown %+v: its own policy kept, Max, no window (the controller's flag)", down)
	}
	if errs := Validate(h); len(errs) > 0 {
		t.Errorf("valid autoscaler refused: %v", errs)
	}
}

// TestHPAv1Conversion: a v1 object is stored as v2 (targetCPUUtilization
// Percentage is a cpu Utilization metric); v2 read at v1 carries what v1
// cannot say in annotations, and converting back restores it.
func TestHPAv1Conversion(t *testing.T) {
	k := MustKindOf(&HorizontalPodAutoscaler{})
	sv, ok := k.ServedAt("v1")
	if !ok || sv == nil {
		t.Fatal("autoscaling/v1 not served")
	}
	v1 := `{"apiVersion":"autoscaling/v1","kind":"HorizontalPodAutoscaler","metadata":{"name":"a"},"spec":{"scaleTargetRef":{"kind":"Deployment","name":"a"},"maxReplicas":3,"targetCPUUtilizationPercentage":50},"status":{"currentReplicas":1,"desiredReplicas":1,"currentCPUUtilizationPercentage":20}}`
	stored, err := k.ConvertToStored(sv, []byte(v1))
	if err != nil {
		t.Fatal(err)
	}
	var h HorizontalPodAutoscaler
	if err := json.Unmarshal(stored, &h); err != nil {
		t.Fatal(err)
	}
	if h.APIVersion != "autoscaling/v2" || len(h.Spec.Metrics) != 1 || *h.Spec.Metrics[0].Resource.Target.AverageUtilization != 50 ||
		*h.Status.CurrentMetrics[0].Resource.Current.AverageUtilization != 20 {
		t.Fatalf("stored %s", stored)
	}

	v2 := `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"g"},"spec":{"scaleTargetRef":{"kind":"Deployment","name":"g"},"maxReplicas":3,
"metrics":[{"type":"Pods","pods":{"metric":{"name":"DCGM_FI_DEV_GPU_UTIL"},"target":{"type":"AverageValue","averageValue":"70"}}},{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":60}}}],
"behavior":{"scaleDown":{"stabilizationWindowSeconds":30}}},"status":{"desiredReplicas":2,"conditions":[{"type":"AbleToScale","status":"True","reason":"ReadyForNewScale"}]}}`
	out, err := k.ConvertFromStored(sv, []byte(v2))
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{`"apiVersion":"autoscaling/v1"`, `"targetCPUUtilizationPercentage":60`, `"autoscaling.alpha.kubernetes.io/metrics":`, `DCGM_FI_DEV_GPU_UTIL`,
		`"autoscaling.alpha.kubernetes.io/behavior":`, `"autoscaling.alpha.kubernetes.io/conditions":`} {
		if !strings.Contains(s, want) {
			t.Errorf("v1 form lacks %s:\n%s", want, s)
		}
	}
	if strings.Contains(s, `"metrics":[`) || strings.Contains(s, `"behavior":{`) {
		t.Errorf("v1 form has v2 fields:\n%s", s)
	}
	back, err := k.ConvertToStored(sv, out)
	if err != nil {
		t.Fatal(err)
	}
	var h2 HorizontalPodAutoscaler
	if err := json.Unmarshal(back, &h2); err != nil {
		t.Fatal(err)
	}
	if len(h2.Spec.Metrics) != 2 || h2.Spec.Behavior == nil || *h2.Spec.Behavior.ScaleDown.StabilizationWindowSeconds != 30 ||
		len(h2.Status.Conditions) != 1 || len(h2.Annotations) != 0 {
		t.Errorf("round trip lost something: %s", back)
	}
}

// TestHPAValidationScaleToZero: with the HPAScaleToZero feature gate off
// (Kubernetes' default) minReplicas 0 is refused in Kubernetes' words, and
// the other bounds too; the whole message is kube-apiserver's.
func TestHPAValidationScaleToZero(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"minReplicas: 0\n  maxReplicas: 5", `HorizontalPodAutoscaler.autoscaling "web" is invalid: spec.minReplicas: Invalid value: 0: must be greater than or equal to 1`},
		{"minReplicas: 1\n  maxReplicas: 0", "spec.maxReplicas: Invalid value: 0: must be greater than 0"},
		{"minReplicas: 3\n  maxReplicas: 2", "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"},
	} {
		o, _, err := DecodeAny([]byte(`apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: default}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  ` + tc.spec + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		SetDefaults(o)
		errs := Validate(o)
		if len(errs) == 0 {
			t.Errorf("%s: accepted", tc.spec)
			continue
		}
		if got := NewInvalid(MustKindOf(o), "web", errs).Error(); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.spec, got, tc.want)
		}
	}
}
