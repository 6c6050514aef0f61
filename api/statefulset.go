package api

import (
	"fmt"
	"reflect"
	"slices"
)

// StatefulSet (apps/v1) runs pods with a stable identity: pod NAME-0,
// NAME-1, ... each with its own PersistentVolumeClaims made from
// volumeClaimTemplates (TEMPLATE-NAME-ORDINAL, kept when the pod goes) and
// a stable DNS name under the headless Service serviceName
// (NAME-0.SERVICE.NS.svc.cluster.local). Its controller
// (controlplane/controllers/statefulset.go) starts them in order, each
// once the one before is Running and Ready (OrderedReady), or all at once
// (Parallel), and replaces them from the highest ordinal down.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type StatefulSet struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired state.
	Spec StatefulSetSpec `json:"spec,omitempty"`
	// Status is the observed state, written by the statefulset controller.
	Status StatefulSetStatus `json:"status,omitempty"`
}

// StatefulSetSpec of a stateful set.
type StatefulSetSpec struct {
	// Replicas desired (default 1).
	Replicas *int32 `json:"replicas,omitempty"`
	// Selector of the pods; it must match the template's labels and cannot change.
	Selector *LabelSelector `json:"selector"`
	// Template of the pods (restartPolicy Always).
	Template PodTemplateSpec `json:"template"`
	// VolumeClaimTemplates: one PersistentVolumeClaim per template and pod,
	// named TEMPLATE-NAME-ORDINAL and mounted as the volume TEMPLATE.
	VolumeClaimTemplates []PersistentVolumeClaim `json:"volumeClaimTemplates,omitempty"`
	// ServiceName of the headless Service that gives the pods their DNS
	// names (each pod's spec.subdomain).
	ServiceName string `json:"serviceName,omitempty"`
	// PodManagementPolicy: OrderedReady (default: one at a time, in
	// order) or Parallel.
	PodManagementPolicy string `json:"podManagementPolicy,omitempty"`
	// UpdateStrategy: RollingUpdate (default; partition keeps the pods
	// below that ordinal at the old revision) or OnDelete.
	UpdateStrategy StatefulSetUpdateStrategy `json:"updateStrategy,omitempty"`
	// RevisionHistoryLimit: old ControllerRevisions kept (default 10).
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
	// MinReadySeconds a pod must be ready to count as available.
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`
	// PersistentVolumeClaimRetentionPolicy: what happens to the claims
	// when the set is deleted (whenDeleted) or scaled down (whenScaled):
	// Retain (default) or Delete.
	PersistentVolumeClaimRetentionPolicy *StatefulSetPersistentVolumeClaimRetentionPolicy `json:"persistentVolumeClaimRetentionPolicy,omitempty"`
	// Ordinals: the first ordinal (default 0).
	Ordinals *StatefulSetOrdinals `json:"ordinals,omitempty"`
}

// StatefulSetUpdateStrategy says how pods of an old revision are replaced.
type StatefulSetUpdateStrategy struct {
	// Type: RollingUpdate or OnDelete.
	Type string `json:"type,omitempty"`
	// RollingUpdate parameters.
	RollingUpdate *RollingUpdateStatefulSetStrategy `json:"rollingUpdate,omitempty"`
}

// RollingUpdateStatefulSetStrategy: the partition of a rolling update.
type RollingUpdateStatefulSetStrategy struct {
	// Partition: pods with an ordinal at or above it are updated; the
	// others keep the current revision (default 0: all).
	Partition *int32 `json:"partition,omitempty"`
}

// StatefulSetPersistentVolumeClaimRetentionPolicy: Retain or Delete.
type StatefulSetPersistentVolumeClaimRetentionPolicy struct {
	// WhenDeleted: the claims when the StatefulSet is deleted.
	WhenDeleted string `json:"whenDeleted,omitempty"`
	// WhenScaled: the claims of the pods a scale-down removes.
	WhenScaled string `json:"whenScaled,omitempty"`
}

// StatefulSetOrdinals numbers the pods.
type StatefulSetOrdinals struct {
	// Start is the first ordinal.
	Start int32 `json:"start"`
}

// StatefulSetStatus is what the controller observed.
type StatefulSetStatus struct {
	// ObservedGeneration the controller has acted on.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Replicas: pods created (and not gone).
	Replicas int32 `json:"replicas"`
	// ReadyReplicas: pods Running and Ready.
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// CurrentReplicas: pods of currentRevision.
	CurrentReplicas int32 `json:"currentReplicas,omitempty"`
	// UpdatedReplicas: pods of updateRevision.
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`
	// CurrentRevision: the revision the pods below the partition run.
	CurrentRevision string `json:"currentRevision,omitempty"`
	// UpdateRevision: the revision of the current template.
	UpdateRevision string `json:"updateRevision,omitempty"`
	// CollisionCount counts revision name collisions.
	CollisionCount *int32 `json:"collisionCount,omitempty"`
	// Conditions are accepted for compatibility; the controller sets none.
	Conditions []StatefulSetCondition `json:"conditions,omitempty"`
	// AvailableReplicas: ready for minReadySeconds.
	AvailableReplicas int32 `json:"availableReplicas"`
}

