package api

import "reflect"

// PodTrace is the timed chain of steps that brought one pod to life: CLI →
// API server → scheduler → agent → device plugin → CDI → runtime. Each
// component appends spans with POST pods/NAME/trace; `skiff trace pod NAME`
// prints them. The API server keeps at most MaxTraceSpans per pod.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type PodTrace struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spans in the order they were recorded.
	Spans []TraceSpan `json:"spans,omitempty"`
}

// MaxTraceSpans bounds the spans kept per pod; the oldest are dropped.
const MaxTraceSpans = 200

// TraceSpan is one timed step.
type TraceSpan struct {
	// Component: apiserver, scheduler, agent, device-manager, runtime, ...
	Component string `json:"component"`
	// Step: e.g. "admit", "filter", "score", "bind", "pull", "allocate", "cdi", "start".
	Step string `json:"step"`
	// Start and End of the step.
	Start MicroTime `json:"start"`
	End   MicroTime `json:"end"`
	// Node the step ran on or chose, when it matters.
	Node string `json:"node,omitempty"`
	// Message: one human line.
	Message string `json:"message,omitempty"`
	// Details: structured data (per-node filter results, Allocate request/response, CDI edits).
	Details map[string]any `json:"details,omitempty"`
}

// DeepCopyInto copies s for the generated deep copies
// (zz_generated.deepcopy.go), which cannot copy Details' values (any):
// they are JSON's values, copied by deepCopy's walk.
func (s *TraceSpan) DeepCopyInto(out *TraceSpan) {
	*out = *s
	deepCopy(reflect.ValueOf(&out.Details).Elem(), reflect.ValueOf(s.Details))
}
