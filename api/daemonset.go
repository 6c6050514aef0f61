package api

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// DaemonSet (apps/v1) runs one pod on every node that its template's
// nodeSelector, node affinity and tolerations allow. Its controller
// (controlplane/controllers/daemonset.go) makes each pod for one node and
// leaves the placement to the scheduler through a node affinity term
// (matchFields metadata.name In [NODE]), as Kubernetes does since 1.12.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type DaemonSet struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired state.
	Spec DaemonSetSpec `json:"spec,omitempty"`
	// Status is the observed state, written by the daemonset controller.
	Status DaemonSetStatus `json:"status,omitempty"`
}

// DaemonSetSpec of a daemon set.
type DaemonSetSpec struct {
	// Selector of the daemon pods; it must match the template's labels and
	// cannot change after create.
	Selector *LabelSelector `json:"selector"`
	// Template of the pods: one per eligible node (restartPolicy Always).
	Template PodTemplateSpec `json:"template"`
	// UpdateStrategy replaces pods of an old template: RollingUpdate
	// (default) or OnDelete.
	UpdateStrategy DaemonSetUpdateStrategy `json:"updateStrategy,omitempty"`
	// MinReadySeconds a pod must be ready to count as available.
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`
	// RevisionHistoryLimit: old ControllerRevisions kept for rollback (default 10).
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
}

// DaemonSetUpdateStrategy says how pods of an old template are replaced.
type DaemonSetUpdateStrategy struct {
	// Type: RollingUpdate (default) or OnDelete (a pod is replaced only
	// once someone deletes it).
	Type string `json:"type,omitempty"`
	// RollingUpdate parameters, for type RollingUpdate.
	RollingUpdate *RollingUpdateDaemonSet `json:"rollingUpdate,omitempty"`
}

// RollingUpdateDaemonSet bounds a daemon set's rolling update.
type RollingUpdateDaemonSet struct {
	// MaxUnavailable: nodes whose pod may be unavailable during the update
	// (number or percent of the desired nodes, rounded up; default 1).
	MaxUnavailable *IntOrString `json:"maxUnavailable,omitempty"`
	// MaxSurge: nodes that may run an old and a new pod at once while the
	// new one starts (number or percent, rounded up; default 0). Only one
	// of maxUnavailable and maxSurge may be non-zero.
	MaxSurge *IntOrString `json:"maxSurge,omitempty"`
}

// DaemonSetStatus is what the controller observed.
type DaemonSetStatus struct {
	// CurrentNumberScheduled: nodes that should run the pod and run one.
	CurrentNumberScheduled int32 `json:"currentNumberScheduled"`
	// NumberMisscheduled: nodes that run the pod but should not.
	NumberMisscheduled int32 `json:"numberMisscheduled"`
	// DesiredNumberScheduled: nodes that should run the pod.
	DesiredNumberScheduled int32 `json:"desiredNumberScheduled"`
	// NumberReady: nodes whose pod is ready.
	NumberReady int32 `json:"numberReady"`
	// ObservedGeneration the controller has acted on.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// UpdatedNumberScheduled: nodes running a pod of the current template.
	UpdatedNumberScheduled int32 `json:"updatedNumberScheduled,omitempty"`
	// NumberAvailable: nodes whose pod is ready for minReadySeconds.
	NumberAvailable int32 `json:"numberAvailable,omitempty"`
	// NumberUnavailable: desired minus available.
	NumberUnavailable int32 `json:"numberUnavailable,omitempty"`
	// CollisionCount counts hash collisions of ControllerRevision names.
	CollisionCount *int32 `json:"collisionCount,omitempty"`
	// Conditions are accepted for compatibility; Kubernetes' controller
	// sets none.
	Conditions []DaemonSetCondition `json:"conditions,omitempty"`
}

// DaemonSetCondition is one condition of a daemon set.
type DaemonSetCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastTransitionTime Time   `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

// ControllerRevision (apps/v1) is one immutable snapshot of a DaemonSet's
// or StatefulSet's pod template: the rollout history `rollout history`
// lists and `rollout undo` goes back to. Data is a strategic merge patch
// that puts the template back ({"spec":{"template":{...,"$patch":"replace"}}}).
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type ControllerRevision struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Data is the serialized state of the revision (immutable).
	Data json.RawMessage `json:"data,omitempty"`
	// Revision is the revision number (1, 2, ...).
	Revision int64 `json:"revision"`
}

