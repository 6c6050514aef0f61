package api

import (
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Eviction asks for a pod to be evicted: POST pods/NAME/eviction
// (policy/v1), as `kubectl drain` does: the pod's graceful delete with
// DeleteOptions, unless a PodDisruptionBudget of the pod forbids it.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type Eviction struct {
	TypeMeta `json:",inline"`
	// ObjectMeta names the pod (name and namespace); they must be the URL's.
	ObjectMeta `json:"metadata,omitempty"`
	// DeleteOptions of the pod's delete: gracePeriodSeconds, preconditions,
	// dryRun.
	DeleteOptions *DeleteOptions `json:"deleteOptions,omitempty"`
}

// PodDisruptionBudget (policy/v1) limits voluntary disruptions of the pods
// its selector matches: an eviction (pods/NAME/eviction, what `kubectl
// drain` sends) is refused with 429 while it would leave fewer healthy
// pods than the budget allows. Its controller
// (controlplane/controllers/disruption.go) keeps status.disruptionsAllowed.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type PodDisruptionBudget struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec is the budget.
	Spec PodDisruptionBudgetSpec `json:"spec,omitempty"`
	// Status is the observed state, written by the disruption controller
	// and decremented by each allowed eviction.
	Status PodDisruptionBudgetStatus `json:"status,omitempty"`
}

// PodDisruptionBudgetSpec is the budget: one of minAvailable and
// maxUnavailable (a number or a percent of the pods' controllers' scale).
type PodDisruptionBudgetSpec struct {
	// MinAvailable pods that must stay available after an eviction.
	MinAvailable *IntOrString `json:"minAvailable,omitempty"`
	// Selector of the pods; {} selects every pod of the namespace, unset none.
	Selector *LabelSelector `json:"selector,omitempty"`
	// MaxUnavailable pods that may be unavailable after an eviction.
	MaxUnavailable *IntOrString `json:"maxUnavailable,omitempty"`
	// UnhealthyPodEvictionPolicy: IfHealthyBudget (unset: a not-ready pod
	// may be evicted only while the budget is met) or AlwaysAllow.
	UnhealthyPodEvictionPolicy *string `json:"unhealthyPodEvictionPolicy,omitempty"`
}

// PodDisruptionBudgetStatus is what the disruption controller computed.
type PodDisruptionBudgetStatus struct {
	// ObservedGeneration the status was computed for; an eviction waits
	// (429) while it is older than the budget's generation.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// DisruptedPods: pods evicted but not yet deleted, with the time of
	// their eviction (not counted as healthy for 2 minutes).
	DisruptedPods map[string]Time `json:"disruptedPods,omitempty"`
	// DisruptionsAllowed: evictions allowed now.
	DisruptionsAllowed int32 `json:"disruptionsAllowed"`
	// CurrentHealthy: selected pods that are ready.
	CurrentHealthy int32 `json:"currentHealthy"`
	// DesiredHealthy: the fewest healthy pods the budget allows.
	DesiredHealthy int32 `json:"desiredHealthy"`
	// ExpectedPods: the pods the budget counts (the controllers' scale,
	// or the selected pods for an integer minAvailable).
	ExpectedPods int32 `json:"expectedPods"`
	// Conditions: DisruptionAllowed.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Policy names: the condition, its reasons, the eviction policies.
const (
	DisruptionAllowedCondition = "DisruptionAllowed"
	SufficientPodsReason       = "SufficientPods"
	InsufficientPodsReason     = "InsufficientPods"
	SyncFailedReason           = "SyncFailed"
	IfHealthyBudget            = "IfHealthyBudget"
	AlwaysAllow                = "AlwaysAllow"
	// DisruptionBudgetCause is the cause type of a refused eviction.
	DisruptionBudgetCause = "DisruptionBudget"
)

// validatePodDisruptionBudget is Kubernetes' ValidatePodDisruptionBudget
// (policy/v1): its rules and words.
func validatePodDisruptionBudget(p *PodDisruptionBudget) FieldErrors {
	errs := validateMeta(&p.ObjectMeta, true, isDNS1123Subdomain)
	s := &p.Spec
	if s.MinAvailable != nil && s.MaxUnavailable != nil {
		errs = append(errs, Invalid("spec", "<value omitted>", "minAvailable and maxUnavailable cannot be both set"))
	}
	for _, f := range []struct {
		v    *IntOrString
		path string
	}{{s.MinAvailable, "spec.minAvailable"}, {s.MaxUnavailable, "spec.maxUnavailable"}} {
		e := validateIntOrPercent(f.v, f.path)
		if len(e) == 0 && f.v != nil && f.v.Type == intstr.String {
			if pct, _ := percent(f.v.StrVal); pct > 100 {
				e = append(e, Invalid(f.path, f.v.StrVal, "must not be greater than 100%"))
			}
		}
		errs = append(errs, e...)
	}
	if s.Selector != nil {
		errs = append(errs, validateLabelSelector(s.Selector, "spec.selector")...)
	}
	if u := s.UnhealthyPodEvictionPolicy; u != nil && *u != IfHealthyBudget && *u != AlwaysAllow {
		errs = append(errs, NotSupported("spec.unhealthyPodEvictionPolicy", *u, AlwaysAllow, IfHealthyBudget))
	}
	return errs
}

// SetDisruptionAllowedCondition sets DisruptionAllowed from
// disruptionsAllowed (Kubernetes' UpdateDisruptionAllowedCondition); the
// eviction handler calls it too when it spends the last disruption.
func SetDisruptionAllowedCondition(st *PodDisruptionBudgetStatus, now time.Time) {
	c := metav1.Condition{Type: DisruptionAllowedCondition, Status: metav1.ConditionFalse, Reason: InsufficientPodsReason,
		ObservedGeneration: st.ObservedGeneration, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))}
	if st.DisruptionsAllowed > 0 {
		c.Status, c.Reason = metav1.ConditionTrue, SufficientPodsReason
	}
	apimeta.SetStatusCondition(&st.Conditions, c)
}

// DisruptionDeniedMessage is the cause of a refused eviction, in
// kube-apiserver's words (its disruptionDeniedMessage).
func DisruptionDeniedMessage(pdb *PodDisruptionBudget) string {
	c := apimeta.FindStatusCondition(pdb.Status.Conditions, DisruptionAllowedCondition)
	st := pdb.Status
	switch {
	case c != nil && c.Status == metav1.ConditionFalse && c.Message != "" && c.Reason == SyncFailedReason:
		return fmt.Sprintf("The disruption budget %s does not allow evicting pods currently because it failed sync: %s", pdb.Name, c.Message)
	case st.CurrentHealthy <= st.DesiredHealthy:
		return fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, st.DesiredHealthy, st.CurrentHealthy)
	case c != nil && c.Status == metav1.ConditionFalse && c.Message != "":
		return fmt.Sprintf("The disruption budget %s does not allow evicting pods currently (%s): %s", pdb.Name, c.Reason, c.Message)
	}
	return fmt.Sprintf("The disruption budget %s does not allow evicting pods currently", pdb.Name)
}
