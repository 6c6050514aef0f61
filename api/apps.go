package api

// Deployment declares a replicated, updatable set of pods. Its controller
// keeps one ReplicaSet per pod template (named by the template's hash) and
// moves pods from the old ReplicaSets to the new one by its strategy.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type Deployment struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired state.
	Spec DeploymentSpec `json:"spec,omitempty"`
	// Status is the observed state, written by the deployment controller.
	Status DeploymentStatus `json:"status,omitempty"`
}

// DeploymentSpec of a deployment.
type DeploymentSpec struct {
	// Replicas desired (default 1).
	Replicas *int32 `json:"replicas,omitempty"`
	// Selector must match Template's labels; it cannot change after create.
	Selector *LabelSelector `json:"selector"`
	// Template of the pods.
	Template PodTemplateSpec `json:"template"`
	// Strategy: RollingUpdate (default) or Recreate.
	Strategy DeploymentStrategy `json:"strategy,omitempty"`
	// MinReadySeconds a pod must be ready to count as available.
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`
	// RevisionHistoryLimit: old ReplicaSets kept for rollback (default 10).
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
	// Paused stops rollouts.
	Paused bool `json:"paused,omitempty"`
	// ProgressDeadlineSeconds before the rollout is reported as failed (default 600).
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
}

// DeploymentStrategy: how to replace old pods by new ones.
type DeploymentStrategy struct {
	// Type: RollingUpdate or Recreate.
	Type string `json:"type,omitempty"`
	// RollingUpdate parameters.
	RollingUpdate *RollingUpdateDeployment `json:"rollingUpdate,omitempty"`
}

// RollingUpdateDeployment bounds a rolling update.
type RollingUpdateDeployment struct {
	// MaxUnavailable: pods that may be unavailable during the update (number or percent, default 25%).
	MaxUnavailable *IntOrString `json:"maxUnavailable,omitempty"`
	// MaxSurge: pods above the desired count during the update (number or percent, default 25%).
	MaxSurge *IntOrString `json:"maxSurge,omitempty"`
}

// DeploymentStatus of a deployment.
type DeploymentStatus struct {
	// ObservedGeneration the controller has acted on.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Replicas: pods of all its ReplicaSets.
	Replicas int32 `json:"replicas,omitempty"`
	// UpdatedReplicas: pods of the newest template.
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`
	// ReadyReplicas: pods that are ready.
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// AvailableReplicas: ready for at least minReadySeconds.
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`
	// UnavailableReplicas: desired minus available.
	UnavailableReplicas int32 `json:"unavailableReplicas,omitempty"`
	// Conditions: Available, Progressing.
	Conditions []DeploymentCondition `json:"conditions,omitempty"`
	// CollisionCount is accepted for compatibility.
	CollisionCount *int32 `json:"collisionCount,omitempty"`
}

// DeploymentCondition is one condition of a deployment.
type DeploymentCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastUpdateTime     Time   `json:"lastUpdateTime,omitempty"`
	LastTransitionTime Time   `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

// ReplicaSet keeps a number of identical pods running.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type ReplicaSet struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired state.
	Spec ReplicaSetSpec `json:"spec,omitempty"`
	// Status is the observed state.
	Status ReplicaSetStatus `json:"status,omitempty"`
}

// ReplicaSetSpec of a replica set.
type ReplicaSetSpec struct {
	// Replicas desired (default 1).
	Replicas *int32 `json:"replicas,omitempty"`
	// MinReadySeconds a pod must be ready to count as available.
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`
	// Selector must match Template's labels.
	Selector *LabelSelector `json:"selector"`
	// Template of the pods.
	Template PodTemplateSpec `json:"template,omitempty"`
}

// ReplicaSetStatus of a replica set.
type ReplicaSetStatus struct {
	Replicas             int32 `json:"replicas"`
	FullyLabeledReplicas int32 `json:"fullyLabeledReplicas,omitempty"`
	ReadyReplicas        int32 `json:"readyReplicas,omitempty"`
	AvailableReplicas    int32 `json:"availableReplicas,omitempty"`
	ObservedGeneration   int64 `json:"observedGeneration,omitempty"`
}

// PodTemplateSpec is the pod a controller creates: metadata and spec.
type PodTemplateSpec struct {
	// Metadata of created pods (labels, annotations).
	ObjectMeta `json:"metadata,omitempty"`
	// Spec of created pods.
	Spec PodSpec `json:"spec,omitempty"`
}

// LabelSelector selects objects by label: all of MatchLabels and all of MatchExpressions.
type LabelSelector struct {
	// MatchLabels: key must equal value.
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// MatchExpressions: In, NotIn, Exists, DoesNotExist.
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorRequirement is one expression of a selector.
type LabelSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// Well-known labels and annotations of the apps controllers.
const (
	LabelPodTemplateHash   = "pod-template-hash"
	AnnotationRevision     = "deployment.kubernetes.io/revision"
	AnnotationRestartedAt  = "kubectl.kubernetes.io/restartedAt"
	AnnotationChangeCause  = "kubernetes.io/change-cause"
	AnnotationDesiredRepls = "deployment.kubernetes.io/desired-replicas"
	AnnotationMaxRepls     = "deployment.kubernetes.io/max-replicas"
)

// Scale is the scale subresource: GET/PUT deployments/NAME/scale.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type Scale struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	Spec       ScaleSpec   `json:"spec,omitempty"`
	Status     ScaleStatus `json:"status,omitempty"`
}

// ScaleSpec: desired replicas.
type ScaleSpec struct {
	Replicas int32 `json:"replicas,omitempty"`
}

// ScaleStatus: current replicas and selector.
type ScaleStatus struct {
	Replicas int32  `json:"replicas"`
	Selector string `json:"selector,omitempty"`
}