// Update strategy types and well-known labels of DaemonSets and StatefulSets.
const (
	OnDelete = "OnDelete"
	// LabelControllerRevisionHash on pods and revisions: the hash of the
	// template a pod was made from (apps.ControllerRevisionHashLabelKey).
	LabelControllerRevisionHash = "controller-revision-hash"
	// LabelPodTemplateGeneration is the deprecated template generation
	// label the daemonset controller still puts on its pods.
	LabelPodTemplateGeneration = "pod-template-generation"
	// AnnotationDeprecatedTemplateGeneration is apps.DeprecatedTemplateGeneration.
	AnnotationDeprecatedTemplateGeneration = "deprecated.daemonset.template.generation"
)

// The node condition taints (TaintNodesByCondition) a daemon pod tolerates.
const (
	TaintDiskPressure       = "node.kubernetes.io/disk-pressure"
	TaintMemoryPressure     = "node.kubernetes.io/memory-pressure"
	TaintPIDPressure        = "node.kubernetes.io/pid-pressure"
	TaintNetworkUnavailable = "node.kubernetes.io/network-unavailable"
)

func defaultDaemonSet(d *DaemonSet) {
	s := &d.Spec
	if s.UpdateStrategy.Type == "" {
		s.UpdateStrategy.Type = RollingUpdate
	}
	if s.UpdateStrategy.Type == RollingUpdate {
		if s.UpdateStrategy.RollingUpdate == nil {
			s.UpdateStrategy.RollingUpdate = &RollingUpdateDaemonSet{}
		}
		ru := s.UpdateStrategy.RollingUpdate
		if ru.MaxUnavailable == nil {
			v := intstr.FromInt32(1)
			ru.MaxUnavailable = &v
		}
		if ru.MaxSurge == nil {
			v := intstr.FromInt32(0)
			ru.MaxSurge = &v
		}
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = ptr[int32](DefaultRevisionHistoryLimit)
	}
	defaultPodSpec(&s.Template.Spec)
}

func validateDaemonSet(d *DaemonSet) FieldErrors {
	errs := validateMeta(&d.ObjectMeta, true, isDNS1123Subdomain)
	s := &d.Spec
	errs = append(errs, validateWorkloadTemplate(s.Selector, &s.Template, "spec", "daemonset", "DaemonSet")...)
	errs = append(errs, nonNegative(int64(s.MinReadySeconds), "spec.minReadySeconds")...)
	if s.RevisionHistoryLimit != nil {
		errs = append(errs, nonNegative(int64(*s.RevisionHistoryLimit), "spec.revisionHistoryLimit")...)
	}
	const p = "spec.updateStrategy"
	switch s.UpdateStrategy.Type {
	case "", RollingUpdate:
		if ru := s.UpdateStrategy.RollingUpdate; ru != nil {
			errs = append(errs, validateRollingUpdateDaemonSet(ru, p+".rollingUpdate")...)
		}
	case OnDelete:
		// Kubernetes keeps a rollingUpdate given with OnDelete (it is ignored).
	default:
		errs = append(errs, NotSupported(p+".type", s.UpdateStrategy.Type, OnDelete, RollingUpdate))
	}
	return errs
}

