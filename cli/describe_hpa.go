package cli

import (
	"context"
	"fmt"
	"strings"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// hpaDecisionsShown bounds the decisions describe hpa prints.
const hpaDecisionsShown = 10

// describeHPADecisions is skiff's section after kubectl's describe hpa:
// the controller's last decisions with their inputs, from the
// autoscaler's trace (api/trace_hpa.go). Silent when there are none or
// the trace cannot be read (kubectl's part stays as kubectl prints it).
func describeHPADecisions(ctx context.Context, w *describeWriter, cl client.Interface, h *api.HorizontalPodAutoscaler) {
	t, ok := cl.(client.ObjectTracer)
	if !ok {
		return
	}
	tr, err := t.GetObjectTrace(ctx, api.MustKindOf(h), h.Namespace, h.Name)
	if err != nil || tr == nil {
		return
	}
	if sec := api.DescribeHPADecisions(h.Name, tr.Spans, hpaDecisionsShown); sec != "" {
		w.line(0, "\n")
		for _, l := range strings.Split(strings.TrimRight(sec, "\n"), "\n") {
			w.line(0, "%s\n", l)
		}
	}
}

// describeHPA is kubectl's describeHorizontalPodAutoscalerV2: each
// metric's "current / target", the bounds, the behavior, the target's
// replicas and the conditions (the events follow).
func describeHPA(w *describeWriter, h *api.HorizontalPodAutoscaler) {
	w.objectHeader(&h.ObjectMeta, true)
	w.line(0, "CreationTimestamp:\t%s\n", describeTime(h.CreationTimestamp.Time))
	w.line(0, "Reference:\t%s/%s\n", h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name)
	w.line(0, "Metrics:\t( current / target )\n")
	for i, m := range h.Spec.Metrics {
		var st *api.MetricStatus
		if i < len(h.Status.CurrentMetrics) {
			st = &h.Status.CurrentMetrics[i]
		}
		describeHPAMetric(w, m, st)
	}
	minReplicas := "<unset>"
	if h.Spec.MinReplicas != nil {
		minReplicas = fmt.Sprint(*h.Spec.MinReplicas)
	}
	w.line(0, "Min replicas:\t%s\n", minReplicas)
	w.line(0, "Max replicas:\t%d\n", h.Spec.MaxReplicas)
	if b := h.Spec.Behavior; b != nil {
		w.line(0, "Behavior:\n")
		describeScalingRules(w, "Scale Up", b.ScaleUp)
		describeScalingRules(w, "Scale Down", b.ScaleDown)
	}
	w.line(0, "%s pods:\t%d current / %d desired\n", h.Spec.ScaleTargetRef.Kind, h.Status.CurrentReplicas, h.Status.DesiredReplicas)
	if len(h.Status.Conditions) > 0 {
		w.line(0, "Conditions:\n")
		w.line(1, "Type\tStatus\tReason\tMessage\n")
		w.line(1, "----\t------\t------\t-------\n")
		for _, c := range h.Status.Conditions {
			w.line(1, "%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
}

func qstr(q *api.Quantity) string {
	if q == nil {
		return "<nil>"
	}
	return q.String()
}

// describeHPAMetric is one metric line of kubectl's describe.
func describeHPAMetric(w *describeWriter, m api.MetricSpec, st *api.MetricStatus) {
	current := "<unknown>"
	switch {
	case m.Type == api.ExternalMetricSourceType && m.External != nil:
		if m.External.Target.AverageValue != nil {
			if st != nil && st.External != nil && st.External.Current.AverageValue != nil {
				current = st.External.Current.AverageValue.String()
			}
			w.line(1, "%q (target average value):\t%s / %s\n", m.External.Metric.Name, current, m.External.Target.AverageValue.String())
			return
		}
		if st != nil && st.External != nil {
			current = qstr(st.External.Current.Value)
		}
		w.line(1, "%q (target value):\t%s / %s\n", m.External.Metric.Name, current, qstr(m.External.Target.Value))
	case m.Type == api.PodsMetricSourceType && m.Pods != nil:
		if st != nil && st.Pods != nil {
			current = qstr(st.Pods.Current.AverageValue)
		}
		w.line(1, "%q on pods:\t%s / %s\n", m.Pods.Metric.Name, current, qstr(m.Pods.Target.AverageValue))
	case m.Type == api.ObjectMetricSourceType && m.Object != nil:
		w.line(1, "%q on %s/%s ", m.Object.Metric.Name, m.Object.DescribedObject.Kind, m.Object.DescribedObject.Name)
		if m.Object.Target.Type == api.AverageValueMetricType {
			if st != nil && st.Object != nil {
				current = qstr(st.Object.Current.AverageValue)
			}
			w.line(0, "(target average value):\t%s / %s\n", current, qstr(m.Object.Target.AverageValue))
			return
		}
		if st != nil && st.Object != nil {
			current = qstr(st.Object.Current.Value)
		}
		w.line(0, "(target value):\t%s / %s\n", current, qstr(m.Object.Target.Value))
	case m.Type == api.ResourceMetricSourceType && m.Resource != nil:
		w.line(1, "resource %s on pods", m.Resource.Name)
		var cur *api.MetricValueStatus
		if st != nil && st.Resource != nil {
			cur = &st.Resource.Current
		}
		describeResourceTarget(w, m.Resource.Target, cur)
	case m.Type == api.ContainerResourceMetricSourceType && m.ContainerResource != nil:
		w.line(1, "resource %s of container \"%s\" on pods", m.ContainerResource.Name, m.ContainerResource.Container)
		var cur *api.MetricValueStatus
		if st != nil && st.ContainerResource != nil {
			cur = &st.ContainerResource.Current
		}
		describeResourceTarget(w, m.ContainerResource.Target, cur)
	default:
		w.line(1, "<unknown metric type %q>\n", m.Type)
	}
}

func describeResourceTarget(w *describeWriter, t api.MetricTarget, cur *api.MetricValueStatus) {
	current := "<unknown>"
	if t.AverageValue != nil {
		if cur != nil {
			current = qstr(cur.AverageValue)
		}
		w.line(0, ":\t%s / %s\n", current, t.AverageValue.String())
		return
	}
	if cur != nil && cur.AverageUtilization != nil {
		current = fmt.Sprintf("%d%% (%s)", *cur.AverageUtilization, qstr(cur.AverageValue))
	}
	target := "<auto>"
	if t.AverageUtilization != nil {
		target = fmt.Sprintf("%d%%", *t.AverageUtilization)
	}
	w.line(1, "(as a percentage of request):\t%s / %s\n", current, target)
}

// describeScalingRules is kubectl's printDirectionBehavior.
func describeScalingRules(w *describeWriter, direction string, r *api.HPAScalingRules) {
	if r == nil {
		return
	}
	w.line(1, "%s:\n", direction)
	if r.StabilizationWindowSeconds != nil {
		w.line(2, "Stabilization Window: %d seconds\n", *r.StabilizationWindowSeconds)
	}
	if len(r.Policies) > 0 {
		sel := api.MaxChangePolicySelect
		if r.SelectPolicy != nil {
			sel = *r.SelectPolicy
		}
		w.line(2, "Select Policy: %s\n", sel)
		w.line(2, "Policies:\n")
		for _, p := range r.Policies {
			w.line(3, "- Type: %s\tValue: %d\tPeriod: %d seconds\n", p.Type, p.Value, p.PeriodSeconds)
		}
	}
}
