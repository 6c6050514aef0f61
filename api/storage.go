package api

import (
	"slices"
	"strings"
)

// Storage: PersistentVolume, PersistentVolumeClaim (core/v1) and
// StorageClass (storage.k8s.io/v1), field for field as Kubernetes'.
//
// A PersistentVolumeClaim asks for storage ("1Gi, ReadWriteOnce, class
// local-path"); a PersistentVolume is a piece of storage (a directory of a
// node); the persistent volume controller binds one to the other
// (controlplane/controllers/persistentvolume.go). A StorageClass says who
// makes volumes for claims that no existing volume fits (its provisioner)
// and when: at once (Immediate) or once a pod uses the claim and the
// scheduler has picked its node (WaitForFirstConsumer). skiff's built-in
// provisioner is rancher.io/local-path, k3s's default: a directory under
// the node's data dir, and a volume with node affinity to that node
// (agent/localpath).

// PersistentVolume is a piece of storage in the cluster, made by an
// administrator or by a provisioner for a claim.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type PersistentVolume struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec: what the volume is and offers.
	Spec PersistentVolumeSpec `json:"spec,omitempty"`
	// Status: Pending, Available, Bound, Released or Failed.
	Status PersistentVolumeStatus `json:"status,omitempty"`
}

// PersistentVolumeSpec is the specification of a persistent volume.
type PersistentVolumeSpec struct {
	// Capacity: the volume's size, {storage: 1Gi}.
	Capacity ResourceList `json:"capacity,omitempty"`
	// HostPath: a directory of the node (any node, unless nodeAffinity
	// says which).
	HostPath *HostPathVolumeSource `json:"hostPath,omitempty"`
	// Local: a directory of one node; nodeAffinity is required.
	Local *LocalVolumeSource `json:"local,omitempty"`
	// AccessModes the volume can be mounted with: ReadWriteOnce,
	// ReadOnlyMany, ReadWriteMany, ReadWriteOncePod.
	AccessModes []string `json:"accessModes,omitempty"`
	// ClaimRef is the claim the volume is bound to (or reserved for).
	ClaimRef *ObjectReference `json:"claimRef,omitempty"`
	// PersistentVolumeReclaimPolicy: what happens when the claim is
	// deleted: Retain (default for volumes made by hand) keeps the volume
	// and its data (Released); Delete removes both.
	PersistentVolumeReclaimPolicy string `json:"persistentVolumeReclaimPolicy,omitempty"`
	// StorageClassName: the class the volume belongs to; only claims of
	// that class bind to it ("" = no class).
	StorageClassName string `json:"storageClassName,omitempty"`
	// VolumeMode: Filesystem (default); skiff has no raw block volumes.
	VolumeMode *string `json:"volumeMode,omitempty"`
	// NodeAffinity: the nodes the volume can be used from; pods using it
	// are scheduled there.
	NodeAffinity *VolumeNodeAffinity `json:"nodeAffinity,omitempty"`
}

// LocalVolumeSource is a directory mounted on one node.
type LocalVolumeSource struct {
	// Path: the full path of the directory on the node.
	Path string `json:"path"`
}

// VolumeNodeAffinity: the nodes a volume can be used from.
type VolumeNodeAffinity struct {
	// Required: the node must match one term.
	Required *NodeSelector `json:"required,omitempty"`
}

// PersistentVolumeStatus is the current state of a persistent volume.
type PersistentVolumeStatus struct {
	// Phase: Pending, Available, Bound, Released or Failed.
	Phase string `json:"phase,omitempty"`
	// Message: why the volume is in this phase, for humans.
	Message string `json:"message,omitempty"`
	// Reason: why, in one CamelCase word.
	Reason string `json:"reason,omitempty"`
	// LastPhaseTransitionTime: when the phase last changed.
	LastPhaseTransitionTime *Time `json:"lastPhaseTransitionTime,omitempty"`
}

