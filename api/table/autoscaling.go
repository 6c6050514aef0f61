package table

import (
	"fmt"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff.dev/skiff/api"
)

// The autoscaling group (autoscaling/v2), as Kubernetes'
// printHorizontalPodAutoscaler.

// hpaPrinter: NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE.
func hpaPrinter() Printer {
	spec, status := autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc(), autoscalingv2.HorizontalPodAutoscalerStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("Reference", spec["scaleTargetRef"]),
			col("Targets", spec["metrics"]),
			col("MinPods", spec["minReplicas"]),
			col("MaxPods", spec["maxReplicas"]),
			col("Replicas", status["currentReplicas"]),
			ageColumn(),
		},
		Cells: func(o api.Object, now time.Time) []any {
			h := o.(*api.HorizontalPodAutoscaler)
			minPods := "<unset>"
			if h.Spec.MinReplicas != nil {
				minPods = fmt.Sprint(*h.Spec.MinReplicas)
			}
			return []any{h.Name, h.Spec.ScaleTargetRef.Kind + "/" + h.Spec.ScaleTargetRef.Name,
				HPAMetrics(h.Spec.Metrics, h.Status.CurrentMetrics), minPods, int64(h.Spec.MaxReplicas),
				int64(h.Status.CurrentReplicas), Age(now, h.CreationTimestamp.Time)}
		},
	}
}

// HPAMetrics is kubectl's formatHPAMetrics: "current/target" per metric
// ("cpu: 12%/50%", "45/70" for a pods metric, "(avg)" for an average of
// an object or external metric), the first two and "+ N more...".
func HPAMetrics(specs []api.MetricSpec, statuses []api.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	var list []string
	status := func(i int) *api.MetricStatus {
		if i < len(statuses) {
			return &statuses[i]
		}
		return nil
	}
	for i, spec := range specs {
		st := status(i)
		list = append(list, hpaMetric(spec, st))
	}
	const maximum = 2
	if len(list) > maximum {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:maximum], ", "), len(list)-maximum)
	}
	return strings.Join(list, ", ")
}

func hpaMetric(spec api.MetricSpec, st *api.MetricStatus) string {
	current := "<unknown>"
	q := func(v *api.Quantity) string {
		if v == nil {
			return "<nil>"
		}
		return v.String()
	}
	switch {
	case spec.Type == api.ExternalMetricSourceType && spec.External != nil:
		return valueOrAverage(spec.External.Target, st != nil && st.External != nil, func() api.MetricValueStatus { return st.External.Current }, q)
	case spec.Type == api.ObjectMetricSourceType && spec.Object != nil:
		return valueOrAverage(spec.Object.Target, st != nil && st.Object != nil, func() api.MetricValueStatus { return st.Object.Current }, q)
	case spec.Type == api.PodsMetricSourceType && spec.Pods != nil:
		if st != nil && st.Pods != nil {
			current = q(st.Pods.Current.AverageValue)
		}
		return fmt.Sprintf("%s/%s", current, q(spec.Pods.Target.AverageValue))
	case spec.Type == api.ResourceMetricSourceType && spec.Resource != nil:
		var cur *api.MetricValueStatus
		if st != nil && st.Resource != nil {
			cur = &st.Resource.Current
		}
		return spec.Resource.Name + ": " + resourceTarget(spec.Resource.Target, cur, q)
	case spec.Type == api.ContainerResourceMetricSourceType && spec.ContainerResource != nil:
		var cur *api.MetricValueStatus
		if st != nil && st.ContainerResource != nil {
			cur = &st.ContainerResource.Current
		}
		return spec.ContainerResource.Name + ": " + resourceTarget(spec.ContainerResource.Target, cur, q)
	}
	return "<unknown type>"
}

func valueOrAverage(t api.MetricTarget, has bool, cur func() api.MetricValueStatus, q func(*api.Quantity) string) string {
	current := "<unknown>"
	if t.AverageValue != nil {
		if has && cur().AverageValue != nil {
			current = cur().AverageValue.String()
		}
		return fmt.Sprintf("%s/%s (avg)", current, t.AverageValue.String())
	}
	if has {
		current = q(cur().Value)
	}
	return fmt.Sprintf("%s/%s", current, q(t.Value))
}

func resourceTarget(t api.MetricTarget, cur *api.MetricValueStatus, q func(*api.Quantity) string) string {
	current := "<unknown>"
	if t.AverageValue != nil {
		if cur != nil {
			current = q(cur.AverageValue)
		}
		return fmt.Sprintf("%s/%s", current, t.AverageValue.String())
	}
	if cur != nil && cur.AverageUtilization != nil {
		current = fmt.Sprintf("%d%%", *cur.AverageUtilization)
	}
	target := "<auto>"
	if t.AverageUtilization != nil {
		target = fmt.Sprintf("%d%%", *t.AverageUtilization)
	}
	return fmt.Sprintf("%s/%s", current, target)
}
