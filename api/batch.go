package api

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Job (batch/v1) runs pods to completion: spec.completions pods must
// succeed, at most spec.parallelism at a time. Its controller
// (controlplane/controllers/job.go) counts finished pods through the
// batch.kubernetes.io/job-tracking finalizer, so no pod is counted twice or
// lost, and ends the Job with a Complete or Failed condition.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type Job struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired behaviour.
	Spec JobSpec `json:"spec,omitempty"`
	// Status is the observed state, written by the job controller.
	Status JobStatus `json:"status,omitempty"`
}

// JobSpec of a job.
type JobSpec struct {
	// Parallelism: the most pods running at once (default 1; 0 pauses the job).
	Parallelism *int32 `json:"parallelism,omitempty"`
	// Completions: successful pods needed (default 1 when parallelism is
	// unset too; unset means any one success completes the job).
	Completions *int32 `json:"completions,omitempty"`
	// ActiveDeadlineSeconds: how long the job may be active (from startTime)
	// before it fails with DeadlineExceeded.
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
	// PodFailurePolicy decides what a failed pod means (FailJob, FailIndex,
	// Ignore, Count) by exit codes or pod conditions; needs restartPolicy Never.
	PodFailurePolicy *PodFailurePolicy `json:"podFailurePolicy,omitempty"`
	// BackoffLimit: failed pods (restartPolicy Never) or container restarts
	// (OnFailure) before the job fails with BackoffLimitExceeded (default 6).
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
	// BackoffLimitPerIndex: failures allowed per index of an Indexed job
	// before that index is marked failed.
	BackoffLimitPerIndex *int32 `json:"backoffLimitPerIndex,omitempty"`
	// MaxFailedIndexes: failed indexes allowed before the whole job fails
	// (needs backoffLimitPerIndex).
	MaxFailedIndexes *int32 `json:"maxFailedIndexes,omitempty"`
	// Selector of the job's pods; generated (controller-uid) unless manualSelector.
	Selector *LabelSelector `json:"selector,omitempty"`
	// ManualSelector: the selector is the user's, not generated.
	ManualSelector *bool `json:"manualSelector,omitempty"`
	// Template of the pods (restartPolicy OnFailure or Never).
	Template PodTemplateSpec `json:"template"`
	// TTLSecondsAfterFinished: delete the job this long after it finished.
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// CompletionMode: NonIndexed (default) or Indexed (each pod gets an
	// index 0..completions-1 in batch.kubernetes.io/job-completion-index).
	CompletionMode *string `json:"completionMode,omitempty"`
	// Suspend: true deletes the running pods and creates none until false.
	Suspend *bool `json:"suspend,omitempty"`
	// PodReplacementPolicy: TerminatingOrFailed (default) replaces a pod as
	// soon as it is terminating; Failed only once it has failed.
	PodReplacementPolicy *string `json:"podReplacementPolicy,omitempty"`
}

// PodFailurePolicy: rules checked in order against every failed pod; the
// first match decides.
type PodFailurePolicy struct {
	// Rules, at most 20.
	Rules []PodFailurePolicyRule `json:"rules"`
}

// PodFailurePolicyRule: an action and one requirement (onExitCodes or onPodConditions).
type PodFailurePolicyRule struct {
	// Action: FailJob, FailIndex, Ignore or Count.
	Action string `json:"action"`
	// OnExitCodes matches a terminated container's exit code.
	OnExitCodes *PodFailurePolicyOnExitCodesRequirement `json:"onExitCodes,omitempty"`
	// OnPodConditions matches a pod condition (e.g. DisruptionTarget True).
	OnPodConditions []PodFailurePolicyOnPodConditionsPattern `json:"onPodConditions,omitempty"`
}

// PodFailurePolicyOnExitCodesRequirement matches exit codes.
type PodFailurePolicyOnExitCodesRequirement struct {
	// ContainerName restricts the rule to one container.
	ContainerName *string `json:"containerName,omitempty"`
	// Operator: In or NotIn.
	Operator string `json:"operator"`
	// Values: exit codes, ordered, without duplicates (0 not allowed with In).
	Values []int32 `json:"values"`
}