// validateRollingUpdateDaemonSet is Kubernetes' ValidateRollingUpdateDaemonSet:
// both values are non-negative numbers or percents up to 100%, and exactly
// one of them is non-zero.
func validateRollingUpdateDaemonSet(ru *RollingUpdateDaemonSet, path string) FieldErrors {
	var errs FieldErrors
	for _, f := range []struct {
		v    *IntOrString
		path string
	}{{ru.MaxUnavailable, path + ".maxUnavailable"}, {ru.MaxSurge, path + ".maxSurge"}} {
		e := validateIntOrPercent(f.v, f.path)
		if len(e) == 0 && f.v != nil && f.v.Type == intstr.String {
			if pct, _ := percent(f.v.StrVal); pct > 100 {
				e = append(e, Invalid(f.path, f.v.StrVal, "must not be greater than 100%"))
			}
		}
		errs = append(errs, e...)
	}
	if len(errs) > 0 {
		return errs
	}
	hasUnavailable := ru.MaxUnavailable != nil && !isZeroIntOrPercent(ru.MaxUnavailable)
	hasSurge := ru.MaxSurge != nil && !isZeroIntOrPercent(ru.MaxSurge)
	switch {
	case hasUnavailable && hasSurge:
		errs = append(errs, Invalid(path+".maxSurge", ru.MaxSurge.String(), "may not be set when maxUnavailable is non-zero"))
	case !hasUnavailable && !hasSurge && ru.MaxUnavailable != nil:
		errs = append(errs, Required(path+".maxUnavailable", "cannot be 0 when maxSurge is 0"))
	}
	return errs
}

// validateWorkloadTemplate checks the selector and pod template of a
// DaemonSet or StatefulSet as Kubernetes does: the selector is required,
// not empty ("empty selector is invalid for daemonset"), and selects the
// template's labels; the pods restart Always and have no
// activeDeadlineSeconds ("activeDeadlineSeconds in DaemonSet is not
// Supported"). lower and title name the kind in those messages.
func validateWorkloadTemplate(sel *LabelSelector, t *PodTemplateSpec, path, lower, title string) FieldErrors {
	errs := validateSelectorAndTemplate(sel, t, path)
	for i, e := range errs {
		switch e.Field {
		case path + ".selector":
			if e.Detail == "empty selector is invalid for deployment" {
				errs[i] = Invalid(e.Field, e.Value, "empty selector is invalid for "+lower)
			}
		case path + ".template.spec.activeDeadlineSeconds":
			errs[i] = Invalid(e.Field, e.Value, "activeDeadlineSeconds in "+title+" is not Supported")
		}
	}
	return errs
}

func validateDaemonSetUpdate(n, o *DaemonSet) FieldErrors {
	if !selectorsEqual(n.Spec.Selector, o.Spec.Selector) {
		return FieldErrors{Invalid("spec.selector", selectorValue(n.Spec.Selector), "field is immutable")}
	}
	return nil
}

func validateControllerRevision(r *ControllerRevision) FieldErrors {
	errs := validateMeta(&r.ObjectMeta, true, isDNS1123Subdomain)
	if len(r.Data) == 0 || string(r.Data) == "null" {
		errs = append(errs, Required("data", "data is mandatory"))
	}
	errs = append(errs, nonNegative(r.Revision, "revision")...)
	return errs
}

func validateControllerRevisionUpdate(n, o *ControllerRevision) FieldErrors {
	if !jsonBytesEqual(n.Data, o.Data) {
		return FieldErrors{Invalid("data", "<value omitted>", "field is immutable")}
	}
	return nil
}

// jsonBytesEqual compares two JSON documents by value.
func jsonBytesEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return slices.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

// PrepareDaemonSet keeps the annotation deprecated.daemonset.template.generation
// as Kubernetes' daemon set strategy does (apps/v1 shows spec.templateGeneration
// there): "1" at create (old nil), one more each time an update changes the
// pod template. The controller labels its pods pod-template-generation with
// it. Call after defaults.
func PrepareDaemonSet(d, old *DaemonSet) {
	gen := int64(1)
	if old != nil {
		gen = DaemonSetTemplateGeneration(old)
		if !jsonEqual(d.Spec.Template, old.Spec.Template) {
			gen++
		}
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[AnnotationDeprecatedTemplateGeneration] = strconv.FormatInt(gen, 10)
}

// DaemonSetTemplateGeneration reads the template generation annotation
// (0 when absent or malformed).
func DaemonSetTemplateGeneration(d *DaemonSet) int64 {
	g, err := strconv.ParseInt(d.Annotations[AnnotationDeprecatedTemplateGeneration], 10, 64)
	if err != nil {
		return 0
	}
	return g
}
