package api

// Eviction asks for a pod to be evicted: POST pods/NAME/eviction
// (policy/v1), as `kubectl drain` does. skiff has no PodDisruptionBudgets,
// so an eviction is the pod's graceful delete with DeleteOptions.
type Eviction struct {
	TypeMeta `json:",inline"`
	// ObjectMeta names the pod (name and namespace); they must be the URL's.
	ObjectMeta `json:"metadata,omitempty"`
	// DeleteOptions of the pod's delete: gracePeriodSeconds, preconditions,
	// dryRun.
	DeleteOptions *DeleteOptions `json:"deleteOptions,omitempty"`
}
