package api

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults and validation of the storage kinds (storage.go), with
// Kubernetes' rules and words (pkg/apis/core/validation's
// ValidatePersistentVolume*, pkg/apis/storage/validation).

// defaultStorage: a volume made by hand is Retained, a class's volumes
// are Deleted; volumes are filesystems; a new volume or claim is Pending;
// a class binds Immediately unless it says otherwise.
func defaultStorage(obj Object) {
	switch o := obj.(type) {
	case *PersistentVolume:
		if o.Spec.PersistentVolumeReclaimPolicy == "" {
			o.Spec.PersistentVolumeReclaimPolicy = ReclaimRetain
		}
		if o.Spec.VolumeMode == nil {
			o.Spec.VolumeMode = ptr(PersistentVolumeFilesystem)
		}
		if o.Spec.HostPath != nil && o.Spec.HostPath.Type == nil {
			o.Spec.HostPath.Type = ptr("")
		}
		if o.Status.Phase == "" {
			o.Status.Phase = VolumePending
		}
	case *PersistentVolumeClaim:
		if o.Spec.VolumeMode == nil {
			o.Spec.VolumeMode = ptr(PersistentVolumeFilesystem)
		}
		if o.Status.Phase == "" {
			o.Status.Phase = ClaimPending
		}
	case *StorageClass:
		if o.ReclaimPolicy == nil {
			o.ReclaimPolicy = ptr(ReclaimDelete)
		}
		if o.VolumeBindingMode == nil {
			o.VolumeBindingMode = ptr(VolumeBindingImmediate)
		}
	}
}

func validateStorage(obj Object) FieldErrors {
	switch o := obj.(type) {
	case *PersistentVolume:
		errs := validateMeta(&o.ObjectMeta, false, isDNS1123Subdomain)
		errs = append(errs, validatePersistentVolumeSpec(&o.Spec)...)
		return append(errs, validatePhase("status.phase", o.Status.Phase, VolumePending, VolumeAvailable, VolumeBound, VolumeReleased, VolumeFailed)...)
	case *PersistentVolumeClaim:
		errs := validateMeta(&o.ObjectMeta, true, isDNS1123Subdomain)
		errs = append(errs, validateClaimSpec(&o.Spec, "spec")...)
		errs = append(errs, validateAccessModes(o.Status.AccessModes, "status.accessModes", false)...)
		return append(errs, validatePhase("status.phase", o.Status.Phase, ClaimPending, ClaimBound, ClaimLost)...)
	case *StorageClass:
		errs := validateMeta(&o.ObjectMeta, false, isDNS1123Subdomain)
		return append(errs, validateStorageClass(o)...)
	}
	return nil
}

func validatePhase(path, phase string, allowed ...string) FieldErrors {
	if phase == "" || slices.Contains(allowed, phase) {
		return nil
	}
	return FieldErrors{NotSupported(path, phase, allowed...)}
}

// validateAccessModes: known modes, ReadWriteOncePod alone, and (when
// required) at least one.
func validateAccessModes(modes []string, path string, required bool) FieldErrors {
	var errs FieldErrors
	if required && len(modes) == 0 {
		errs = append(errs, Required(path, "at least 1 access mode is required"))
	}
	for _, m := range modes {
		switch m {
		case ReadWriteOnce, ReadOnlyMany, ReadWriteMany, ReadWriteOncePod:
		default:
			errs = append(errs, NotSupported(path, m, ReadOnlyMany, ReadWriteMany, ReadWriteOnce, ReadWriteOncePod))
		}
	}
	if slices.Contains(modes, ReadWriteOncePod) && len(modes) > 1 {
		errs = append(errs, Forbidden(path, "may not use ReadWriteOncePod with other access modes"))
	}
	return errs
}

func validateVolumeMode(m *string, path string) FieldErrors {
	switch {
	case m == nil || *m == PersistentVolumeFilesystem:
		return nil
	case *m == PersistentVolumeBlock:
		return FieldErrors{Forbidden(path, "raw block volumes are not supported by skiff; use Filesystem")}
	}
	return FieldErrors{NotSupported(path, *m, PersistentVolumeBlock, PersistentVolumeFilesystem)}
}

func validateClassName(name, path string) FieldErrors {
	var errs FieldErrors
	for _, msg := range isDNS1123Subdomain(name) {
		errs = append(errs, Invalid(path, name, msg))
	}
	return errs
}

// positiveStorage: a size must be more than zero bytes.
func positiveStorage(q Quantity, path string) FieldErrors {
	errs := validateResourceQuantity(ResourceStorage, q, path)
	if len(errs) == 0 && q.Sign() <= 0 {
		errs = append(errs, Invalid(path, q.String(), "must be greater than zero"))
	}
	return errs
}

