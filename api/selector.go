package api

import (
	"encoding/json"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Label and field selectors use apimachinery's parsers and matchers, so the
// syntax is exactly kubectl's: "app=web,tier in (a,b),!legacy" and
// "status.phase=Pending,spec.nodeName!=n1".

// ParseSelector parses a label selector; "" selects everything.
func ParseSelector(s string) (labels.Selector, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("invalid label selector %q: %w", s, err)
	}
	return sel, nil
}

// AsSelector converts a LabelSelector. A nil selector selects nothing (as
// Kubernetes for controllers); an empty one selects everything.
func (ls *LabelSelector) AsSelector() (labels.Selector, error) {
	if ls == nil {
		return labels.Nothing(), nil
	}
	sel := labels.NewSelector()
	keys := make([]string, 0, len(ls.MatchLabels))
	for k := range ls.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r, err := labels.NewRequirement(k, selection.Equals, []string{ls.MatchLabels[k]})
		if err != nil {
			return nil, fmt.Errorf("matchLabels[%s]: %w", k, err)
		}
		sel = sel.Add(*r)
	}
	for i, e := range ls.MatchExpressions {
		var op selection.Operator
		switch e.Operator {
		case "In":
			op = selection.In
		case "NotIn":
			op = selection.NotIn
		case "Exists":
			op = selection.Exists
		case "DoesNotExist":
			op = selection.DoesNotExist
		default:
			return nil, fmt.Errorf("matchExpressions[%d].operator: %q is not a valid label selector operator", i, e.Operator)
		}
		r, err := labels.NewRequirement(e.Key, op, e.Values)
		if err != nil {
			return nil, fmt.Errorf("matchExpressions[%d]: %w", i, err)
		}
		sel = sel.Add(*r)
	}
	return sel, nil
}

// String renders the selector as kubectl's -l syntax.
func (ls *LabelSelector) String() string {
	s, err := ls.AsSelector()
	if err != nil {
		return "<invalid>"
	}
	return s.String()
}

// SupportedFieldSelectors lists the fields each kind can be selected by.
var SupportedFieldSelectors = map[string][]string{
	"":       {"metadata.name", "metadata.namespace"},
	"Pod":    {"spec.nodeName", "status.phase", "spec.restartPolicy", "spec.schedulerName", "status.podIP"},
	"Event":  {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid", "reason", "type", "source"},
	"Node":   {"spec.unschedulable"},
	"Secret": {"type"},
	// resource.k8s.io: a node's drivers find their own slices by node.
	"ResourceSlice": {"spec.nodeName", "spec.driver"},
}

// FieldsOf returns the selectable fields of an object.
func FieldsOf(o Object) fields.Set {
	m := o.GetObjectMeta()
	set := fields.Set{"metadata.name": m.Name, "metadata.namespace": m.Namespace}
	switch v := o.(type) {
	case *Pod:
		set["spec.nodeName"] = v.Spec.NodeName
		set["status.phase"] = v.Status.Phase
		set["spec.restartPolicy"] = v.Spec.RestartPolicy
		set["spec.schedulerName"] = v.Spec.SchedulerName
		set["status.podIP"] = v.Status.PodIP
	case *Event:
		set["involvedObject.kind"] = v.InvolvedObject.Kind
		set["involvedObject.namespace"] = v.InvolvedObject.Namespace
		set["involvedObject.name"] = v.InvolvedObject.Name
		set["involvedObject.uid"] = v.InvolvedObject.UID
		set["reason"] = v.Reason
		set["type"] = v.Type
		set["source"] = v.Source.Component
	case *Node:
		set["spec.unschedulable"] = fmt.Sprint(v.Spec.Unschedulable)
	case *Secret:
		set["type"] = v.Type
	case *ResourceSlice:
		set["spec.driver"] = v.Spec.Driver
		if v.Spec.NodeName != nil {
			set["spec.nodeName"] = *v.Spec.NodeName
		}
	}
	return set
}

// fieldJSONMembers are the JSON member names of the selectable fields
// that hold a string: where FieldsOf reads each from.
var fieldJSONMembers = map[string]string{
	"metadata.name": "name", "metadata.namespace": "namespace",
	"spec.nodeName": "nodeName", "status.phase": "phase", "spec.restartPolicy": "restartPolicy",
	"spec.schedulerName": "schedulerName", "status.podIP": "podIP",
	"involvedObject.kind": "kind", "involvedObject.namespace": "namespace", "involvedObject.name": "name",
	"involvedObject.uid": "uid", "reason": "reason", "type": "type", "source": "component",
	"spec.driver": "driver",
}

// FieldNeedles returns, for each requirement of fs that a string field
// equals a value other than "", the bytes `"member":"value"` that the JSON
// of every object it selects holds, as encoding/json writes it (compact,
// the value escaped as it escapes it): a store can test an object's
// stored JSON for them before it decodes the object, and decode only those
// that hold all (store.FilteredLister). A JSON that holds them may still
// not match (the member may be another field's): Matches decides. Other
// requirements (!=, an empty value, a field that is not a string) give no
// needle.
func FieldNeedles(fs fields.Selector) [][]byte {
	if fs == nil {
		return nil
	}
	var out [][]byte
	for _, r := range fs.Requirements() {
		member, ok := fieldJSONMembers[r.Field]
		if !ok || r.Value == "" || (r.Operator != selection.Equals && r.Operator != selection.DoubleEquals) {
			continue
		}
		v, err := json.Marshal(r.Value)
		if err != nil {
			continue
		}
		out = append(out, append([]byte(`"`+member+`":`), v...))
	}
	return out
}

// ParseFieldSelector parses a field selector for kind k and rejects fields
// the kind cannot be selected by, naming them.
func ParseFieldSelector(k *Kind, s string) (fields.Selector, error) {
	sel, err := fields.ParseSelector(s)
	if err != nil {
		return nil, fmt.Errorf("invalid field selector %q: %w", s, err)
	}
	allowed := map[string]bool{}
	for _, f := range SupportedFieldSelectors[""] {
		allowed[f] = true
	}
	for _, f := range SupportedFieldSelectors[k.Kind] {
		allowed[f] = true
	}
	for _, r := range sel.Requirements() {
		if !allowed[r.Field] {
			return nil, fmt.Errorf("field label not supported: %s (for %s: %v %v)", r.Field, k.Resource, SupportedFieldSelectors[""], SupportedFieldSelectors[k.Kind])
		}
	}
	return sel, nil
}

// Matches reports whether o matches both selectors (nil means everything).
func Matches(o Object, ls labels.Selector, fs fields.Selector) bool {
	if ls != nil && !ls.Empty() && !ls.Matches(labels.Set(o.GetObjectMeta().Labels)) {
		return false
	}
	if fs != nil && !fs.Empty() && !fs.Matches(FieldsOf(o)) {
		return false
	}
	return true
}
