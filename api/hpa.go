package api

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/validate/content"
)

// HorizontalPodAutoscaler (autoscaling/v2, also served as autoscaling/v1)
// scales the workload spec.scaleTargetRef names, through its scale
// subresource, so that the metrics in spec.metrics stay near their
// targets. Its controller (controlplane/controllers/hpa.go) is
// Kubernetes' horizontal.go: desired = ceil(current × metric/target),
// nothing within the 0.1 tolerance, the largest proposal over the
// metrics, then spec.behavior's policies and stabilization windows and
// minReplicas..maxReplicas.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type HorizontalPodAutoscaler struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec is the autoscaler's target, bounds, metrics and behavior.
	Spec HorizontalPodAutoscalerSpec `json:"spec,omitempty"`
	// Status is the observed state, written by the controller.
	Status HorizontalPodAutoscalerStatus `json:"status,omitempty"`
}

// HorizontalPodAutoscalerSpec of an autoscaler.
type HorizontalPodAutoscalerSpec struct {
	// ScaleTargetRef names the workload scaled (a kind with the scale
	// subresource: Deployment, ReplicaSet, StatefulSet).
	ScaleTargetRef CrossVersionObjectReference `json:"scaleTargetRef"`
	// MinReplicas is the lower bound (default 1; 0 is refused: skiff has
	// no HPAScaleToZero gate).
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	// MaxReplicas is the upper bound.
	MaxReplicas int32 `json:"maxReplicas"`
	// Metrics to keep near their targets; default: cpu at 80% utilization.
	Metrics []MetricSpec `json:"metrics,omitempty"`
	// Behavior bounds the rate of scaling up and down; unset: the legacy
	// limit (up to max(2×current, 4)) and the controller's downscale
	// stabilization window.
	Behavior *HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
}

// CrossVersionObjectReference names an object of this namespace.
type CrossVersionObjectReference struct {
	// Kind of the object: "Deployment".
	Kind string `json:"kind"`
	// Name of the object.
	Name string `json:"name"`
	// APIVersion of the object: "apps/v1".
	APIVersion string `json:"apiVersion,omitempty"`
}

// MetricSpec is one metric and its target; Type says which source is set.
type MetricSpec struct {
	// Type: Object, Pods, Resource, ContainerResource or External.
	Type string `json:"type"`
	// Object: a metric describing one object (an Ingress's requests).
	Object *ObjectMetricSource `json:"object,omitempty"`
	// Pods: a metric of each pod, averaged (custom.metrics.k8s.io).
	Pods *PodsMetricSource `json:"pods,omitempty"`
	// Resource: cpu or memory of each pod (metrics.k8s.io).
	Resource *ResourceMetricSource `json:"resource,omitempty"`
	// ContainerResource: cpu or memory of one container of each pod.
	ContainerResource *ContainerResourceMetricSource `json:"containerResource,omitempty"`
	// External: a metric of nothing in the cluster (external.metrics.k8s.io).
	External *ExternalMetricSource `json:"external,omitempty"`
}

// ObjectMetricSource is a metric of one object.
type ObjectMetricSource struct {
	// DescribedObject is the object the metric describes.
	DescribedObject CrossVersionObjectReference `json:"describedObject"`
	// Target: Value or AverageValue.
	Target MetricTarget `json:"target"`
	// Metric names the metric.
	Metric MetricIdentifier `json:"metric"`
}

// PodsMetricSource is a metric of each pod of the target, averaged.
type PodsMetricSource struct {
	// Metric names the metric.
	Metric MetricIdentifier `json:"metric"`
	// Target: AverageValue.
	Target MetricTarget `json:"target"`
}

// ResourceMetricSource is a resource (cpu, memory) of each pod.
type ResourceMetricSource struct {
	// Name of the resource.
	Name string `json:"name"`
	// Target: Utilization (percent of the requests) or AverageValue.
	Target MetricTarget `json:"target"`
}