func validatePersistentVolumeSpec(s *PersistentVolumeSpec) FieldErrors {
	errs := validateAccessModes(s.AccessModes, "spec.accessModes", false)
	if len(s.AccessModes) == 0 {
		errs = append(errs, Required("spec.accessModes", ""))
	}
	if len(s.Capacity) == 0 {
		errs = append(errs, Required("spec.capacity", ""))
	}
	for _, name := range sortedKeys(s.Capacity) {
		if name != ResourceStorage {
			errs = append(errs, NotSupported("spec.capacity", name, ResourceStorage))
			continue
		}
		errs = append(errs, positiveStorage(s.Capacity[name], "spec.capacity["+name+"]")...)
	}
	n := 0
	if s.HostPath != nil {
		n++
		errs = append(errs, validatePVHostPath(s.HostPath, "spec.hostPath")...)
	}
	if s.Local != nil {
		n++
		if n > 1 {
			errs = append(errs, Forbidden("spec.local", "may not specify more than 1 volume type"))
		}
		if s.Local.Path == "" {
			errs = append(errs, Required("spec.local.path", ""))
		} else {
			errs = append(errs, noBacksteps(s.Local.Path, "spec.local.path")...)
		}
		if s.NodeAffinity == nil {
			errs = append(errs, Required("spec.nodeAffinity", "Local volume requires node affinity"))
		}
	}
	if n == 0 {
		errs = append(errs, Required("spec", "must specify a volume type"))
	}
	if a := s.NodeAffinity; a != nil {
		if a.Required == nil {
			errs = append(errs, Required("spec.nodeAffinity.required", "must specify required node constraints"))
		} else {
			errs = append(errs, validateNodeAffinity(&NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: a.Required}, "spec.nodeAffinity")...)
		}
	}
	switch p := s.PersistentVolumeReclaimPolicy; p {
	case "", ReclaimRetain, ReclaimDelete:
	default:
		errs = append(errs, NotSupported("spec.persistentVolumeReclaimPolicy", p, ReclaimDelete, ReclaimRetain))
	}
	if s.StorageClassName != "" {
		errs = append(errs, validateClassName(s.StorageClassName, "spec.storageClassName")...)
	}
	return append(errs, validateVolumeMode(s.VolumeMode, "spec.volumeMode")...)
}

func validatePVHostPath(h *HostPathVolumeSource, path string) FieldErrors {
	var errs FieldErrors
	if h.Path == "" {
		return append(errs, Required(path+".path", ""))
	}
	errs = append(errs, noBacksteps(h.Path, path+".path")...)
	if t := h.Type; t != nil {
		switch *t {
		case "", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice":
		default:
			errs = append(errs, NotSupported(path+".type", *t, "", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"))
		}
	}
	return errs
}

// noBacksteps: a node path may not climb out with "..".
func noBacksteps(p, path string) FieldErrors {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return FieldErrors{Invalid(path, p, "must not contain '..'")}
		}
	}
	return nil
}

func validateClaimSpec(s *PersistentVolumeClaimSpec, p string) FieldErrors {
	errs := validateAccessModes(s.AccessModes, p+".accessModes", true)
	if s.Selector != nil {
		errs = append(errs, validateLabelSelector(s.Selector, p+".selector")...)
	}
	storage, ok := s.Resources.Requests[ResourceStorage]
	if !ok {
		errs = append(errs, Required(p+".resources[storage]", ""))
	} else {
		errs = append(errs, positiveStorage(storage, p+".resources[storage]")...)
	}
	for _, list := range []struct {
		name string
		rl   ResourceList
	}{{"requests", s.Resources.Requests}, {"limits", s.Resources.Limits}} {
		for _, name := range sortedKeys(list.rl) {
			if name != ResourceStorage {
				errs = append(errs, NotSupported(p+".resources."+list.name, name, ResourceStorage))
			} else if list.name == "limits" {
				errs = append(errs, positiveStorage(list.rl[name], p+".resources.limits[storage]")...)
			}
		}
	}
	if c := s.StorageClassName; c != nil && *c != "" {
		errs = append(errs, validateClassName(*c, p+".storageClassName")...)
	}
	if s.VolumeName != "" {
		errs = append(errs, validateClassName(s.VolumeName, p+".volumeName")...)
	}
	return append(errs, validateVolumeMode(s.VolumeMode, p+".volumeMode")...)
}

