package api

// PriorityClass maps a name to a scheduling priority (scheduling.k8s.io/v1).
// A pod names one in spec.priorityClassName; the API server copies its
// value into the pod's spec.priority when the pod is created, and the
// scheduler takes higher-priority pods first and may evict lower-priority
// pods to make room for them (preemption). The class marked globalDefault
// applies to pods that name none; with no default, their priority is 0.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type PriorityClass struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Value is the priority of pods of this class: higher is more important.
	// User classes may use up to 1000000000 (one billion); larger values are
	// reserved for the system classes (system-cluster-critical,
	// system-node-critical). Immutable.
	Value int32 `json:"value"`
	// GlobalDefault makes this the class of pods that name none. At most one
	// class may be the global default.
	GlobalDefault bool `json:"globalDefault,omitempty"`
	// Description: when to use this class, for people.
	Description string `json:"description,omitempty"`
	// PreemptionPolicy of pods of this class: PreemptLowerPriority (the
	// default) lets them evict lower-priority pods; Never makes them wait
	// for room instead. Immutable.
	PreemptionPolicy *string `json:"preemptionPolicy,omitempty"`
}

// Priority values and preemption policies, as Kubernetes
// (k8s.io/api/scheduling/v1 and pkg/apis/scheduling).
const (
	// HighestUserDefinablePriority is the largest value of a user's class.
	HighestUserDefinablePriority = 1000000000
	// SystemCriticalPriority is the base of the system classes.
	SystemCriticalPriority = 2 * HighestUserDefinablePriority
	// SystemClusterCritical and SystemNodeCritical are the built-in classes.
	SystemClusterCritical = "system-cluster-critical"
	SystemNodeCritical    = "system-node-critical"
	// SystemPriorityClassPrefix is reserved for the built-in classes.
	SystemPriorityClassPrefix = "system-"

	PreemptLowerPriority = "PreemptLowerPriority"
	PreemptNever         = "Never"
)

// SystemPriorityClasses are the built-in classes, with their Kubernetes
// values. The API server resolves their names even when no object exists.
func SystemPriorityClasses() []*PriorityClass {
	pol := PreemptLowerPriority
	return []*PriorityClass{
		{TypeMeta: TypeMeta{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"},
			ObjectMeta: ObjectMeta{Name: SystemNodeCritical}, Value: SystemCriticalPriority + 1000,
			Description: "Used for system critical pods that must not be moved from their current node.", PreemptionPolicy: &pol},
		{TypeMeta: TypeMeta{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"},
			ObjectMeta: ObjectMeta{Name: SystemClusterCritical}, Value: SystemCriticalPriority,
			Description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.", PreemptionPolicy: &pol},
	}
}
