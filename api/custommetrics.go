package api

// The custom and external metrics APIs (custom.metrics.k8s.io/v1beta2,
// external.metrics.k8s.io/v1beta1), what the HPA reads for Pods, Object
// and External metrics, served as prometheus-adapter serves them. Their
// objects are answers, never stored, so they are not in Kinds.

// Custom and external metrics group/versions.
const (
	CustomMetricsGroup          = "custom.metrics.k8s.io"
	CustomMetricsGroupVersion   = "custom.metrics.k8s.io/v1beta2"
	ExternalMetricsGroup        = "external.metrics.k8s.io"
	ExternalMetricsGroupVersion = "external.metrics.k8s.io/v1beta1"
)

// MetricValueList (custom.metrics.k8s.io/v1beta2) is the values of one
// metric for the objects asked for.
type MetricValueList struct {
	TypeMeta `json:",inline"`
	ListMeta `json:"metadata,omitempty"`
	Items    []MetricValue `json:"items"`
}

// MetricValue is one object's value of a metric.
type MetricValue struct {
	TypeMeta `json:",inline"`
	// DescribedObject is the object the value is of (a pod).
	DescribedObject ObjectReference `json:"describedObject"`
	// Metric names the metric and the selector asked with.
	Metric MetricIdentifier `json:"metric"`
	// Timestamp of the sample.
	Timestamp Time `json:"timestamp"`
	// WindowSeconds the value was computed over, if a rate.
	WindowSeconds *int64 `json:"windowSeconds,omitempty"`
	// Value of the metric.
	Value Quantity `json:"value"`
}

// ExternalMetricValueList (external.metrics.k8s.io/v1beta1) is the series
// of one external metric matching a selector.
type ExternalMetricValueList struct {
	TypeMeta `json:",inline"`
	ListMeta `json:"metadata,omitempty"`
	Items    []ExternalMetricValue `json:"items"`
}

// ExternalMetricValue is one series' value.
type ExternalMetricValue struct {
	TypeMeta `json:",inline"`
	// MetricName of the series.
	MetricName string `json:"metricName"`
	// MetricLabels of the series.
	MetricLabels map[string]string `json:"metricLabels"`
	// Timestamp of the sample.
	Timestamp Time `json:"timestamp"`
	// WindowSeconds the value was computed over, if a rate.
	WindowSeconds *int64 `json:"window,omitempty"`
	// Value of the series.
	Value Quantity `json:"value"`
}