// PodFailurePolicyOnPodConditionsPattern matches a pod condition.
type PodFailurePolicyOnPodConditionsPattern struct {
	// Type of the pod condition.
	Type string `json:"type"`
	// Status: True, False or Unknown.
	Status string `json:"status"`
}

// JobStatus of a job.
type JobStatus struct {
	// Conditions: Suspended, SuccessCriteriaMet, Complete, FailureTarget, Failed.
	Conditions []JobCondition `json:"conditions,omitempty"`
	// StartTime: when the controller first acted on the job (reset while suspended).
	StartTime *Time `json:"startTime,omitempty"`
	// CompletionTime: when the job completed (Complete only).
	CompletionTime *Time `json:"completionTime,omitempty"`
	// Active pods (pending or running, not terminating).
	Active int32 `json:"active,omitempty"`
	// Succeeded pods counted.
	Succeeded int32 `json:"succeeded,omitempty"`
	// Failed pods counted.
	Failed int32 `json:"failed,omitempty"`
	// Terminating pods (deletionTimestamp set, not yet finished).
	Terminating *int32 `json:"terminating,omitempty"`
	// CompletedIndexes of an Indexed job, compressed: "1,3-5".
	CompletedIndexes string `json:"completedIndexes,omitempty"`
	// FailedIndexes of an Indexed job with backoffLimitPerIndex, compressed.
	FailedIndexes *string `json:"failedIndexes,omitempty"`
	// UncountedTerminatedPods: uids of finished pods whose finalizer is not
	// yet removed; they are added to the counters once it is.
	UncountedTerminatedPods *UncountedTerminatedPods `json:"uncountedTerminatedPods,omitempty"`
	// Ready: active pods with the Ready condition.
	Ready *int32 `json:"ready,omitempty"`
}

// UncountedTerminatedPods holds uids of finished pods not yet in the counters.
type UncountedTerminatedPods struct {
	// Succeeded pod uids.
	Succeeded []string `json:"succeeded,omitempty"`
	// Failed pod uids.
	Failed []string `json:"failed,omitempty"`
}

