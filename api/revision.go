package api

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// The data of a ControllerRevision, as the DaemonSet and StatefulSet
// controllers write it and `kubectl rollout undo` applies it: a strategic
// merge patch that puts a pod template back,
//
//	{"spec":{"template":{"$patch":"replace","metadata":{...},"spec":{...}}}}

// RevisionPatch is the revision data of template.
func RevisionPatch(template *PodTemplateSpec) (json.RawMessage, error) {
	b, err := json.Marshal(template)
	if err != nil {
		return nil, err
	}
	var t map[string]any
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, err
	}
	t["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": t}})
}

// RevisionHolds reports whether rev's data is template's (compared as
// JSON values, so key order and spacing do not matter).
func RevisionHolds(rev *ControllerRevision, template *PodTemplateSpec) bool {
	want, err := RevisionPatch(template)
	if err != nil {
		return false
	}
	var a, b any
	if json.Unmarshal(want, &a) != nil || json.Unmarshal(rev.Data, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// TemplateOfRevision reads the pod template back out of a revision's data
// (what `rollout undo` restores and `rollout history --revision` shows).
func TemplateOfRevision(rev *ControllerRevision) (*PodTemplateSpec, error) {
	var p struct {
		Spec struct {
			Template json.RawMessage `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(rev.Data, &p); err != nil {
		return nil, fmt.Errorf("revision %s: %w", rev.Name, err)
	}
	var t map[string]any
	if err := json.Unmarshal(p.Spec.Template, &t); err != nil || t == nil {
		return nil, fmt.Errorf("revision %s holds no pod template", rev.Name)
	}
	delete(t, "$patch")
	b, _ := json.Marshal(t)
	var out PodTemplateSpec
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("revision %s: %w", rev.Name, err)
	}
	return &out, nil
}