// StatefulSetCondition is one condition of a stateful set.
type StatefulSetCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastTransitionTime Time   `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

// StatefulSet names: pod management, retention, labels.
const (
	OrderedReadyPodManagement = "OrderedReady"
	ParallelPodManagement     = "Parallel"
	RetainPVC                 = "Retain"
	DeletePVC                 = "Delete"
	// LabelStatefulSetPodName on each pod: its own name (a Service can
	// select one pod of a set).
	LabelStatefulSetPodName = "statefulset.kubernetes.io/pod-name"
	// LabelPodIndex on each pod of a StatefulSet (and an Indexed Job): its ordinal.
	LabelPodIndex = "apps.kubernetes.io/pod-index"
)

func defaultStatefulSet(s *StatefulSet) {
	sp := &s.Spec
	if sp.PodManagementPolicy == "" {
		sp.PodManagementPolicy = OrderedReadyPodManagement
	}
	if sp.UpdateStrategy.Type == "" {
		sp.UpdateStrategy.Type = RollingUpdate
		if sp.UpdateStrategy.RollingUpdate == nil {
			sp.UpdateStrategy.RollingUpdate = &RollingUpdateStatefulSetStrategy{}
		}
	}
	if ru := sp.UpdateStrategy.RollingUpdate; sp.UpdateStrategy.Type == RollingUpdate && ru != nil && ru.Partition == nil {
		ru.Partition = ptr[int32](0)
	}
	if sp.PersistentVolumeClaimRetentionPolicy == nil {
		sp.PersistentVolumeClaimRetentionPolicy = &StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if p := sp.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted == "" {
		p.WhenDeleted = RetainPVC
	}
	if p := sp.PersistentVolumeClaimRetentionPolicy; p.WhenScaled == "" {
		p.WhenScaled = RetainPVC
	}
	if sp.Replicas == nil {
		sp.Replicas = ptr[int32](1)
	}
	if sp.RevisionHistoryLimit == nil {
		sp.RevisionHistoryLimit = ptr[int32](DefaultRevisionHistoryLimit)
	}
	for i := range sp.VolumeClaimTemplates {
		SetDefaults(&sp.VolumeClaimTemplates[i])
	}
	defaultPodSpec(&sp.Template.Spec)
}

// validateStatefulSet is Kubernetes' ValidateStatefulSet: its rules and
// words. The pod template is validated as its pods will be: with a volume
// for each claim template.
func validateStatefulSet(s *StatefulSet) FieldErrors {
	errs := validateMeta(&s.ObjectMeta, true, isDNS1123Label)
	sp := &s.Spec
	switch sp.PodManagementPolicy {
	case "", OrderedReadyPodManagement, ParallelPodManagement:
	default:
		errs = append(errs, Invalid("spec.podManagementPolicy", sp.PodManagementPolicy, fmt.Sprintf("must be '%s' or '%s'", OrderedReadyPodManagement, ParallelPodManagement)))
	}
	switch sp.UpdateStrategy.Type {
	case "":
	case OnDelete:
		if sp.UpdateStrategy.RollingUpdate != nil {
			errs = append(errs, Invalid("spec.updateStrategy.rollingUpdate", "<value omitted>", fmt.Sprintf("only allowed for updateStrategy '%s'", RollingUpdate)))
		}
	case RollingUpdate:
		if ru := sp.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
			errs = append(errs, nonNegative(int64(*ru.Partition), "spec.updateStrategy.rollingUpdate.partition")...)
		}
	default:
		errs = append(errs, Invalid("spec.updateStrategy", sp.UpdateStrategy.Type, fmt.Sprintf("must be '%s' or '%s'", RollingUpdate, OnDelete)))
	}
	if p := sp.PersistentVolumeClaimRetentionPolicy; p != nil {
		for _, f := range [][2]string{{p.WhenDeleted, "whenDeleted"}, {p.WhenScaled, "whenScaled"}} {
			if f[0] != "" && f[0] != RetainPVC && f[0] != DeletePVC {
				errs = append(errs, NotSupported("spec.persistentVolumeClaimRetentionPolicy."+f[1], f[0], RetainPVC, DeletePVC))
			}
		}
	}
	errs = append(errs, validateReplicas(sp.Replicas, "spec.replicas")...)
	errs = append(errs, nonNegative(int64(sp.MinReadySeconds), "spec.minReadySeconds")...)
	if sp.RevisionHistoryLimit != nil {
		errs = append(errs, nonNegative(int64(*sp.RevisionHistoryLimit), "spec.revisionHistoryLimit")...)
	}
	if sp.Ordinals != nil {
		errs = append(errs, nonNegative(int64(sp.Ordinals.Start), "spec.ordinals.start")...)
	}
	if sp.ServiceName != "" {
		for _, msg := range isDNS1123Label(sp.ServiceName) {
			errs = append(errs, Invalid("spec.serviceName", sp.ServiceName, msg))
		}
	}
	errs = append(errs, validateClaimTemplates(sp.VolumeClaimTemplates)...)
	// The pods' volumes: the template's and one per claim template.
	withClaims := Clone(&StatefulSet{Spec: StatefulSetSpec{Template: sp.Template}}).Spec.Template
	for _, c := range sp.VolumeClaimTemplates {
		if !slices.ContainsFunc(withClaims.Spec.Volumes, func(v Volume) bool { return v.Name == c.Name }) {
			withClaims.Spec.Volumes = append(withClaims.Spec.Volumes, Volume{Name: c.Name,
				PersistentVolumeClaim: &PersistentVolumeClaimVolumeSource{ClaimName: c.Name + "-" + s.Name + "-0"}})
		}
	}
	return append(errs, validateWorkloadTemplate(sp.Selector, &withClaims, "spec", "statefulset", "StatefulSet")...)
}

// validateClaimTemplates checks each claim template as the claim it makes.
func validateClaimTemplates(ts []PersistentVolumeClaim) FieldErrors {
	var errs FieldErrors
	seen := map[string]bool{}
	for i := range ts {
		p := fmt.Sprintf("spec.volumeClaimTemplates[%d]", i)
		c := Clone(&ts[i])
		if c.Namespace == "" {
			c.Namespace = "default" // the set's, at create; templates carry none
		}
		if seen[c.Name] {
			errs = append(errs, Duplicate(p+".metadata.name", c.Name))
		}
		seen[c.Name] = true
		for _, e := range Validate(c) {
			e.Field = p + "." + e.Field
			errs = append(errs, e)
		}
	}
	return errs
}

// validateStatefulSetUpdate: only replicas, ordinals, template,
// updateStrategy, persistentVolumeClaimRetentionPolicy and minReadySeconds
// may change (Kubernetes' words).
func validateStatefulSetUpdate(n, o *StatefulSet) FieldErrors {
	a, b := n.Spec, o.Spec
	a.Replicas, a.Template, a.UpdateStrategy, a.MinReadySeconds, a.Ordinals, a.PersistentVolumeClaimRetentionPolicy =
		b.Replicas, b.Template, b.UpdateStrategy, b.MinReadySeconds, b.Ordinals, b.PersistentVolumeClaimRetentionPolicy
	if !reflect.DeepEqual(normalizeForCompare(a), normalizeForCompare(b)) {
		return FieldErrors{Forbidden("spec", "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden")}
	}
	return nil
}

// normalizeForCompare is s after a JSON round trip (nil and empty alike).
func normalizeForCompare(s StatefulSetSpec) StatefulSetSpec {
	return Clone(&StatefulSet{Spec: s}).Spec
}
