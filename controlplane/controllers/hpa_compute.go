package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
)

// metricResult is one metric's proposal.
type metricResult struct {
	replicas int32
	name     string // "pods metric DCGM_FI_DEV_GPU_UTIL"
	status   api.MetricStatus
	trace    calcTrace
	// sample is what the dashboard plots (api.HPAMetricSample): the
	// target and current value in the target's unit.
	sample api.HPAMetricSample
}

// metricFailure is why a metric gave no proposal: the ScalingActive
// condition's reason and the error.
type metricFailure struct {
	reason string
	err    error
}

// computeReplicasForMetrics is Kubernetes' computeReplicasForMetrics: the
// largest proposal; -1 and the first failure when every metric failed, or
// some did and the rest would scale down.
func (r *HPAController) computeReplicasForMetrics(ctx context.Context, s *hpaSync) (int32, string, []api.MetricStatus, error) {
	h := s.hpa
	selector, err := r.podSelector(ctx, s)
	if err != nil {
		return -1, "", nil, err
	}
	pods := listAs[*api.Pod](r.pods.ListBy(selector, h.Namespace))
	specs := h.Spec.Metrics
	statuses := make([]api.MetricStatus, len(specs))
	var replicas int32
	var metric string
	invalid := 0
	var first metricFailure
	for i, m := range specs {
		res, fail := r.computeMetric(ctx, s, m, selector, pods)
		if fail != nil {
			if invalid == 0 {
				first = *fail
			}
			invalid++
			s.trace = append(s.trace, fmt.Sprintf("metric %d: %v", i, fail.err))
			continue
		}
		statuses[i] = res.status
		s.trace = append(s.trace, fmt.Sprintf("%s: %s", res.name, res.trace))
		res.sample.Metric, res.sample.Pods, res.sample.Proposal = res.name, res.trace.Shown, res.replicas
		s.samples = append(s.samples, res.sample)
		if replicas == 0 || res.replicas > replicas {
			replicas, metric = res.replicas, res.name
		}
	}
	var invalidErr error
	if first.err != nil {
		invalidErr = fmt.Errorf("invalid metrics (%v invalid out of %v), first error is: %v", invalid, len(specs), first.err)
	}
	if invalid >= len(specs) || (invalid > 0 && replicas < s.scale.Spec.Replicas) {
		s.set(api.ScalingActive, api.ConditionFalse, first.reason, "the HPA was unable to compute the replica count: "+first.err.Error())
		return -1, "", statuses, invalidErr
	}
	s.set(api.ScalingActive, api.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from "+metric)
	return replicas, metric, statuses, invalidErr
}

// podSelector is validateAndParseSelector: the scale's selector.
func (r *HPAController) podSelector(ctx context.Context, s *hpaSync) (labels.Selector, error) {
	sel := s.scale.Status.Selector
	if sel == "" {
		r.events.Eventf(ctx, s.hpa, api.EventWarning, "SelectorRequired", "selector is required")
		s.set(api.ScalingActive, api.ConditionFalse, "InvalidSelector", "the HPA target's scale is missing a selector")
		return nil, errors.New("selector is required")
	}
	parsed, err := labels.Parse(sel)
	if err != nil {
		msg := fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", err)
		r.events.Eventf(ctx, s.hpa, api.EventWarning, "InvalidSelector", "%s", msg)
		s.set(api.ScalingActive, api.ConditionFalse, "InvalidSelector", msg)
		return nil, errors.New(msg)
	}
	return parsed, nil
}

// computeMetric is computeReplicasForMetric: one metric's proposal, or the
// failure (with its Warning event, as getUnableComputeReplicaCountCondition).
func (r *HPAController) computeMetric(ctx context.Context, s *hpaSync, m api.MetricSpec, selector labels.Selector, pods []*api.Pod) (*metricResult, *metricFailure) {
	var res *metricResult
	var reason string
	var err error
	switch {
	case m.Type == api.ResourceMetricSourceType && m.Resource != nil:
		reason = "FailedGetResourceMetric"
		res, err = r.resourceMetric(ctx, s, m.Resource.Name, "", m.Resource.Target, selector, pods)
		if res != nil {
			res.status = api.MetricStatus{Type: m.Type, Resource: &api.ResourceMetricStatus{Name: m.Resource.Name, Current: res.status.Resource.Current}}
		}
	case m.Type == api.ContainerResourceMetricSourceType && m.ContainerResource != nil:
		reason = "FailedGetContainerResourceMetric"
		c := m.ContainerResource
		res, err = r.resourceMetric(ctx, s, c.Name, c.Container, c.Target, selector, pods)
		if res != nil {
			res.status = api.MetricStatus{Type: m.Type, ContainerResource: &api.ContainerResourceMetricStatus{Name: c.Name, Container: c.Container, Current: res.status.Resource.Current}}
		}
	case m.Type == api.PodsMetricSourceType && m.Pods != nil:
		reason = "FailedGetPodsMetric"
		res, err = r.podsMetric(ctx, s, m.Pods, selector, pods)
	case m.Type == api.ObjectMetricSourceType && m.Object != nil:
		reason = "FailedGetObjectMetric"
		res, err = r.objectMetric(ctx, s, m.Object, pods)
	case m.Type == api.ExternalMetricSourceType && m.External != nil:
		reason = "FailedGetExternalMetric"
		res, err = r.externalMetric(ctx, s, m.External, pods)
	default:
		reason, err = "InvalidMetricSourceType", fmt.Errorf("unknown metric source type %q", m.Type)
	}
	if err != nil {
		r.events.Eventf(ctx, s.hpa, api.EventWarning, reason, "%s", err)
		return nil, &metricFailure{reason: reason, err: err}
	}
	return res, nil
}

// resourceMetric is computeStatusForResourceMetricGeneric (its status in
// status.Resource; the caller moves it for a container metric).
func (r *HPAController) resourceMetric(ctx context.Context, s *hpaSync, name, container string, t api.MetricTarget, selector labels.Selector, pods []*api.Pod) (*metricResult, error) {
	if r.metrics == nil {
		return nil, errors.New("no metrics source")
	}
	metrics, err := r.metrics.ResourceMetric(ctx, s.hpa.Namespace, selector, name, container)
	kind := "resource"
	if container != "" {
		kind = "container resource"
	}
	current := s.scale.Spec.Replicas
	if t.AverageValue != nil {
		if err != nil {
			return nil, fmt.Errorf("failed to get %s usage: %v", name, err)
		}
		n, avg, tr, err := r.calc.plainReplicas(current, t.AverageValue.MilliValue(), name == "cpu", pods, metrics)
		if err != nil {
			return nil, fmt.Errorf("failed to get %s usage: %v", name, err)
		}
		return &metricResult{replicas: n, name: fmt.Sprintf("%s %s", name, kind), trace: tr,
			sample: api.HPAMetricSample{Target: milliFloat(t.AverageValue.MilliValue()), Current: milliFloat(avg)},
			status: api.MetricStatus{Resource: &api.ResourceMetricStatus{Current: api.MetricValueStatus{AverageValue: milliQuantity(avg)}}}}, nil
	}
	if t.AverageUtilization == nil {
		return nil, errors.New("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set")
	}
	if err != nil {
		return nil, fmt.Errorf("failed to get %s utilization: %v", name, err)
	}
	n, util, raw, tr, err := r.calc.resourceReplicas(current, *t.AverageUtilization, name, container, pods, metrics)
	if err != nil {
		return nil, fmt.Errorf("failed to get %s utilization: %v", name, err)
	}
	return &metricResult{replicas: n, name: fmt.Sprintf("%s %s utilization (percentage of request)", name, kind), trace: tr,
		sample: api.HPAMetricSample{Unit: "%", Target: float64(*t.AverageUtilization), Current: float64(util)},
		status: api.MetricStatus{Resource: &api.ResourceMetricStatus{Current: api.MetricValueStatus{AverageUtilization: &util, AverageValue: milliQuantity(raw)}}}}, nil
}

// podsMetric is computeStatusForPodsMetric.
func (r *HPAController) podsMetric(ctx context.Context, s *hpaSync, p *api.PodsMetricSource, selector labels.Selector, pods []*api.Pod) (*metricResult, error) {
	msel, err := metricSelector(p.Metric.Selector)
	if err != nil {
		return nil, fmt.Errorf("failed to get pods metric value: %v", err)
	}
	if r.metrics == nil {
		return nil, errors.New("failed to get pods metric value: no metrics source")
	}
	metrics, err := r.metrics.PodsMetric(ctx, s.hpa.Namespace, p.Metric.Name, selector, msel)
	if err != nil {
		return nil, fmt.Errorf("failed to get pods metric value: %v", err)
	}
	n, avg, tr, err := r.calc.plainReplicas(s.scale.Spec.Replicas, p.Target.AverageValue.MilliValue(), false, pods, metrics)
	if err != nil {
		return nil, fmt.Errorf("failed to get pods metric value: %v", err)
	}
	return &metricResult{replicas: n, name: "pods metric " + p.Metric.Name, trace: tr,
		sample: api.HPAMetricSample{Target: milliFloat(p.Target.AverageValue.MilliValue()), Current: milliFloat(avg)}, status: api.MetricStatus{Type: api.PodsMetricSourceType,
			Pods: &api.PodsMetricStatus{Metric: p.Metric, Current: api.MetricValueStatus{AverageValue: milliQuantity(avg)}}}}, nil
}

// objectMetric is computeStatusForObjectMetric.
func (r *HPAController) objectMetric(ctx context.Context, s *hpaSync, o *api.ObjectMetricSource, pods []*api.Pod) (*metricResult, error) {
	msel, err := metricSelector(o.Metric.Selector)
	if err == nil && r.metrics == nil {
		err = errors.New("no metrics source")
	}
	var usage int64
	if err == nil {
		usage, err = r.metrics.ObjectMetric(ctx, s.hpa.Namespace, o.Metric.Name, o.DescribedObject, msel)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to get object metric value: %v", err)
	}
	res := &metricResult{name: fmt.Sprintf("%s metric %s", o.DescribedObject.Kind, o.Metric.Name)}
	st := &api.ObjectMetricStatus{Metric: o.Metric, DescribedObject: o.DescribedObject}
	switch {
	case o.Target.Value != nil:
		target := o.Target.Value.MilliValue()
		n, tr, err := r.calc.usageRatioReplicas(s.scale.Spec.Replicas, float64(usage)/float64(target), pods)
		if err != nil {
			return nil, fmt.Errorf("failed to get object metric value: %v", err)
		}
		res.replicas, res.trace, st.Current.Value = n, tr, milliQuantity(usage)
		res.sample = api.HPAMetricSample{Target: milliFloat(target), Current: milliFloat(usage)}
	case o.Target.AverageValue != nil:
		n, avg, tr := r.calc.perPodReplicas(s.scale.Status.Replicas, usage, o.Target.AverageValue.MilliValue())
		res.replicas, res.trace, st.Current.AverageValue = n, tr, milliQuantity(avg)
		res.sample = api.HPAMetricSample{Target: milliFloat(o.Target.AverageValue.MilliValue()), Current: milliFloat(avg)}
	default:
		return nil, errors.New("invalid object metric source: neither a value target nor an average value target was set")
	}
	res.status = api.MetricStatus{Type: api.ObjectMetricSourceType, Object: st}
	return res, nil
}

// externalMetric is computeStatusForExternalMetric.
func (r *HPAController) externalMetric(ctx context.Context, s *hpaSync, e *api.ExternalMetricSource, pods []*api.Pod) (*metricResult, error) {
	msel, err := metricSelector(e.Metric.Selector)
	if err == nil && r.metrics == nil {
		err = errors.New("no metrics source")
	}
	var values []int64
	if err == nil {
		values, err = r.metrics.ExternalMetric(ctx, s.hpa.Namespace, e.Metric.Name, msel)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to get %s external metric: %v", e.Metric.Name, err)
	}
	var usage int64
	for _, v := range values {
		usage = satAdd(usage, v)
	}
	res := &metricResult{name: fmt.Sprintf("external metric %s(%s)", e.Metric.Name, metav1Selector(e.Metric.Selector))}
	st := &api.ExternalMetricStatus{Metric: e.Metric}
	switch {
	case e.Target.AverageValue != nil:
		n, avg, tr := r.calc.perPodReplicas(s.scale.Status.Replicas, usage, e.Target.AverageValue.MilliValue())
		res.replicas, res.trace, st.Current.AverageValue = n, tr, milliQuantity(avg)
		res.sample = api.HPAMetricSample{Target: milliFloat(e.Target.AverageValue.MilliValue()), Current: milliFloat(avg)}
	case e.Target.Value != nil:
		n, tr, err := r.calc.usageRatioReplicas(s.scale.Spec.Replicas, float64(usage)/float64(e.Target.Value.MilliValue()), pods)
		if err != nil {
			return nil, fmt.Errorf("failed to get external metric value: %v", err)
		}
		res.replicas, res.trace, st.Current.Value = n, tr, milliQuantity(usage)
		res.sample = api.HPAMetricSample{Target: milliFloat(e.Target.Value.MilliValue()), Current: milliFloat(usage)}
	default:
		return nil, errors.New("invalid external metric source: neither a value target nor an average value target was set")
	}
	res.status = api.MetricStatus{Type: api.ExternalMetricSourceType, External: st}
	return res, nil
}

// milliFloat is a milli-unit value in units.
func milliFloat(v int64) float64 { return float64(v) / 1000 }

// metav1Selector prints a metric selector as Kubernetes' %+v of a
// *metav1.LabelSelector ("nil", or its generated String()).
func metav1Selector(ls *api.LabelSelector) string {
	if ls == nil {
		return "nil"
	}
	var m metav1.LabelSelector
	data, err := json.Marshal(ls)
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	if err != nil {
		return ls.String()
	}
	return m.String()
}