func validateStorageClass(sc *StorageClass) FieldErrors {
	var errs FieldErrors
	if sc.Provisioner == "" {
		errs = append(errs, Required("provisioner", ""))
	} else {
		if len(sc.Provisioner) > 63 {
			errs = append(errs, TooLong("provisioner", 63))
		}
		for _, msg := range validation.IsQualifiedName(strings.ToLower(sc.Provisioner)) {
			errs = append(errs, Invalid("provisioner", sc.Provisioner, msg))
		}
	}
	if sc.Provisioner == LocalPathProvisioner && len(sc.Parameters) > 0 {
		errs = append(errs, Forbidden("parameters", "skiff's "+LocalPathProvisioner+" provisioner takes no parameters (volumes are directories under the node's data dir)"))
	}
	if len(sc.Parameters) > 512 {
		errs = append(errs, Invalid("parameters", len(sc.Parameters), "must have at most 512 items"))
	}
	if p := sc.ReclaimPolicy; p != nil && *p != ReclaimDelete && *p != ReclaimRetain {
		errs = append(errs, NotSupported("reclaimPolicy", *p, ReclaimDelete, ReclaimRetain))
	}
	if m := sc.VolumeBindingMode; m != nil && *m != VolumeBindingImmediate && *m != VolumeBindingWaitForFirstConsumer {
		errs = append(errs, NotSupported("volumeBindingMode", *m, VolumeBindingImmediate, VolumeBindingWaitForFirstConsumer))
	}
	if e := sc.AllowVolumeExpansion; e != nil && *e {
		errs = append(errs, Forbidden("allowVolumeExpansion", "volume expansion is not supported by skiff"))
	}
	for i, t := range sc.AllowedTopologies {
		tp := fmt.Sprintf("allowedTopologies[%d]", i)
		if len(t.MatchLabelExpressions) == 0 {
			errs = append(errs, Required(tp+".matchLabelExpressions", "must have at least one label expression"))
		}
		keys := map[string]bool{}
		for j, r := range t.MatchLabelExpressions {
			rp := fmt.Sprintf("%s.matchLabelExpressions[%d]", tp, j)
			for _, msg := range validation.IsQualifiedName(r.Key) {
				errs = append(errs, Invalid(rp+".key", r.Key, msg))
			}
			if keys[r.Key] {
				errs = append(errs, Duplicate(rp+".key", r.Key))
			}
			keys[r.Key] = true
			if len(r.Values) == 0 {
				errs = append(errs, Required(rp+".values", "must specify as least one value"))
			}
		}
	}
	return errs
}

// validateStorageUpdate: a volume's source, mode and node affinity are
// fixed; a claim's spec is fixed once made, except that an unbound claim's
// volumeName (binding) and missing class (a default class made later) may
// be filled in; a class's provisioner, parameters, reclaim
// policy and binding mode are fixed.
func validateStorageUpdate(n, o Object) FieldErrors {
	var errs FieldErrors
	switch n := n.(type) {
	case *PersistentVolume:
		o := o.(*PersistentVolume)
		if !reflect.DeepEqual(n.Spec.HostPath, o.Spec.HostPath) || !reflect.DeepEqual(n.Spec.Local, o.Spec.Local) {
			errs = append(errs, Forbidden("spec.persistentvolumesource", "spec.persistentvolumesource is immutable after creation"))
		}
		if !reflect.DeepEqual(n.Spec.VolumeMode, o.Spec.VolumeMode) {
			errs = append(errs, Invalid("spec.volumeMode", n.Spec.VolumeMode, "field is immutable"))
		}
		if o.Spec.NodeAffinity != nil && !reflect.DeepEqual(n.Spec.NodeAffinity, o.Spec.NodeAffinity) {
			errs = append(errs, Invalid("spec.nodeAffinity", "", "field is immutable"))
		}
	case *PersistentVolumeClaim:
		o := o.(*PersistentVolumeClaim)
		a, b := n.Spec, o.Spec
		if b.VolumeName == "" {
			a.VolumeName = "" // binding fills it in
			if b.StorageClassName == nil {
				a.StorageClassName = nil // so does a default class that came later
			}
		}
		if !quantitiesEqual(a.Resources.Requests, b.Resources.Requests) || !quantitiesEqual(a.Resources.Limits, b.Resources.Limits) {
			errs = append(errs, Forbidden("spec.resources.requests.storage", "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"))
		}
		a.Resources = b.Resources
		if !reflect.DeepEqual(a, b) {
			errs = append(errs, Forbidden("spec", "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"))
		}
	case *StorageClass:
		o := o.(*StorageClass)
		if !reflect.DeepEqual(emptyNil(n.Parameters), emptyNil(o.Parameters)) {
			errs = append(errs, Forbidden("parameters", "updates to parameters are forbidden."))
		}
		if n.Provisioner != o.Provisioner {
			errs = append(errs, Forbidden("provisioner", "updates to provisioner are forbidden."))
		}
		if !reflect.DeepEqual(n.ReclaimPolicy, o.ReclaimPolicy) {
			errs = append(errs, Forbidden("reclaimPolicy", "updates to reclaimPolicy are forbidden."))
		}
		if !reflect.DeepEqual(n.VolumeBindingMode, o.VolumeBindingMode) && o.VolumeBindingMode != nil {
			errs = append(errs, Invalid("volumeBindingMode", *o.VolumeBindingMode, "field is immutable"))
		}
	}
	return errs
}

// quantitiesEqual compares resource lists by value ("1Gi" equals "1024Mi").
func quantitiesEqual(a, b ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		if r, ok := b[k]; !ok || q.Cmp(r) != 0 {
			return false
		}
	}
	return true
}
