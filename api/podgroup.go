package api

// PodGroup is a gang of pods that run together or not at all
// (scheduling.x-k8s.io/v1alpha1, the Coscheduling plugin of
// kubernetes-sigs/scheduler-plugins, whose CRD this copies field for field).
// Pods join a group with the label scheduling.x-k8s.io/pod-group: NAME in
// the group's namespace. The scheduler holds each member at its Permit
// extension point, assumed on its node, until spec.minMember members are
// placed, then binds them together; if that does not happen within
// spec.scheduleTimeoutSeconds, every waiting member is rejected and its
// room freed. The podgroup controller keeps status up to date.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type PodGroup struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec: the desired behavior of the pod group.
	Spec PodGroupSpec `json:"spec,omitempty"`
	// Status: the current information about a pod group; it may not be up to date.
	Status PodGroupStatus `json:"status,omitempty"`
}

// PodGroupSpec represents the template of a pod group.
type PodGroupSpec struct {
	// MinMember defines the minimal number of members/tasks to run the pod
	// group; if there's not enough resources to start all tasks, the
	// scheduler will not start any. The minimum is 1 (left out: no gang).
	MinMember int32 `json:"minMember,omitempty"`
	// MinResources defines the minimal resource of members/tasks to run
	// the pod group; if there's not enough resources to start all tasks,
	// the scheduler will not start any.
	MinResources ResourceList `json:"minResources,omitempty"`
	// ScheduleTimeoutSeconds defines the maximal time of members/tasks to
	// wait before run the pod group (default 60, the plugin's
	// permitWaitingTimeSeconds).
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// PodGroupStatus represents the current state of a pod group.
type PodGroupStatus struct {
	// Phase: current phase of PodGroup.
	Phase string `json:"phase,omitempty"`
	// OccupiedBy marks the workload (e.g., deployment, statefulset) UID
	// that occupy the podgroup. It is empty if not initialized.
	OccupiedBy string `json:"occupiedBy,omitempty"`
	// Running: the number of actively running pods.
	Running int32 `json:"running,omitempty"`
	// Succeeded: the number of pods which reached phase Succeeded.
	Succeeded int32 `json:"succeeded,omitempty"`
	// Failed: the number of pods which reached phase Failed.
	Failed int32 `json:"failed,omitempty"`
	// ScheduleStartTime of the group.
	ScheduleStartTime Time `json:"scheduleStartTime,omitempty"`
}

// PodGroup phases and the pod label, as scheduler-plugins' v1alpha1.
const (
	// PodGroupPending: accepted, but fewer than minMember pods exist yet.
	PodGroupPending = "Pending"
	// PodGroupScheduling: minMember pods exist, fewer than minMember run.
	PodGroupScheduling = "Scheduling"
	// PodGroupRunning: at least minMember pods are running (or succeeded).
	PodGroupRunning = "Running"
	// PodGroupUnknown: part of minMember is scheduled, the rest cannot be.
	PodGroupUnknown = "Unknown"
	// PodGroupFinished: minMember pods succeeded.
	PodGroupFinished = "Finished"
	// PodGroupFailed: at least one of minMember pods failed.
	PodGroupFailed = "Failed"

	// LabelPodGroup joins a pod to the PodGroup it names.
	LabelPodGroup = "scheduling.x-k8s.io/pod-group"
	// DefaultPodGroupTimeoutSeconds is the plugin's default
	// permitWaitingTimeSeconds.
	DefaultPodGroupTimeoutSeconds = 60
)

// PodGroupOf returns the name of the pod group a pod belongs to, or "".
func PodGroupOf(pod *Pod) string { return pod.Labels[LabelPodGroup] }

// validatePodGroup: the CRD's schema (minMember at least 1 when given),
// quantities as everywhere, and a timeout that is not negative.
func validatePodGroup(pg *PodGroup) FieldErrors {
	errs := validateMeta(&pg.ObjectMeta, true, isDNS1123Subdomain)
	if pg.Spec.MinMember < 0 {
		errs = append(errs, Invalid("spec.minMember", pg.Spec.MinMember, "spec.minMember in body should be greater than or equal to 1"))
	}
	for _, name := range sortedKeys(pg.Spec.MinResources) {
		errs = append(errs, validateResourceQuantity(name, pg.Spec.MinResources[name], "spec.minResources["+name+"]")...)
	}
	if t := pg.Spec.ScheduleTimeoutSeconds; t != nil {
		errs = append(errs, nonNegative(int64(*t), "spec.scheduleTimeoutSeconds")...)
	}
	switch p := pg.Status.Phase; p {
	case "", PodGroupPending, PodGroupScheduling, PodGroupRunning, PodGroupUnknown, PodGroupFinished, PodGroupFailed:
	default:
		errs = append(errs, NotSupported("status.phase", p, PodGroupPending, PodGroupScheduling, PodGroupRunning, PodGroupUnknown, PodGroupFinished, PodGroupFailed))
	}
	return errs
}