// PersistentVolumeClaim is a user's request for storage.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type PersistentVolumeClaim struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec: what the claim asks for.
	Spec PersistentVolumeClaimSpec `json:"spec,omitempty"`
	// Status: Pending, Bound or Lost, and what the bound volume offers.
	Status PersistentVolumeClaimStatus `json:"status,omitempty"`
}

// PersistentVolumeClaimSpec: the storage a claim asks for.
type PersistentVolumeClaimSpec struct {
	// AccessModes the volume must offer (at least one).
	AccessModes []string `json:"accessModes,omitempty"`
	// Selector: only volumes with these labels may be bound.
	Selector *LabelSelector `json:"selector,omitempty"`
	// Resources: requests.storage is the minimum size.
	Resources VolumeResourceRequirements `json:"resources,omitempty"`
	// VolumeName: the volume bound (or to bind) to this claim.
	VolumeName string `json:"volumeName,omitempty"`
	// StorageClassName: the class of the volume; left out, the default
	// StorageClass's name is filled in; "" asks for a volume of no class.
	StorageClassName *string `json:"storageClassName,omitempty"`
	// VolumeMode: Filesystem (default).
	VolumeMode *string `json:"volumeMode,omitempty"`
}

// VolumeResourceRequirements: the storage a claim requests.
type VolumeResourceRequirements struct {
	// Limits: the most storage allowed.
	Limits ResourceList `json:"limits,omitempty"`
	// Requests: the least storage needed.
	Requests ResourceList `json:"requests,omitempty"`
}

// PersistentVolumeClaimStatus is the current state of a claim.
type PersistentVolumeClaimStatus struct {
	// Phase: Pending, Bound or Lost.
	Phase string `json:"phase,omitempty"`
	// AccessModes the bound volume offers.
	AccessModes []string `json:"accessModes,omitempty"`
	// Capacity of the bound volume.
	Capacity ResourceList `json:"capacity,omitempty"`
	// Conditions of the claim (resizing; skiff sets none).
	Conditions []PersistentVolumeClaimCondition `json:"conditions,omitempty"`
}