// ContainerResourceMetricSource is a resource of one container of each pod.
type ContainerResourceMetricSource struct {
	// Name of the resource.
	Name string `json:"name"`
	// Target: Utilization or AverageValue.
	Target MetricTarget `json:"target"`
	// Container whose usage counts.
	Container string `json:"container"`
}

// ExternalMetricSource is a metric not tied to any object of the cluster.
type ExternalMetricSource struct {
	// Metric names the metric.
	Metric MetricIdentifier `json:"metric"`
	// Target: Value or AverageValue.
	Target MetricTarget `json:"target"`
}

// MetricIdentifier names a metric and the series of it that count.
type MetricIdentifier struct {
	// Name of the metric.
	Name string `json:"name"`
	// Selector of the series (labels); unset: all.
	Selector *LabelSelector `json:"selector,omitempty"`
}

// MetricTarget is a target value of a metric.
type MetricTarget struct {
	// Type: Utilization, Value or AverageValue.
	Type string `json:"type"`
	// Value of the metric as a whole.
	Value *Quantity `json:"value,omitempty"`
	// AverageValue: the metric divided by the number of pods.
	AverageValue *Quantity `json:"averageValue,omitempty"`
	// AverageUtilization: the mean of the pods' usage in percent of their
	// requests.
	AverageUtilization *int32 `json:"averageUtilization,omitempty"`
}

// HorizontalPodAutoscalerBehavior bounds scaling in each direction.
type HorizontalPodAutoscalerBehavior struct {
	// ScaleUp rules (default: no window, max(100%, 4 pods) per 15 s).
	ScaleUp *HPAScalingRules `json:"scaleUp,omitempty"`
	// ScaleDown rules (default: the controller's window, 100% per 15 s).
	ScaleDown *HPAScalingRules `json:"scaleDown,omitempty"`
}

// HPAScalingRules are one direction's rules.
type HPAScalingRules struct {
	// StabilizationWindowSeconds: the recommendations of this window are
	// considered (scale down to their highest, up to their lowest).
	StabilizationWindowSeconds *int32 `json:"stabilizationWindowSeconds,omitempty"`
	// SelectPolicy: Max (default), Min or Disabled.
	SelectPolicy *string `json:"selectPolicy,omitempty"`
	// Policies: how much may change per period.
	Policies []HPAScalingPolicy `json:"policies,omitempty"`
}

// HPAScalingPolicy allows a change of Value pods or percent per period.
type HPAScalingPolicy struct {
	// Type: Pods or Percent.
	Type string `json:"type"`
	// Value: pods or percent.
	Value int32 `json:"value"`
	// PeriodSeconds the change is counted over (1..1800).
	PeriodSeconds int32 `json:"periodSeconds"`
}

// HorizontalPodAutoscalerStatus is what the controller observed.
type HorizontalPodAutoscalerStatus struct {
	// ObservedGeneration of the spec the status is for.
	ObservedGeneration *int64 `json:"observedGeneration,omitempty"`
	// LastScaleTime is when the controller last changed the scale.
	LastScaleTime *Time `json:"lastScaleTime,omitempty"`
	// CurrentReplicas of the target when last read.
	CurrentReplicas int32 `json:"currentReplicas,omitempty"`
	// DesiredReplicas the controller last computed.
	DesiredReplicas int32 `json:"desiredReplicas"`
	// CurrentMetrics: the last values read, one per spec metric.
	CurrentMetrics []MetricStatus `json:"currentMetrics,omitempty"`
	// Conditions: AbleToScale, ScalingActive, ScalingLimited.
	Conditions []HorizontalPodAutoscalerCondition `json:"conditions,omitempty"`
}

// MetricStatus is the last value of one metric.
type MetricStatus struct {
	// Type of the source, as in the spec.
	Type string `json:"type"`
	// Object metric's value.
	Object *ObjectMetricStatus `json:"object,omitempty"`
	// Pods metric's value.
	Pods *PodsMetricStatus `json:"pods,omitempty"`
	// Resource metric's value.
	Resource *ResourceMetricStatus `json:"resource,omitempty"`
	// ContainerResource metric's value.
	ContainerResource *ContainerResourceMetricStatus `json:"containerResource,omitempty"`
	// External metric's value.
	External *ExternalMetricStatus `json:"external,omitempty"`
}