// JobCondition is one condition of a job.
type JobCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastProbeTime      Time   `json:"lastProbeTime,omitempty"`
	LastTransitionTime Time   `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

// Job labels, annotations, finalizer, modes and conditions, as k8s.io/api/batch/v1.
const (
	JobNameLabel                 = "batch.kubernetes.io/job-name"
	LegacyJobNameLabel           = "job-name"
	ControllerUIDLabel           = "batch.kubernetes.io/controller-uid"
	LegacyControllerUIDLabel     = "controller-uid"
	JobCompletionIndexAnnotation = "batch.kubernetes.io/job-completion-index"
	JobIndexFailureCountAnno     = "batch.kubernetes.io/job-index-failure-count"
	JobIndexIgnoredFailureAnno   = "batch.kubernetes.io/job-index-ignored-failure-count"
	JobTrackingFinalizer         = "batch.kubernetes.io/job-tracking"
	// JobCompletionIndexEnv is the env var an Indexed job's containers get.
	JobCompletionIndexEnv = "JOB_COMPLETION_INDEX"

	NonIndexedCompletion = "NonIndexed"
	IndexedCompletion    = "Indexed"

	PodReplacementTerminatingOrFailed = "TerminatingOrFailed"
	PodReplacementFailed              = "Failed"

	JobSuspended          = "Suspended"
	JobComplete           = "Complete"
	JobFailed             = "Failed"
	JobFailureTarget      = "FailureTarget"
	JobSuccessCriteriaMet = "SuccessCriteriaMet"

	JobReasonPodFailurePolicy         = "PodFailurePolicy"
	JobReasonBackoffLimitExceeded     = "BackoffLimitExceeded"
	JobReasonDeadlineExceeded         = "DeadlineExceeded"
	JobReasonMaxFailedIndexesExceeded = "MaxFailedIndexesExceeded"
	JobReasonFailedIndexes            = "FailedIndexes"
	JobReasonCompletionsReached       = "CompletionsReached"

	PodFailurePolicyActionFailJob   = "FailJob"
	PodFailurePolicyActionFailIndex = "FailIndex"
	PodFailurePolicyActionIgnore    = "Ignore"
	PodFailurePolicyActionCount     = "Count"

	// PodDisruptionTarget is the pod condition set when a pod is evicted
	// or preempted (the usual onPodConditions rule).
	PodDisruptionTarget = "DisruptionTarget"
)

// Limits of job validation, as Kubernetes' (pkg/apis/batch/validation).
const (
	maxParallelismForIndexedJob     = 100000
	maxFailedIndexesLimit           = 100000
	maxPodFailurePolicyRules        = 20
	maxPodFailurePolicyOnExitValues = 255
	maxPodFailurePolicyOnPodConds   = 20
)

// IsJobFinished reports whether the job has a Complete or Failed condition
// that is True.
func IsJobFinished(j *Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == JobComplete || c.Type == JobFailed) && c.Status == ConditionTrue {
			return true
		}
	}
	return false
}

// JobCondition returns the job's condition of type t, or nil.
func (j *Job) Condition(t string) *JobCondition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == t {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// IsIndexed reports completionMode Indexed.
func (j *Job) IsIndexed() bool {
	return j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == IndexedCompletion
}

// GenerateJobSelector gives a new job, unless spec.manualSelector is true,
// the labels and selector Kubernetes' job strategy generates at create:
// job-name and controller-uid labels (batch.kubernetes.io/ and legacy) on the
// template, and a selector on batch.kubernetes.io/controller-uid. Labels the
// user already set are left alone (validation then refuses a wrong one).
// Call it after the uid is assigned.
func GenerateJobSelector(j *Job) {
	if j.Spec.ManualSelector != nil && *j.Spec.ManualSelector {
		return
	}
	if j.Spec.Template.Labels == nil {
		j.Spec.Template.Labels = map[string]string{}
	}
	for k, v := range map[string]string{
		LegacyJobNameLabel: j.Name, JobNameLabel: j.Name,
		LegacyControllerUIDLabel: j.UID, ControllerUIDLabel: j.UID,
	} {
		if _, ok := j.Spec.Template.Labels[k]; !ok {
			j.Spec.Template.Labels[k] = v
		}
	}
	if j.Spec.Selector == nil {
		j.Spec.Selector = &LabelSelector{}
	}
	if j.Spec.Selector.MatchLabels == nil {
		j.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, ok := j.Spec.Selector.MatchLabels[ControllerUIDLabel]; !ok {
		j.Spec.Selector.MatchLabels[ControllerUIDLabel] = j.UID
	}
}

// defaultJob: Kubernetes' batch/v1 defaults (pkg/apis/batch/v1/defaults.go).
func defaultJob(j *Job) {
	s := &j.Spec
	if s.Completions == nil && s.Parallelism == nil {
		s.Completions, s.Parallelism = ptr[int32](1), ptr[int32](1)
	}
	if s.Parallelism == nil {
		s.Parallelism = ptr[int32](1)
	}
	if s.BackoffLimit == nil {
		if s.BackoffLimitPerIndex != nil {
			s.BackoffLimit = ptr[int32](math.MaxInt32)
		} else {
			s.BackoffLimit = ptr[int32](6)
		}
	}
	if s.CompletionMode == nil {
		s.CompletionMode = ptr(NonIndexedCompletion)
	}
	if s.Suspend == nil {
		s.Suspend = ptr(false)
	}
	if s.PodReplacementPolicy == nil {
		if s.PodFailurePolicy != nil {
			s.PodReplacementPolicy = ptr(PodReplacementFailed)
		} else {
			s.PodReplacementPolicy = ptr(PodReplacementTerminatingOrFailed)
		}
	}
	if s.ManualSelector == nil {
		s.ManualSelector = ptr(false)
	}
	if p := s.PodFailurePolicy; p != nil {
		for i := range p.Rules {
			for k := range p.Rules[i].OnPodConditions {
				if p.Rules[i].OnPodConditions[k].Status == "" {
					p.Rules[i].OnPodConditions[k].Status = ConditionTrue
				}
			}
		}
	}
	defaultPodSpec(&s.Template.Spec)
}

// validateJob: Kubernetes' ValidateJob (pkg/apis/batch/validation), its
// rules and words.
func validateJob(j *Job) FieldErrors {
	if j.UID == "" && (j.Spec.ManualSelector == nil || !*j.Spec.ManualSelector) {
		// Before create (the CLI validates first): check what the server
		// will store, with the selector it generates.
		g := Clone(j)
		g.UID = "uid-assigned-at-create"
		GenerateJobSelector(g)
		j = g
	}
	errs := validateMeta(&j.ObjectMeta, true, isDNS1123Subdomain)
	// The job's name becomes a label value of its pods (job-name).
	if len(j.Name) > validation.LabelValueMaxLength && j.Spec.ManualSelector != nil && !*j.Spec.ManualSelector {
		errs = append(errs, Invalid("metadata.name", j.Name, fmt.Sprintf("must be no more than %d characters", validation.LabelValueMaxLength)))
	}
	errs = append(errs, validateGeneratedSelector(j)...)
	return append(errs, validateJobSpec(&j.Spec)...)
}

// validateGeneratedSelector: a generated selector must be the one the
// server generated (the template carries controller-uid and job-name with
// the job's uid and name).
func validateGeneratedSelector(j *Job) FieldErrors {
	if j.Spec.ManualSelector != nil && *j.Spec.ManualSelector {
		return nil
	}
	var errs FieldErrors
	for _, kv := range [][2]string{{LegacyControllerUIDLabel, j.UID}, {LegacyJobNameLabel, j.Name}, {ControllerUIDLabel, j.UID}, {JobNameLabel, j.Name}} {
		p := "spec.template.metadata.labels[" + kv[0] + "]"
		got, ok := j.Spec.Template.Labels[kv[0]]
		switch {
		case !ok:
			errs = append(errs, Required(p, fmt.Sprintf("must be '%s'", kv[1])))
		case got != kv[1]:
			errs = append(errs, Invalid(p, got, fmt.Sprintf("must be '%s'", kv[1])))
		}
	}
	if j.Spec.Selector != nil {
		if sel, err := j.Spec.Selector.AsSelector(); err == nil && !sel.Matches(labels.Set{ControllerUIDLabel: j.UID}) {
			errs = append(errs, Invalid("spec.selector", selectorValue(j.Spec.Selector), "`selector` not auto-generated"))
		}
	}
	return errs
}

func validateJobSpec(s *JobSpec) FieldErrors {
	var errs FieldErrors
	for _, f := range []struct {
		v    *int32
		path string
	}{{s.Parallelism, "spec.parallelism"}, {s.Completions, "spec.completions"}, {s.BackoffLimit, "spec.backoffLimit"},
		{s.TTLSecondsAfterFinished, "spec.ttlSecondsAfterFinished"}, {s.BackoffLimitPerIndex, "spec.backoffLimitPerIndex"},
		{s.MaxFailedIndexes, "spec.maxFailedIndexes"}} {
		if f.v != nil {
			errs = append(errs, nonNegative(int64(*f.v), f.path)...)
		}
	}
	if s.ActiveDeadlineSeconds != nil {
		errs = append(errs, nonNegative(*s.ActiveDeadlineSeconds, "spec.activeDeadlineSeconds")...)
	}
	indexed := s.CompletionMode != nil && *s.CompletionMode == IndexedCompletion
	if m := s.CompletionMode; m != nil && *m != NonIndexedCompletion && *m != IndexedCompletion {
		errs = append(errs, NotSupported("spec.completionMode", *m, NonIndexedCompletion, IndexedCompletion))
	}
	if indexed {
		if s.Completions == nil {
			errs = append(errs, Required("spec.completions", "when completion mode is "+IndexedCompletion))
		}
		if s.Parallelism != nil && *s.Parallelism > maxParallelismForIndexedJob {
			errs = append(errs, Invalid("spec.parallelism", *s.Parallelism, fmt.Sprintf("must be less than or equal to %d when completion mode is %s", maxParallelismForIndexedJob, IndexedCompletion)))
		}
		if s.Completions != nil && s.MaxFailedIndexes != nil && *s.MaxFailedIndexes > *s.Completions {
			errs = append(errs, Invalid("spec.maxFailedIndexes", *s.MaxFailedIndexes, "must be less than or equal to completions"))
		}
		if s.MaxFailedIndexes != nil && *s.MaxFailedIndexes > maxFailedIndexesLimit {
			errs = append(errs, Invalid("spec.maxFailedIndexes", *s.MaxFailedIndexes, fmt.Sprintf("must be less than or equal to %d", maxFailedIndexesLimit)))
		}
	}
	if s.BackoffLimitPerIndex != nil && !indexed {
		errs = append(errs, Forbidden("spec.backoffLimitPerIndex", "requires indexed completion mode"))
	}
	if s.MaxFailedIndexes != nil && s.BackoffLimitPerIndex == nil {
		errs = append(errs, Required("spec.backoffLimitPerIndex", "when maxFailedIndexes is specified"))
	}
	if p := s.PodReplacementPolicy; p != nil {
		switch {
		case *p != PodReplacementTerminatingOrFailed && *p != PodReplacementFailed:
			errs = append(errs, NotSupported("spec.podReplacementPolicy", *p, PodReplacementFailed, PodReplacementTerminatingOrFailed))
		case s.PodFailurePolicy != nil && *p != PodReplacementFailed:
			errs = append(errs, NotSupported("spec.podReplacementPolicy", *p, PodReplacementFailed))
		}
	}
	// The selector: required (generated when not manual), and it must
	// select the template's labels.
	if s.Selector == nil {
		errs = append(errs, Required("spec.selector", ""))
	} else {
		errs = append(errs, validateLabelSelector(s.Selector, "spec.selector")...)
		if sel, err := s.Selector.AsSelector(); err == nil && !sel.Matches(labels.Set(s.Template.Labels)) {
			errs = append(errs, Invalid("spec.template.metadata.labels", templateLabels(s.Template.Labels), "`selector` does not match template `labels`"))
		}
	}
	tp := "spec.template"
	errs = append(errs, validateLabels(s.Template.Labels, tp+".metadata.labels")...)
	errs = append(errs, validatePodSpec(&s.Template.Spec, tp+".spec")...)
	switch rp := s.Template.Spec.RestartPolicy; {
	case rp != RestartOnFailure && rp != RestartNever:
		errs = append(errs, NotSupported(tp+".spec.restartPolicy", rp, RestartOnFailure, RestartNever))
	case rp == RestartOnFailure && s.PodFailurePolicy != nil:
		errs = append(errs, Invalid(tp+".spec.restartPolicy", rp, fmt.Sprintf("only %q is supported when podFailurePolicy is specified", RestartNever)))
	}
	if s.PodFailurePolicy != nil {
		errs = append(errs, validatePodFailurePolicy(s)...)
	}
	return errs
}

func validatePodFailurePolicy(s *JobSpec) FieldErrors {
	var errs FieldErrors
	rules := s.PodFailurePolicy.Rules
	if len(rules) > maxPodFailurePolicyRules {
		errs = append(errs, tooMany("spec.podFailurePolicy.rules", len(rules), maxPodFailurePolicyRules))
	}
	names := map[string]bool{}
	for _, c := range slices.Concat(s.Template.Spec.Containers, s.Template.Spec.InitContainers) {
		names[c.Name] = true
	}
	actions := []string{PodFailurePolicyActionCount, PodFailurePolicyActionFailIndex, PodFailurePolicyActionFailJob, PodFailurePolicyActionIgnore}
	for i, r := range rules {
		rp := fmt.Sprintf("spec.podFailurePolicy.rules[%d]", i)
		switch {
		case r.Action == "":
			errs = append(errs, Required(rp+".action", fmt.Sprintf("valid values: %q", actions)))
		case r.Action == PodFailurePolicyActionFailIndex:
			if s.BackoffLimitPerIndex == nil {
				errs = append(errs, Invalid(rp+".action", r.Action, "requires the backoffLimitPerIndex to be set"))
			}
		case !slices.Contains(actions, r.Action):
			errs = append(errs, NotSupported(rp+".action", r.Action, actions...))
		}
		if e := r.OnExitCodes; e != nil {
			errs = append(errs, validateOnExitCodes(e, rp+".onExitCodes", names)...)
		}
		if len(r.OnPodConditions) > maxPodFailurePolicyOnPodConds {
			errs = append(errs, tooMany(rp+".onPodConditions", len(r.OnPodConditions), maxPodFailurePolicyOnPodConds))
		}
		for k, pat := range r.OnPodConditions {
			pp := fmt.Sprintf("%s.onPodConditions[%d]", rp, k)
			for _, msg := range validation.IsQualifiedName(pat.Type) {
				errs = append(errs, Invalid(pp+".type", pat.Type, msg))
			}
			switch pat.Status {
			case ConditionTrue, ConditionFalse, ConditionUnknown:
			case "":
				errs = append(errs, Required(pp+".status", fmt.Sprintf("valid values: %q", []string{ConditionFalse, ConditionTrue, ConditionUnknown})))
			default:
				errs = append(errs, NotSupported(pp+".status", pat.Status, ConditionFalse, ConditionTrue, ConditionUnknown))
			}
		}
		switch {
		case r.OnExitCodes != nil && len(r.OnPodConditions) > 0:
			errs = append(errs, Invalid(rp, omitted("specifying both OnExitCodes and OnPodConditions is not supported"), ""))
		case r.OnExitCodes == nil && len(r.OnPodConditions) == 0:
			errs = append(errs, Invalid(rp, omitted("specifying one of OnExitCodes and OnPodConditions is required"), ""))
		}
	}
	return errs
}

func validateOnExitCodes(e *PodFailurePolicyOnExitCodesRequirement, path string, names map[string]bool) FieldErrors {
	var errs FieldErrors
	switch e.Operator {
	case "In", "NotIn":
	case "":
		errs = append(errs, Required(path+".operator", fmt.Sprintf("valid values: %q", []string{"In", "NotIn"})))
	default:
		errs = append(errs, NotSupported(path+".operator", e.Operator, "In", "NotIn"))
	}
	if e.ContainerName != nil && !names[*e.ContainerName] {
		errs = append(errs, Invalid(path+".containerName", *e.ContainerName, "must be one of the container or initContainer names in the pod template"))
	}
	switch {
	case len(e.Values) == 0:
		errs = append(errs, Invalid(path+".values", e.Values, "at least one value is required"))
	case len(e.Values) > maxPodFailurePolicyOnExitValues:
		errs = append(errs, tooMany(path+".values", len(e.Values), maxPodFailurePolicyOnExitValues))
	}
	seen := map[int32]bool{}
	for i, v := range e.Values {
		vp := elemPath(path, ".values", i)
		if e.Operator == "In" && v == 0 {
			errs = append(errs, Invalid(vp, v, "must not be 0 for the In operator"))
		}
		if seen[v] {
			errs = append(errs, Duplicate(vp, v))
		}
		seen[v] = true
	}
	if !slices.IsSorted(e.Values) {
		errs = append(errs, Invalid(path+".values", e.Values, "must be ordered"))
	}
	return errs
}

// validateJobUpdate: Kubernetes' ValidateJobSpecUpdate. The selector,
// completionMode, podFailurePolicy and backoffLimitPerIndex are fixed; so
// is the pod template, except that a suspended job that never started
// (startTime unset) may change its template's scheduling directives: node
// affinity, nodeSelector, tolerations, labels, annotations and scheduling
// gates (JobMutableNodeSchedulingDirectives, how Kueue places a job on the
// flavor it admitted it to). Completions may change only together with
// parallelism on an Indexed job that keeps them equal (elastic Indexed jobs).
func validateJobUpdate(n, o *Job) FieldErrors {
	var errs FieldErrors
	ns, os := &n.Spec, &o.Spec
	if !selectorsEqual(ns.Selector, os.Selector) {
		errs = append(errs, Invalid("spec.selector", selectorValue(ns.Selector), "field is immutable"))
	}
	immutable := func(path string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			errs = append(errs, Invalid(path, valueOf(a), "field is immutable"))
		}
	}
	immutable("spec.completionMode", ns.CompletionMode, os.CompletionMode)
	immutable("spec.podFailurePolicy", ns.PodFailurePolicy, os.PodFailurePolicy)
	immutable("spec.backoffLimitPerIndex", ns.BackoffLimitPerIndex, os.BackoffLimitPerIndex)
	if !reflect.DeepEqual(ns.Completions, os.Completions) {
		elastic := n.IsIndexed() && ns.Completions != nil && ns.Parallelism != nil && *ns.Completions == *ns.Parallelism &&
			os.Completions != nil && os.Parallelism != nil && *os.Completions == *os.Parallelism
		if !elastic {
			errs = append(errs, Invalid("spec.completions", valueOf(ns.Completions), "field is immutable"))
		}
	}
	old := Clone(o).Spec.Template
	if os.Suspend != nil && *os.Suspend && o.Status.StartTime == nil {
		t := &ns.Template
		switch {
		case t.Spec.Affinity == nil && old.Spec.Affinity != nil:
			old.Spec.Affinity.NodeAffinity = nil
			if reflect.ValueOf(*old.Spec.Affinity).IsZero() {
				old.Spec.Affinity = nil
			}
		case t.Spec.Affinity != nil && old.Spec.Affinity == nil:
			old.Spec.Affinity = &Affinity{NodeAffinity: t.Spec.Affinity.NodeAffinity}
		case t.Spec.Affinity != nil && old.Spec.Affinity != nil:
			old.Spec.Affinity.NodeAffinity = t.Spec.Affinity.NodeAffinity
		}
		old.Spec.NodeSelector = maps.Clone(t.Spec.NodeSelector)
		old.Spec.Tolerations = slices.Clone(t.Spec.Tolerations)
		old.Labels = maps.Clone(t.Labels)
		old.Annotations = maps.Clone(t.Annotations)
	}
	if diff := templateChanges(ns.Template, old); len(diff) > 0 {
		errs = append(errs, Invalid("spec.template", omitted("field is immutable"), "changed: "+strings.Join(diff, ", ")))
	}
	return errs
}

// templateChanges names what differs between two pod templates.
func templateChanges(a, b PodTemplateSpec) []string {
	var out []string
	if !reflect.DeepEqual(emptyNil(a.Labels), emptyNil(b.Labels)) {
		out = append(out, "spec.template.metadata.labels")
	}
	if !reflect.DeepEqual(emptyNil(a.Annotations), emptyNil(b.Annotations)) {
		out = append(out, "spec.template.metadata.annotations")
	}
	for _, f := range changedFields(a.Spec, b.Spec) {
		out = append(out, "spec.template."+f)
	}
	return out
}

// omitted is an error's detail printed in place of the value, as
// Kubernetes' field.OmitValueType: "rules[0]: Invalid value: specifying ...".
type omitted string

func (o omitted) String() string { return string(o) }

// tooMany: a list over its size limit, worded as Kubernetes' field.TooMany.
func tooMany(field string, n, limit int) *FieldError {
	return &FieldError{Type: FieldTooMany, Field: field, Value: n, Detail: fmt.Sprintf("must have at most %d items", limit)}
}

// valueOf prints a pointer field's value in an error ("null" when unset).
func valueOf(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "null"
		}
		return rv.Elem().Interface()
	}
	return v
}
