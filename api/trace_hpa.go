package api

import (
	"fmt"
	"strings"
	"time"
)

// The HorizontalPodAutoscaler controller's decisions, kept with the
// autoscaler as trace spans (GET/POST horizontalpodautoscalers/NAME/trace,
// in the API server's memory like a pod's trace, never in the store):
// after each sync the leader's controller posts one span of component
// HPATraceComponent, step "sync" (controlplane/controllers/hpa.go writes
// them; the format is here because `skiff describe hpa`, `skiff trace
// hpa/NAME` and the dashboard read them):
//
//	Start, End: when the sync began and ended
//	Message:    the steps joined with "; "
//	Details:    HPADecisionDetails

// HPATraceComponent is the component of an autoscaler's decision spans
// (kube-controller-manager's name for the controller).
const HPATraceComponent = "horizontal-pod-autoscaler"

// HPADecisionDetails are a decision span's Details: the replica counts
// and the steps of the decision, one line each with their inputs (per pod
// values, the ratio and the tolerance test, the policy or window that
// limited the result, the rescale), and each metric's values.
type HPADecisionDetails struct {
	CurrentReplicas int32    `json:"currentReplicas"`
	DesiredReplicas int32    `json:"desiredReplicas"`
	Steps           []string `json:"steps,omitempty"`
	// Rescaled: this sync wrote a new count (DesiredReplicas) through the
	// scale subresource. A sync whose metrics failed keeps the status's
	// old desired count without rescaling.
	Rescaled bool `json:"rescaled,omitempty"`
	// Metrics: what each metric that gave a proposal read (the
	// dashboard's plot of each pod's value over time).
	Metrics []HPAMetricSample `json:"metrics,omitempty"`
}

// HPAMetricSample is what one metric of one sync read, in the unit of
// its target: percent of the pods' requests for a Utilization target,
// else the metric's value ("90" of DCGM_FI_DEV_GPU_UTIL, 0.25 cpu).
type HPAMetricSample struct {
	// Metric names it as the rescale reason does ("pods metric
	// DCGM_FI_DEV_GPU_UTIL", "cpu resource utilization (percentage of
	// request)").
	Metric string `json:"metric"`
	// Unit: "%" for a Utilization target (percent of request), else "".
	Unit string `json:"unit,omitempty"`
	// Target and Current: the target and the value the status reports
	// (the average, the utilization or the object's value).
	Target  float64 `json:"target"`
	Current float64 `json:"current"`
	// Pods: each pod's measured value (before missing and not-ready pods
	// are given stand-in values); none for Object and External metrics.
	Pods map[string]float64 `json:"pods,omitempty"`
	// Proposal: the replica count this metric proposed.
	Proposal int32 `json:"proposal"`
}

// HPADecision is one decision read back from a span.
// +k8s:deepcopy-gen=false
type HPADecision struct {
	Time time.Time `json:"time"`
	HPADecisionDetails
}

// NewHPADecisionSpan is the span of one sync.
func NewHPADecisionSpan(start, end time.Time, current, desired int32, steps []string, metrics ...HPAMetricSample) TraceSpan {
	details := map[string]any{"currentReplicas": current, "desiredReplicas": desired, "steps": steps}
	if len(metrics) > 0 {
		details["metrics"] = metrics
	}
	return TraceSpan{Component: HPATraceComponent, Step: "sync",
		Start: MicroTime{Time: start}, End: MicroTime{Time: end},
		Message: strings.Join(steps, "; "), Details: details}
}

// HPADecisions are the decisions in spans, oldest first (other spans are
// skipped).
func HPADecisions(spans []TraceSpan) []HPADecision {
	var out []HPADecision
	for _, s := range spans {
		if s.Component != HPATraceComponent || s.Step != "sync" {
			continue
		}
		d := HPADecision{Time: s.Start.Time}
		decode(s.Details, &d.HPADecisionDetails)
		out = append(out, d)
	}
	return out
}

// DescribeHPADecisions renders the last n decisions of spans as skiff's
// section of `skiff describe hpa` (after kubectl's output): one header
// line per sync ("TIME  CURRENT -> DESIRED"), then its steps indented.
// "" when there are none.
func DescribeHPADecisions(name string, spans []TraceSpan, n int) string {
	ds := HPADecisions(spans)
	if len(ds) == 0 {
		return ""
	}
	if len(ds) > n {
		ds = ds[len(ds)-n:]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Decisions (skiff: the last %d syncs, oldest first; `skiff trace hpa/%s`):\n", len(ds), name)
	for _, d := range ds {
		fmt.Fprintf(&b, "  %s  %d -> %d replicas\n", d.Time.UTC().Format(time.RFC3339), d.CurrentReplicas, d.DesiredReplicas)
		for _, s := range d.Steps {
			fmt.Fprintf(&b, "    %s\n", s)
		}
	}
	return b.String()
}