// ObjectMetricStatus is an object metric's value.
type ObjectMetricStatus struct {
	Metric          MetricIdentifier            `json:"metric"`
	Current         MetricValueStatus           `json:"current"`
	DescribedObject CrossVersionObjectReference `json:"describedObject"`
}

// PodsMetricStatus is a pods metric's value.
type PodsMetricStatus struct {
	Metric  MetricIdentifier  `json:"metric"`
	Current MetricValueStatus `json:"current"`
}

// ResourceMetricStatus is a resource metric's value.
type ResourceMetricStatus struct {
	Name    string            `json:"name"`
	Current MetricValueStatus `json:"current"`
}

// ContainerResourceMetricStatus is a container resource metric's value.
type ContainerResourceMetricStatus struct {
	Name      string            `json:"name"`
	Current   MetricValueStatus `json:"current"`
	Container string            `json:"container"`
}

// ExternalMetricStatus is an external metric's value.
type ExternalMetricStatus struct {
	Metric  MetricIdentifier  `json:"metric"`
	Current MetricValueStatus `json:"current"`
}

// MetricValueStatus is a metric's current value.
type MetricValueStatus struct {
	Value              *Quantity `json:"value,omitempty"`
	AverageValue       *Quantity `json:"averageValue,omitempty"`
	AverageUtilization *int32    `json:"averageUtilization,omitempty"`
}