// PersistentVolumeClaimCondition is one condition of a claim.
type PersistentVolumeClaimCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastProbeTime      Time   `json:"lastProbeTime,omitempty"`
	LastTransitionTime Time   `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

// PersistentVolumeClaimVolumeSource: a pod volume backed by a claim.
type PersistentVolumeClaimVolumeSource struct {
	// ClaimName: the claim, in the pod's namespace.
	ClaimName string `json:"claimName"`
	// ReadOnly mounts the volume read-only in every container.
	ReadOnly bool `json:"readOnly,omitempty"`
}

// StorageClass describes a class of storage and who provisions it.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type StorageClass struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Provisioner makes the volumes of this class (rancher.io/local-path
	// is skiff's; kubernetes.io/no-provisioner: volumes are made by hand).
	Provisioner string `json:"provisioner"`
	// Parameters for the provisioner.
	Parameters map[string]string `json:"parameters,omitempty"`
	// ReclaimPolicy of the volumes it makes: Delete (default) or Retain.
	ReclaimPolicy *string `json:"reclaimPolicy,omitempty"`
	// AllowVolumeExpansion: whether claims may grow (not in skiff).
	AllowVolumeExpansion *bool `json:"allowVolumeExpansion,omitempty"`
	// VolumeBindingMode: Immediate (default) binds and provisions when the
	// claim is made; WaitForFirstConsumer waits until a pod uses the claim
	// and the scheduler has chosen its node.
	VolumeBindingMode *string `json:"volumeBindingMode,omitempty"`
	// AllowedTopologies: the nodes volumes may be provisioned for (empty:
	// any).
	AllowedTopologies []TopologySelectorTerm `json:"allowedTopologies,omitempty"`
}

// TopologySelectorTerm: node labels, all of which must match.
type TopologySelectorTerm struct {
	MatchLabelExpressions []TopologySelectorLabelRequirement `json:"matchLabelExpressions,omitempty"`
}

// TopologySelectorLabelRequirement: the label key must have one of values.
type TopologySelectorLabelRequirement struct {
	Key    string   `json:"key"`
	Values []string `json:"values"`
}

// Access modes, reclaim policies, phases and binding modes.
const (
	ReadWriteOnce    = "ReadWriteOnce"
	ReadOnlyMany     = "ReadOnlyMany"
	ReadWriteMany    = "ReadWriteMany"
	ReadWriteOncePod = "ReadWriteOncePod"

	ReclaimRetain  = "Retain"
	ReclaimDelete  = "Delete"
	ReclaimRecycle = "Recycle"

	VolumePending   = "Pending"
	VolumeAvailable = "Available"
	VolumeBound     = "Bound"
	VolumeReleased  = "Released"
	VolumeFailed    = "Failed"

	ClaimPending = "Pending"
	ClaimBound   = "Bound"
	ClaimLost    = "Lost"

	VolumeBindingImmediate            = "Immediate"
	VolumeBindingWaitForFirstConsumer = "WaitForFirstConsumer"

	PersistentVolumeFilesystem = "Filesystem"
	PersistentVolumeBlock      = "Block"

	// ResourceStorage is the resource a claim requests and a volume has.
	ResourceStorage = "storage"
)

// Annotations and finalizers of storage, as Kubernetes names them.
const (
	// AnnotationDefaultStorageClass marks the class claims without one get.
	AnnotationDefaultStorageClass = "storageclass.kubernetes.io/is-default-class"
	// AnnotationBetaStorageClass is the class a claim or volume names in
	// the annotation of before storageClassName (still honoured).
	AnnotationBetaStorageClass = "volume.beta.kubernetes.io/storage-class"
	// AnnotationSelectedNode: the node the scheduler picked for a
	// WaitForFirstConsumer claim; its provisioner makes the volume there.
	AnnotationSelectedNode = "volume.kubernetes.io/selected-node"
	// AnnotationStorageProvisioner (and its beta twin): the provisioner
	// the persistent volume controller expects to make the claim's volume.
	AnnotationStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	AnnotationBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	// AnnotationBindCompleted: the controller finished binding the claim.
	AnnotationBindCompleted = "pv.kubernetes.io/bind-completed"
	// AnnotationBoundByController: the controller (not the user) made the
	// binding, so it may undo it.
	AnnotationBoundByController = "pv.kubernetes.io/bound-by-controller"
	// AnnotationProvisionedBy: the provisioner that made a volume (it
	// deletes it too).
	AnnotationProvisionedBy = "pv.kubernetes.io/provisioned-by"

	// FinalizerPVCProtection keeps a claim a pod uses until the pod is gone.
	FinalizerPVCProtection = "kubernetes.io/pvc-protection"
	// FinalizerPVProtection keeps a bound volume until it is released.
	FinalizerPVProtection = "kubernetes.io/pv-protection"

	// LocalPathProvisioner is skiff's built-in provisioner's name (k3s's
	// local-path-provisioner's), and LocalPathStorageClass the default
	// class that uses it.
	LocalPathProvisioner  = "rancher.io/local-path"
	LocalPathStorageClass = "local-path"
	// NoProvisioner: a class whose volumes are made by hand.
	NoProvisioner = "kubernetes.io/no-provisioner"
)

// ClaimClass is the class a claim asks for: the beta annotation, else
// spec.storageClassName ("" for none), as Kubernetes'
// GetPersistentVolumeClaimClass.
func ClaimClass(c *PersistentVolumeClaim) string {
	if v, ok := c.Annotations[AnnotationBetaStorageClass]; ok {
		return v
	}
	if c.Spec.StorageClassName != nil {
		return *c.Spec.StorageClassName
	}
	return ""
}

// VolumeClass is the class of a volume: the beta annotation, else
// spec.storageClassName.
func VolumeClass(v *PersistentVolume) string {
	if c, ok := v.Annotations[AnnotationBetaStorageClass]; ok {
		return c
	}
	return v.Spec.StorageClassName
}

// IsDefaultClass reports whether a StorageClass is marked as the default.
func IsDefaultClass(sc *StorageClass) bool {
	return sc.Annotations[AnnotationDefaultStorageClass] == "true"
}

// BindingMode is a class's volumeBindingMode, Immediate when unset.
func BindingMode(sc *StorageClass) string {
	if sc == nil || sc.VolumeBindingMode == nil {
		return VolumeBindingImmediate
	}
	return *sc.VolumeBindingMode
}

// AccessModesString is kubectl's short form of access modes: RWO, ROX,
// RWX, RWOP, in that order, joined by commas.
func AccessModesString(modes []string) string {
	var out []string
	for _, m := range []struct{ mode, short string }{{ReadWriteOnce, "RWO"}, {ReadOnlyMany, "ROX"}, {ReadWriteMany, "RWX"}, {ReadWriteOncePod, "RWOP"}} {
		for _, have := range modes {
			if have == m.mode {
				out = append(out, m.short)
				break
			}
		}
	}
	return strings.Join(out, ",")
}

// ClaimsOf returns the names of the claims a pod's volumes use.
func ClaimsOf(pod *Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
}

// DefaultClass picks the default StorageClass among classes: of those
// marked default, the newest (then the first by name), as Kubernetes'
// DefaultStorageClass admission since 1.26; nil when none is marked.
func DefaultClass(classes []*StorageClass) *StorageClass {
	var def *StorageClass
	for _, sc := range classes {
		if !IsDefaultClass(sc) {
			continue
		}
		if def == nil || sc.CreationTimestamp.After(def.CreationTimestamp.Time) ||
			sc.CreationTimestamp.Equal(def.CreationTimestamp.Time) && sc.Name < def.Name {
			def = sc
		}
	}
	return def
}

// LocalPathClass is the default StorageClass skiff creates at start, as
// k3s ships it: rancher.io/local-path, WaitForFirstConsumer, Delete.
func LocalPathClass() *StorageClass {
	return &StorageClass{
		ObjectMeta:        ObjectMeta{Name: LocalPathStorageClass, Annotations: map[string]string{AnnotationDefaultStorageClass: "true"}},
		Provisioner:       LocalPathProvisioner,
		ReclaimPolicy:     ptr(ReclaimDelete),
		VolumeBindingMode: ptr(VolumeBindingWaitForFirstConsumer),
	}
}

// LocalPathNodeAffinity is the node affinity of a volume usable on node
// alone: kubernetes.io/hostname In [node].
func LocalPathNodeAffinity(node string) *VolumeNodeAffinity {
	return &VolumeNodeAffinity{Required: &NodeSelector{NodeSelectorTerms: []NodeSelectorTerm{{
		MatchExpressions: []NodeSelectorRequirement{{Key: LabelHostname, Operator: "In", Values: []string{node}}}}}}}
}

// IsLocalPathVolumeOf reports whether pv is one that node's local-path
// provisioner makes: annotated pv.kubernetes.io/provisioned-by
// rancher.io/local-path, with exactly LocalPathNodeAffinity(node).
func IsLocalPathVolumeOf(pv *PersistentVolume, node string) bool {
	if pv.Annotations[AnnotationProvisionedBy] != LocalPathProvisioner || pv.Spec.NodeAffinity == nil {
		return false
	}
	r := pv.Spec.NodeAffinity.Required
	if r == nil || len(r.NodeSelectorTerms) != 1 {
		return false
	}
	t := r.NodeSelectorTerms[0]
	if len(t.MatchFields) != 0 || len(t.MatchExpressions) != 1 {
		return false
	}
	e := t.MatchExpressions[0]
	return e.Key == LabelHostname && e.Operator == "In" && slices.Equal(e.Values, []string{node})
}
