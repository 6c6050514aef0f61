package scenario

import (
	"reflect"
	"testing"

	"skiff.dev/skiff/api"
)

// An unschedulable pod tried again after its step settled: the new
// attempt's queue span must not hide the reasons of the attempt the step
// settled on (a full CI run printed job E with no reasons).
func TestReasonsOfTheLastCompletedAttempt(t *testing.T) {
	filter := func(node, reason string) api.TraceSpan {
		return api.TraceSpan{Component: "scheduler", Step: "filter", Details: map[string]any{
			"nodes":   []any{map[string]any{"node": node, "fit": false, "plugin": "NodeResourcesFit", "reasons": []any{reason}}},
			"message": "0/1 nodes are available",
		}}
	}
	queue := api.TraceSpan{Component: "scheduler", Step: "queue"}
	create := api.TraceSpan{Component: "apiserver", Step: "admit"}
	want := []string{"node-1  no  NodeResourcesFit: Insufficient nvidia.com/gpu"}
	for name, spans := range map[string][]api.TraceSpan{
		"settled":                     {create, queue, filter("node-1", "Insufficient nvidia.com/gpu")},
		"tried again":                 {create, queue, filter("node-1", "Insufficient nvidia.com/gpu"), queue},
		"two attempts, one in flight": {create, queue, filter("node-1", "Insufficient cpu"), queue, filter("node-1", "Insufficient nvidia.com/gpu"), queue},
	} {
		if got := reasons(lastCompleted(spans)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: reasons %q, want %q", name, got, want)
		}
	}
	if got := reasons(lastCompleted([]api.TraceSpan{create, queue})); got != nil {
		t.Errorf("never filtered: reasons %q, want none", got)
	}
}