// HorizontalPodAutoscalerCondition is one condition of an autoscaler.
type HorizontalPodAutoscalerCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastTransitionTime Time   `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

// Autoscaling names: metric source and target types, policies,
// conditions.
const (
	ObjectMetricSourceType            = "Object"
	PodsMetricSourceType              = "Pods"
	ResourceMetricSourceType          = "Resource"
	ContainerResourceMetricSourceType = "ContainerResource"
	ExternalMetricSourceType          = "External"

	UtilizationMetricType  = "Utilization"
	ValueMetricType        = "Value"
	AverageValueMetricType = "AverageValue"

	PodsScalingPolicy    = "Pods"
	PercentScalingPolicy = "Percent"

	MaxChangePolicySelect = "Max"
	MinChangePolicySelect = "Min"
	DisabledPolicySelect  = "Disabled"

	ScalingActive  = "ScalingActive"
	AbleToScale    = "AbleToScale"
	ScalingLimited = "ScalingLimited"

	// DefaultHPACPUUtilization is the target of an autoscaler without
	// metrics (and of `kubectl autoscale` without --cpu-percent).
	DefaultHPACPUUtilization = 80
)

// DefaultHPAScaleUpRules are Kubernetes' scale-up rules: no window,
// 4 pods or 100% per 15 s, the larger.
func DefaultHPAScaleUpRules() *HPAScalingRules {
	return &HPAScalingRules{
		StabilizationWindowSeconds: ptr[int32](0),
		SelectPolicy:               ptr(MaxChangePolicySelect),
		Policies: []HPAScalingPolicy{
			{Type: PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// DefaultHPAScaleDownRules are Kubernetes' scale-down rules: 100% per 15 s;
// no window here, so the controller's --horizontal-pod-autoscaler-
// downscale-stabilization (5m) applies.
func DefaultHPAScaleDownRules() *HPAScalingRules {
	return &HPAScalingRules{
		SelectPolicy: ptr(MaxChangePolicySelect),
		Policies:     []HPAScalingPolicy{{Type: PercentScalingPolicy, Value: 100, PeriodSeconds: 15}},
	}
}

// defaultHPA is Kubernetes' SetDefaults_HorizontalPodAutoscaler (v2):
// minReplicas 1, cpu at 80% without metrics, and a behavior's unset rules
// and fields from the default rules.
func defaultHPA(h *HorizontalPodAutoscaler) {
	s := &h.Spec
	if s.MinReplicas == nil {
		s.MinReplicas = ptr[int32](1)
	}
	if len(s.Metrics) == 0 {
		s.Metrics = []MetricSpec{{Type: ResourceMetricSourceType, Resource: &ResourceMetricSource{
			Name: "cpu", Target: MetricTarget{Type: UtilizationMetricType, AverageUtilization: ptr[int32](DefaultHPACPUUtilization)}}}}
	}
	if b := s.Behavior; b != nil {
		b.ScaleUp = defaultScalingRules(b.ScaleUp, DefaultHPAScaleUpRules())
		b.ScaleDown = defaultScalingRules(b.ScaleDown, DefaultHPAScaleDownRules())
	}
}

func defaultScalingRules(r, def *HPAScalingRules) *HPAScalingRules {
	if r == nil {
		return def
	}
	if r.StabilizationWindowSeconds == nil {
		r.StabilizationWindowSeconds = def.StabilizationWindowSeconds
	}
	if r.SelectPolicy == nil {
		r.SelectPolicy = def.SelectPolicy
	}
	if r.Policies == nil {
		r.Policies = def.Policies
	}
	return r
}

// validateHPA is Kubernetes' ValidateHorizontalPodAutoscaler, its rules
// and words (the HPAScaleToZero gate off).
func validateHPA(h *HorizontalPodAutoscaler) FieldErrors {
	errs := validateMeta(&h.ObjectMeta, true, pathSegmentName)
	s := &h.Spec
	errs = append(errs, validateCrossVersionRef(s.ScaleTargetRef, "spec.scaleTargetRef")...)
	if s.MinReplicas != nil && *s.MinReplicas < 1 {
		errs = append(errs, Invalid("spec.minReplicas", *s.MinReplicas, "must be greater than or equal to 1"))
	}
	if s.MaxReplicas < 1 {
		errs = append(errs, Invalid("spec.maxReplicas", s.MaxReplicas, "must be greater than 0"))
	}
	if s.MinReplicas != nil && s.MaxReplicas < *s.MinReplicas {
		errs = append(errs, Invalid("spec.maxReplicas", s.MaxReplicas, "must be greater than or equal to `minReplicas`"))
	}
	for i, m := range s.Metrics {
		errs = append(errs, validateMetricSpec(m, fmt.Sprintf("spec.metrics[%d]", i))...)
	}
	if b := s.Behavior; b != nil {
		errs = append(errs, validateScalingRules(b.ScaleUp, "spec.behavior.scaleUp")...)
		errs = append(errs, validateScalingRules(b.ScaleDown, "spec.behavior.scaleDown")...)
	}
	return errs
}

func pathSegmentName(name string) []string { return content.IsPathSegmentName(name) }

func validateCrossVersionRef(r CrossVersionObjectReference, p string) FieldErrors {
	var errs FieldErrors
	if r.Kind == "" {
		errs = append(errs, Required(p+".kind", ""))
	} else {
		for _, msg := range content.IsPathSegmentName(r.Kind) {
			errs = append(errs, Invalid(p+".kind", r.Kind, msg))
		}
	}
	if r.Name == "" {
		errs = append(errs, Required(p+".name", ""))
	} else {
		for _, msg := range content.IsPathSegmentName(r.Name) {
			errs = append(errs, Invalid(p+".name", r.Name, msg))
		}
	}
	return errs
}

var metricSourceTypes = []string{ContainerResourceMetricSourceType, ExternalMetricSourceType, ObjectMetricSourceType, PodsMetricSourceType, ResourceMetricSourceType}

// validateMetricSpec is Kubernetes' validateMetricSpec: a known type, its
// source set and no other.
func validateMetricSpec(m MetricSpec, p string) FieldErrors {
	var errs FieldErrors
	if m.Type == "" {
		errs = append(errs, Required(p+".type", "must specify a metric source type"))
	}
	present := map[string]bool{}
	check := func(name string, set bool, v func(string) FieldErrors) {
		if set {
			present[name] = true
			if len(present) == 1 {
				errs = append(errs, v(p+"."+name)...)
			}
		}
	}
	check("containerResource", m.ContainerResource != nil, func(q string) FieldErrors { return validateContainerResourceSource(m.ContainerResource, q) })
	check("external", m.External != nil, func(q string) FieldErrors { return validateExternalSource(m.External, q) })
	check("object", m.Object != nil, func(q string) FieldErrors { return validateObjectSource(m.Object, q) })
	check("pods", m.Pods != nil, func(q string) FieldErrors { return validatePodsSource(m.Pods, q) })
	check("resource", m.Resource != nil, func(q string) FieldErrors { return validateResourceSource(m.Resource, q) })
	expected := map[string]string{ObjectMetricSourceType: "object", PodsMetricSourceType: "pods", ResourceMetricSourceType: "resource",
		ContainerResourceMetricSourceType: "containerResource", ExternalMetricSourceType: "external"}[m.Type]
	if expected == "" {
		if m.Type != "" {
			errs = append(errs, NotSupported(p+".type", m.Type, metricSourceTypes...))
		}
	} else if !present[expected] {
		errs = append(errs, Required(p+"."+expected, "must populate information for the given metric source"))
	}
	if len(present) != 1 || !present[expected] {
		for _, name := range []string{"containerResource", "external", "object", "pods", "resource"} {
			if present[name] && name != expected {
				errs = append(errs, Forbidden(p+"."+name, "must populate the given metric source only"))
			}
		}
	}
	return errs
}

func validateObjectSource(s *ObjectMetricSource, p string) FieldErrors {
	errs := validateCrossVersionRef(s.DescribedObject, p+".describedObject")
	errs = append(errs, validateMetricIdentifier(s.Metric, p+".metric")...)
	errs = append(errs, validateMetricTarget(s.Target, p+".target")...)
	if s.Target.Value == nil && s.Target.AverageValue == nil {
		errs = append(errs, Required(p+".target.averageValue", "must set either a target value or averageValue"))
	}
	return errs
}

func validateExternalSource(s *ExternalMetricSource, p string) FieldErrors {
	errs := validateMetricIdentifier(s.Metric, p+".metric")
	errs = append(errs, validateMetricTarget(s.Target, p+".target")...)
	if s.Target.Value == nil && s.Target.AverageValue == nil {
		errs = append(errs, Required(p+".target.averageValue", "must set either a target value for metric or a per-pod target"))
	}
	if s.Target.Value != nil && s.Target.AverageValue != nil {
		errs = append(errs, Forbidden(p+".target.value", "may not set both a target value for metric and a per-pod target"))
	}
	return errs
}

func validatePodsSource(s *PodsMetricSource, p string) FieldErrors {
	errs := validateMetricIdentifier(s.Metric, p+".metric")
	errs = append(errs, validateMetricTarget(s.Target, p+".target")...)
	if s.Target.AverageValue == nil {
		errs = append(errs, Required(p+".target.averageValue", "must specify a positive target averageValue"))
	}
	return errs
}

func validateResourceSource(s *ResourceMetricSource, p string) FieldErrors {
	var errs FieldErrors
	if s.Name == "" {
		errs = append(errs, Required(p+".name", "must specify a resource name"))
	}
	return append(errs, validateResourceTarget(s.Target, p+".target")...)
}

func validateContainerResourceSource(s *ContainerResourceMetricSource, p string) FieldErrors {
	var errs FieldErrors
	if s.Name == "" {
		errs = append(errs, Required(p+".name", "must specify a resource name"))
	}
	if s.Container == "" {
		errs = append(errs, Required(p+".container", "must specify a container"))
	} else {
		errs = append(errs, validateDNSLabel(s.Container, p+".container")...)
	}
	return append(errs, validateResourceTarget(s.Target, p+".target")...)
}

func validateResourceTarget(t MetricTarget, p string) FieldErrors {
	errs := validateMetricTarget(t, p)
	if t.AverageUtilization == nil && t.AverageValue == nil {
		errs = append(errs, Required(p+".averageUtilization", "must set either a target raw value or a target utilization"))
	}
	if t.AverageUtilization != nil && t.AverageValue != nil {
		errs = append(errs, Forbidden(p+".averageValue", "may not set both a target raw value and a target utilization"))
	}
	return errs
}

func validateDNSLabel(v, p string) FieldErrors {
	var errs FieldErrors
	for _, msg := range isDNS1123Label(v) {
		errs = append(errs, Invalid(p, v, msg))
	}
	return errs
}

func validateMetricIdentifier(id MetricIdentifier, p string) FieldErrors {
	var errs FieldErrors
	if id.Name == "" {
		errs = append(errs, Required(p+".name", "must specify a metric name"))
	} else {
		for _, msg := range content.IsPathSegmentName(id.Name) {
			errs = append(errs, Invalid(p+".name", id.Name, msg))
		}
	}
	if id.Selector != nil {
		errs = append(errs, validateLabelSelector(id.Selector, p+".selector")...)
	}
	return errs
}

func validateMetricTarget(t MetricTarget, p string) FieldErrors {
	var errs FieldErrors
	switch t.Type {
	case "":
		errs = append(errs, Required(p+".type", "must specify a metric target type"))
	case UtilizationMetricType, ValueMetricType, AverageValueMetricType:
	default:
		errs = append(errs, Invalid(p+".type", t.Type, "must be either Utilization, Value, or AverageValue"))
	}
	if t.Value != nil && t.Value.Sign() != 1 {
		errs = append(errs, Invalid(p+".value", t.Value.String(), "must be positive"))
	}
	if t.AverageValue != nil && t.AverageValue.Sign() != 1 {
		errs = append(errs, Invalid(p+".averageValue", t.AverageValue.String(), "must be positive"))
	}
	if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
		errs = append(errs, Invalid(p+".averageUtilization", *t.AverageUtilization, "must be greater than 0"))
	}
	return errs
}

const (
	maxStabilizationWindowSeconds = 3600
	maxPeriodSeconds              = 1800
)

// validateScalingRules is Kubernetes' validateScalingRules.
func validateScalingRules(r *HPAScalingRules, p string) FieldErrors {
	if r == nil {
		return nil
	}
	var errs FieldErrors
	if w := r.StabilizationWindowSeconds; w != nil {
		if *w < 0 {
			errs = append(errs, Invalid(p+".stabilizationWindowSeconds", *w, "must be greater than or equal to zero"))
		}
		if *w > maxStabilizationWindowSeconds {
			errs = append(errs, Invalid(p+".stabilizationWindowSeconds", *w, fmt.Sprintf("must be less than or equal to %d", maxStabilizationWindowSeconds)))
		}
	}
	if sp := r.SelectPolicy; sp != nil {
		switch *sp {
		case MaxChangePolicySelect, MinChangePolicySelect, DisabledPolicySelect:
		default:
			errs = append(errs, NotSupported(p+".selectPolicy", *sp, DisabledPolicySelect, MaxChangePolicySelect, MinChangePolicySelect))
		}
	}
	if r.Policies != nil && len(r.Policies) == 0 { // unset: the defaults
		errs = append(errs, Required(p+".policies", "must specify at least one Policy"))
	}
	for i, pol := range r.Policies {
		q := elemPath(p, ".policies", i)
		if pol.Type != PodsScalingPolicy && pol.Type != PercentScalingPolicy {
			errs = append(errs, NotSupported(q+".type", pol.Type, PercentScalingPolicy, PodsScalingPolicy))
		}
		if pol.Value <= 0 {
			errs = append(errs, Invalid(q+".value", pol.Value, "must be greater than zero"))
		}
		if pol.PeriodSeconds <= 0 {
			errs = append(errs, Invalid(q+".periodSeconds", pol.PeriodSeconds, "must be greater than zero"))
		}
		if pol.PeriodSeconds > maxPeriodSeconds {
			errs = append(errs, Invalid(q+".periodSeconds", pol.PeriodSeconds, fmt.Sprintf("must be less than or equal to %d", maxPeriodSeconds)))
		}
	}
	return errs
}
