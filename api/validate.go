package api

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Validation follows Kubernetes' (pkg/apis/core/validation and
// pkg/apis/apps/validation) in rules and in wording, so the messages
// students read are the ones they will meet on a real cluster. Fields that
// are defaulted may be empty here: Validate can run before SetDefaults (in
// the CLI) as well as after it (in the API server).

// Validate checks an object and returns every problem with its field path.
func Validate(obj Object) FieldErrors {
	var errs FieldErrors
	switch o := obj.(type) {
	case *Namespace:
		errs = append(errs, validateMeta(&o.ObjectMeta, false, isDNS1123Label)...)
		if p := o.Status.Phase; p != "" && p != NamespaceActive && p != NamespaceTerminating {
			errs = append(errs, NotSupported("status.phase", p, NamespaceActive, NamespaceTerminating))
		}
	case *ConfigMap:
		errs = append(errs, validateMeta(&o.ObjectMeta, true, isDNS1123Subdomain)...)
		errs = append(errs, validateConfigMap(o)...)
	case *Secret:
		errs = append(errs, validateMeta(&o.ObjectMeta, true, isDNS1123Subdomain)...)
		errs = append(errs, validateSecret(o)...)
	case *Pod:
		errs = append(errs, validateMeta(&o.ObjectMeta, true, isDNS1123Subdomain)...)
		errs = append(errs, validatePodSpec(&o.Spec, "spec")...)
		errs = append(errs, validateSimulatedProbeFailure(o.Annotations, "")...)
	case *Deployment:
		errs = append(errs, validateMeta(&o.ObjectMeta, true, isDNS1123Subdomain)...)
		errs = append(errs, validateDeploymentSpec(&o.Spec)...)
	case *ReplicaSet:
		errs = append(errs, validateMeta(&o.ObjectMeta, true, isDNS1123Subdomain)...)
		errs = append(errs, validateReplicas(o.Spec.Replicas, "spec.replicas")...)
		errs = append(errs, nonNegative(int64(o.Spec.MinReadySeconds), "spec.minReadySeconds")...)
		errs = append(errs, validateSelectorAndTemplate(o.Spec.Selector, &o.Spec.Template, "spec")...)
	case *DaemonSet:
		errs = append(errs, validateDaemonSet(o)...) // daemonset.go
	case *ControllerRevision:
		errs = append(errs, validateControllerRevision(o)...) // daemonset.go
	case *StatefulSet:
		errs = append(errs, validateStatefulSet(o)...) // statefulset.go
	case *Job:
		errs = append(errs, validateJob(o)...) // batch.go
	case *CronJob:
		errs = append(errs, validateCronJob(o)...) // cronjob.go
	case *HorizontalPodAutoscaler:
		errs = append(errs, validateHPA(o)...) // hpa.go
	case *PodDisruptionBudget:
		errs = append(errs, validatePodDisruptionBudget(o)...) // policy.go
	case *Service:
		// Service names become DNS names of the cluster: RFC 1035 labels.
		errs = append(errs, validateMeta(&o.ObjectMeta, true, validation.IsDNS1035Label)...)
		errs = append(errs, validateServiceSpec(&o.Spec)...)
	case *Endpoints:
		errs = append(errs, validateMeta(&o.ObjectMeta, true, validation.IsDNS1035Label)...)
		errs = append(errs, validateEndpoints(o)...)
	case *Node:
		errs = append(errs, validateMeta(&o.ObjectMeta, false, isDNS1123Subdomain)...)
		for i, t := range o.Spec.Taints {
			errs = append(errs, validateTaint(t, fmt.Sprintf("spec.taints[%d]", i))...)
		}
		for _, name := range sortedKeys(o.Status.Capacity) {
			errs = append(errs, validateResourceQuantity(name, o.Status.Capacity[name], "status.capacity["+name+"]")...)
		}
		for _, name := range sortedKeys(o.Status.Allocatable) {
			errs = append(errs, validateResourceQuantity(name, o.Status.Allocatable[name], "status.allocatable["+name+"]")...)
		}
	case *ServiceAccount:
		errs = append(errs, validateServiceAccount(o)...)
	case *PriorityClass:
		errs = append(errs, validatePriorityClass(o)...)
	case *Lease:
		errs = append(errs, validateLease(o)...)
	case *EndpointSlice:
		errs = append(errs, validateEndpointSlice(o)...)
	case *DeviceClass, *ResourceClaim, *ResourceClaimTemplate, *ResourceSlice:
		errs = append(errs, validateResourceObject(o)...) // validate_resource.go
	case *PodGroup:
		errs = append(errs, validatePodGroup(o)...) // podgroup.go
	case *PersistentVolume, *PersistentVolumeClaim, *StorageClass:
		errs = append(errs, validateStorage(o)...) // validate_storage.go
	case *CertificateSigningRequest:
		errs = append(errs, validateCSR(o)...) // certificates.go
	case *Role:
		errs = append(errs, validateRole(o)...) // rbac.go
	case *ClusterRole:
		errs = append(errs, validateClusterRole(o)...)
	case *RoleBinding:
		errs = append(errs, validateBinding(&o.ObjectMeta, true, o.RoleRef, o.Subjects)...)
	case *ClusterRoleBinding:
		errs = append(errs, validateBinding(&o.ObjectMeta, false, o.RoleRef, o.Subjects)...)
	case *ResourceQuota:
		errs = append(errs, validateResourceQuota(o)...) // validate_quota.go
	case *LimitRange:
		errs = append(errs, validateLimitRange(o)...)
	case *ResourceFlavor, *ClusterQueue, *LocalQueue, *Workload, *Topology:
		errs = append(errs, validateKueue(o)...) // validate_kueue.go
	case *Event:
		errs = append(errs, validateMeta(&o.ObjectMeta, true, isDNS1123Subdomain)...)
		if t := o.Type; t != "" && t != EventNormal && t != EventWarning {
			errs = append(errs, NotSupported("type", t, EventNormal, EventWarning))
		}
		if o.InvolvedObject.Kind == "" {
			errs = append(errs, Required("involvedObject.kind", ""))
		}
		if o.InvolvedObject.Name == "" {
			errs = append(errs, Required("involvedObject.name", ""))
		}
	default:
		errs = append(errs, validateMeta(obj.GetObjectMeta(), true, isDNS1123Subdomain)...)
	}
	return errs
}

// ValidateCreate is what only a create must satisfy (after Validate): a
// pod's ephemeral containers come later, through their subresource.
func ValidateCreate(obj Object) FieldErrors {
	if p, ok := obj.(*Pod); ok && len(p.Spec.EphemeralContainers) > 0 {
		return FieldErrors{Forbidden("spec.ephemeralContainers", "cannot be set on create")}
	}
	return nil
}

// ValidateEphemeralContainersUpdate is Kubernetes' rule for the
// pods/ephemeralcontainers subresource: ephemeral containers are only
// added, never removed or changed.
func ValidateEphemeralContainersUpdate(n, o *Pod) FieldErrors {
	var errs FieldErrors
	byName := map[string]int{}
	for i, ec := range n.Spec.EphemeralContainers {
		byName[ec.Name] = i
	}
	for _, old := range o.Spec.EphemeralContainers {
		i, ok := byName[old.Name]
		switch {
		case !ok:
			errs = append(errs, Forbidden("spec", fmt.Sprintf("existing ephemeral containers %q may not be removed\n", old.Name)))
		case !reflect.DeepEqual(old, n.Spec.EphemeralContainers[i]):
			errs = append(errs, Forbidden(fmt.Sprintf("spec.ephemeralContainers[%d]", i), fmt.Sprintf("existing ephemeral containers %q may not be changed\n", old.Name)))
		}
	}
	return errs
}

// ValidateUpdate checks an update against the stored object (immutable
// fields such as a Deployment's selector or a Pod's spec) plus Validate.
//
// The API server must carry over what a client may leave out before
// calling it, as Kubernetes' apply does: uid, spec.nodeName of a bound
// pod, an allocated spec.clusterIP and nodePorts.
func ValidateUpdate(newObj, oldObj Object) FieldErrors { return validateUpdate(newObj, oldObj, false) }

// ValidateStatusUpdate is ValidateUpdate of a write through the status
// subresource: newObj is oldObj with another status (the API server
// copies the rest from the stored object), so a pod's spec, which only a
// spec write could change, is not compared field by field again, as
// Kubernetes' status strategy does not.
func ValidateStatusUpdate(newObj, oldObj Object) FieldErrors {
	return validateUpdate(newObj, oldObj, true)
}

func validateUpdate(newObj, oldObj Object, status bool) FieldErrors {
	if reflect.TypeOf(newObj) != reflect.TypeOf(oldObj) {
		return FieldErrors{Invalid("kind", newObj.GetTypeMeta().Kind, fmt.Sprintf("may not change from %s", oldObj.GetTypeMeta().Kind))}
	}
	var errs FieldErrors
	nm, om := newObj.GetObjectMeta(), oldObj.GetObjectMeta()
	if nm.Name != om.Name {
		errs = append(errs, Invalid("metadata.name", nm.Name, "field is immutable"))
	}
	if nm.Namespace != om.Namespace {
		errs = append(errs, Invalid("metadata.namespace", nm.Namespace, "field is immutable"))
	}
	if nm.UID != "" && nm.UID != om.UID {
		errs = append(errs, Invalid("metadata.uid", nm.UID, "field is immutable"))
	}
	switch n := newObj.(type) {
	case *Deployment:
		o := oldObj.(*Deployment)
		if !selectorsEqual(n.Spec.Selector, o.Spec.Selector) {
			errs = append(errs, Invalid("spec.selector", selectorValue(n.Spec.Selector), "field is immutable"))
		}
	case *ReplicaSet:
		o := oldObj.(*ReplicaSet)
		if !selectorsEqual(n.Spec.Selector, o.Spec.Selector) {
			errs = append(errs, Invalid("spec.selector", selectorValue(n.Spec.Selector), "field is immutable"))
		}
	case *Pod:
		if !status {
			errs = append(errs, validatePodSpecUpdate(&n.Spec, &oldObj.(*Pod).Spec)...)
		}
	case *DaemonSet:
		errs = append(errs, validateDaemonSetUpdate(n, oldObj.(*DaemonSet))...) // daemonset.go
	case *ControllerRevision:
		errs = append(errs, validateControllerRevisionUpdate(n, oldObj.(*ControllerRevision))...) // daemonset.go
	case *StatefulSet:
		errs = append(errs, validateStatefulSetUpdate(n, oldObj.(*StatefulSet))...) // statefulset.go
	case *Job:
		errs = append(errs, validateJobUpdate(n, oldObj.(*Job))...) // batch.go
	case *PriorityClass:
		errs = append(errs, validatePriorityClassUpdate(n, oldObj.(*PriorityClass))...)
	case *CertificateSigningRequest:
		errs = append(errs, validateCSRUpdate(n, oldObj.(*CertificateSigningRequest))...) // certificates.go
	case *RoleBinding:
		errs = append(errs, validateBindingUpdate(n.RoleRef, oldObj.(*RoleBinding).RoleRef)...) // rbac.go
	case *ClusterRoleBinding:
		errs = append(errs, validateBindingUpdate(n.RoleRef, oldObj.(*ClusterRoleBinding).RoleRef)...)
	case *ResourceFlavor, *LocalQueue, *Workload, *Topology:
		errs = append(errs, validateKueueUpdate(n, oldObj)...) // validate_kueue.go
	case *ResourceClaim, *ResourceClaimTemplate:
		errs = append(errs, validateResourceUpdate(n, oldObj)...) // validate_resource.go
	case *PersistentVolume, *PersistentVolumeClaim, *StorageClass:
		errs = append(errs, validateStorageUpdate(n, oldObj)...) // validate_storage.go
	case *ResourceQuota:
		errs = append(errs, validateResourceQuotaUpdate(n, oldObj.(*ResourceQuota))...) // validate_quota.go
	case *EndpointSlice:
		if o := oldObj.(*EndpointSlice); n.AddressType != o.AddressType {
			errs = append(errs, Invalid("addressType", n.AddressType, "field is immutable"))
		}
	case *ConfigMap:
		o := oldObj.(*ConfigMap)
		if o.Immutable != nil && *o.Immutable {
			if n.Immutable == nil || !*n.Immutable {
				errs = append(errs, Forbidden("immutable", "field is immutable when `immutable` is set"))
			}
			if !reflect.DeepEqual(emptyNil(n.Data), emptyNil(o.Data)) {
				errs = append(errs, Forbidden("data", "field is immutable when `immutable` is set"))
			}
			if !reflect.DeepEqual(emptyNil(n.BinaryData), emptyNil(o.BinaryData)) {
				errs = append(errs, Forbidden("binaryData", "field is immutable when `immutable` is set"))
			}
		}
	case *Secret:
		o := oldObj.(*Secret)
		if n.Type != o.Type && n.Type != "" {
			errs = append(errs, Invalid("type", n.Type, "field is immutable"))
		}
		if o.Immutable != nil && *o.Immutable {
			if n.Immutable == nil || !*n.Immutable {
				errs = append(errs, Forbidden("immutable", "field is immutable when `immutable` is set"))
			}
			if !reflect.DeepEqual(emptyNil(n.Data), emptyNil(o.Data)) || len(n.StringData) > 0 {
				errs = append(errs, Forbidden("data", "field is immutable when `immutable` is set"))
			}
		}
	case *Service:
		o := oldObj.(*Service)
		if n.Spec.ClusterIP != "" && o.Spec.ClusterIP != "" && n.Spec.ClusterIP != o.Spec.ClusterIP {
			errs = append(errs, Invalid("spec.clusterIP", n.Spec.ClusterIP, "field is immutable"))
		}
	}
	return append(errs, Validate(newObj)...)
}

func emptyNil[V any](m map[string]V) map[string]V {
	if len(m) == 0 {
		return nil
	}
	return m
}

// validatePodSpecUpdate: a pod's spec is fixed once created, except the
// images of its containers, activeDeadlineSeconds (set or shortened) and
// additional tolerations (Kubernetes' rule, without its rarer exceptions).
func validatePodSpecUpdate(n, o *PodSpec) FieldErrors {
	var errs FieldErrors
	if o.ActiveDeadlineSeconds != nil {
		if n.ActiveDeadlineSeconds == nil {
			errs = append(errs, Invalid("spec.activeDeadlineSeconds", "null", "must not update from a positive integer to nil value"))
		} else if *n.ActiveDeadlineSeconds > *o.ActiveDeadlineSeconds {
			errs = append(errs, Invalid("spec.activeDeadlineSeconds", *n.ActiveDeadlineSeconds, "must be less than or equal to previous value"))
		}
	}
	if len(n.Tolerations) < len(o.Tolerations) || !reflect.DeepEqual(n.Tolerations[:len(o.Tolerations)], o.Tolerations) && len(o.Tolerations) > 0 {
		errs = append(errs, Forbidden("spec.tolerations", "existing toleration can not be modified except its tolerationSeconds"))
	}
	// Compare the rest with the mutable fields made equal.
	a, b := *n, *o
	a.Containers = withImagesOf(n.Containers, o.Containers)
	a.InitContainers = withImagesOf(n.InitContainers, o.InitContainers)
	a.ActiveDeadlineSeconds, b.ActiveDeadlineSeconds = nil, nil
	a.Tolerations, b.Tolerations = nil, nil
	if diff := changedFields(a, b); len(diff) > 0 {
		errs = append(errs, Forbidden("spec", "pod updates may not change fields other than `spec.containers[*].image`, "+
			"`spec.initContainers[*].image`, `spec.activeDeadlineSeconds` or `spec.tolerations` (only additions to existing tolerations); changed: "+
			strings.Join(diff, ", ")))
	}
	return errs
}

// withImagesOf returns a copy of n with each container's image taken from o
// (when the container lists have the same length).
func withImagesOf(n, o []Container) []Container {
	if len(n) != len(o) {
		return n
	}
	out := make([]Container, len(n))
	copy(out, n)
	for i := range out {
		out[i].Image = o[i].Image
	}
	return out
}

// changedFields names the top-level json fields of two structs of the same
// type that differ.
func changedFields(a, b PodSpec) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for _, f := range jsonFields(va.Type()) {
		x, y := va.FieldByName(f.GoName).Interface(), vb.FieldByName(f.GoName).Interface()
		if !reflect.DeepEqual(x, y) && !(isEmptyValue(x) && isEmptyValue(y)) {
			out = append(out, "spec."+f.Name)
		}
	}
	return out
}

func isEmptyValue(v any) bool {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Map:
		return rv.Len() == 0
	}
	return rv.IsZero()
}

func selectorsEqual(a, b *LabelSelector) bool {
	norm := func(s *LabelSelector) LabelSelector {
		if s == nil {
			return LabelSelector{}
		}
		return LabelSelector{MatchLabels: emptyNil(s.MatchLabels), MatchExpressions: s.MatchExpressions}
	}
	x, y := norm(a), norm(b)
	if len(x.MatchExpressions) == 0 && len(y.MatchExpressions) == 0 {
		x.MatchExpressions, y.MatchExpressions = nil, nil
	}
	return reflect.DeepEqual(x, y)
}

// selectorValue prints a selector in an error as Kubernetes does (Go syntax).
func selectorValue(s *LabelSelector) any {
	if s == nil {
		return "null"
	}
	return *s
}

// --- metadata ---

func validateMeta(m *ObjectMeta, namespaced bool, nameFn func(string) []string) FieldErrors {
	var errs FieldErrors
	switch {
	case m.Name == "" && m.GenerateName == "":
		errs = append(errs, Required("metadata.name", "name or generateName is required"))
	case m.Name != "":
		for _, msg := range nameFn(m.Name) {
			errs = append(errs, Invalid("metadata.name", m.Name, msg))
		}
	default:
		// generateName is a prefix: validate it with a stand-in suffix.
		for _, msg := range nameFn(strings.TrimSuffix(m.GenerateName, "-") + "-x") {
			errs = append(errs, Invalid("metadata.generateName", m.GenerateName, msg))
		}
	}
	if m.Namespace != "" {
		if !namespaced {
			errs = append(errs, Forbidden("metadata.namespace", "not allowed on this type"))
		} else {
			for _, msg := range isDNS1123Label(m.Namespace) {
				errs = append(errs, Invalid("metadata.namespace", m.Namespace, msg))
			}
		}
	}
	errs = append(errs, validateLabels(m.Labels, "metadata.labels")...)
	for _, k := range sortedKeys(m.Annotations) {
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			errs = append(errs, Invalid("metadata.annotations", k, msg))
		}
	}
	total := 0
	for k, v := range m.Annotations {
		total += len(k) + len(v)
	}
	if total > 256*1024 {
		errs = append(errs, Invalid("metadata.annotations", "", fmt.Sprintf("must have at most %d bytes", 256*1024)))
	}
	if m.Generation < 0 {
		errs = append(errs, Invalid("metadata.generation", m.Generation, "must be greater than or equal to 0"))
	}
	for i, r := range m.OwnerReferences {
		p := fmt.Sprintf("metadata.ownerReferences[%d]", i)
		if r.APIVersion == "" {
			errs = append(errs, Invalid(p+".apiVersion", r.APIVersion, "version must not be empty"))
		}
		if r.Kind == "" {
			errs = append(errs, Invalid(p+".kind", r.Kind, "kind must not be empty"))
		}
		if r.Name == "" {
			errs = append(errs, Invalid(p+".name", r.Name, "name must not be empty"))
		}
		if r.UID == "" {
			errs = append(errs, Invalid(p+".uid", r.UID, "uid must not be empty"))
		}
	}
	return errs
}

// validateLabels checks label keys (qualified names) and values.
func validateLabels(l map[string]string, path string) FieldErrors {
	var errs FieldErrors
	for _, k := range sortedKeys(l) {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, Invalid(path, k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(l[k]) {
			errs = append(errs, Invalid(path, l[k], msg))
		}
	}
	return errs
}

func nonNegative(v int64, path string) FieldErrors {
	if v < 0 {
		return FieldErrors{Invalid(path, v, "must be greater than or equal to 0")}
	}
	return nil
}

func validateReplicas(r *int32, path string) FieldErrors {
	if r == nil {
		return nil
	}
	return nonNegative(int64(*r), path)
}

// --- apps ---

func validateDeploymentSpec(s *DeploymentSpec) FieldErrors {
	var errs FieldErrors
	errs = append(errs, validateReplicas(s.Replicas, "spec.replicas")...)
	errs = append(errs, validateSelectorAndTemplate(s.Selector, &s.Template, "spec")...)
	switch s.Strategy.Type {
	case "", RollingUpdate:
		if ru := s.Strategy.RollingUpdate; ru != nil {
			errs = append(errs, validateRollingUpdate(ru)...)
		}
	case Recreate:
		if s.Strategy.RollingUpdate != nil {
			errs = append(errs, Forbidden("spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"))
		}
	default:
		errs = append(errs, NotSupported("spec.strategy.type", s.Strategy.Type, Recreate, RollingUpdate))
	}
	errs = append(errs, nonNegative(int64(s.MinReadySeconds), "spec.minReadySeconds")...)
	if s.RevisionHistoryLimit != nil {
		errs = append(errs, nonNegative(int64(*s.RevisionHistoryLimit), "spec.revisionHistoryLimit")...)
	}
	if p := s.ProgressDeadlineSeconds; p != nil {
		errs = append(errs, nonNegative(int64(*p), "spec.progressDeadlineSeconds")...)
		if *p <= s.MinReadySeconds {
			errs = append(errs, Invalid("spec.progressDeadlineSeconds", *p, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

func validateRollingUpdate(ru *RollingUpdateDeployment) FieldErrors {
	var errs FieldErrors
	surge := validateIntOrPercent(ru.MaxSurge, "spec.strategy.rollingUpdate.maxSurge")
	unavail := validateIntOrPercent(ru.MaxUnavailable, "spec.strategy.rollingUpdate.maxUnavailable")
	errs = append(errs, surge...)
	errs = append(errs, unavail...)
	if len(surge) == 0 && len(unavail) == 0 && isZeroIntOrPercent(ru.MaxSurge) && isZeroIntOrPercent(ru.MaxUnavailable) {
		errs = append(errs, Invalid("spec.strategy.rollingUpdate.maxUnavailable", ru.MaxUnavailable.String(), "may not be 0 when `maxSurge` is 0"))
	}
	if ru.MaxUnavailable != nil && ru.MaxUnavailable.Type == intstr.String && len(unavail) == 0 {
		if pct, _ := percent(ru.MaxUnavailable.StrVal); pct > 100 {
			errs = append(errs, Invalid("spec.strategy.rollingUpdate.maxUnavailable", ru.MaxUnavailable.StrVal, "must not be greater than 100%"))
		}
	}
	return errs
}

func isZeroIntOrPercent(v *IntOrString) bool {
	if v == nil {
		return false // defaulted to 25%
	}
	if v.Type == intstr.Int {
		return v.IntVal == 0
	}
	p, err := percent(v.StrVal)
	return err == nil && p == 0
}

func percent(s string) (int, error) {
	var n int
	_, err := fmt.Sscanf(s, "%d%%", &n)
	return n, err
}

func validateIntOrPercent(v *IntOrString, path string) FieldErrors {
	if v == nil {
		return nil
	}
	if v.Type == intstr.Int {
		return nonNegative(int64(v.IntVal), path)
	}
	if msgs := validation.IsValidPercent(v.StrVal); len(msgs) > 0 {
		return FieldErrors{Invalid(path, v.StrVal, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")}
	}
	return nil
}

// validateSelectorAndTemplate: the selector is required, not empty, and
// must select the template's labels; the template's pods restart Always.
func validateSelectorAndTemplate(sel *LabelSelector, t *PodTemplateSpec, path string) FieldErrors {
	var errs FieldErrors
	if sel == nil {
		errs = append(errs, Required(path+".selector", ""))
	} else {
		errs = append(errs, validateLabelSelector(sel, path+".selector")...)
		if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
			errs = append(errs, Invalid(path+".selector", selectorValue(sel), "empty selector is invalid for deployment"))
		}
	}
	tp := path + ".template"
	errs = append(errs, validateLabels(t.Labels, tp+".metadata.labels")...)
	if sel != nil && len(errs) == 0 {
		s, err := sel.AsSelector()
		if err == nil && !s.Empty() && !s.Matches(labels.Set(t.Labels)) {
			errs = append(errs, Invalid(tp+".metadata.labels", templateLabels(t.Labels), "`selector` does not match template `labels`"))
		}
	}
	for _, k := range sortedKeys(t.Annotations) {
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			errs = append(errs, Invalid(tp+".metadata.annotations", k, msg))
		}
	}
	errs = append(errs, validateSimulatedProbeFailure(t.Annotations, tp+".")...)
	errs = append(errs, validatePodSpec(&t.Spec, tp+".spec")...)
	if rp := t.Spec.RestartPolicy; rp != "" && rp != RestartAlways {
		errs = append(errs, NotSupported(tp+".spec.restartPolicy", rp, RestartAlways))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, Invalid(tp+".spec.activeDeadlineSeconds", *t.Spec.ActiveDeadlineSeconds, "activeDeadlineSeconds in ReplicaSet is not Supported"))
	}
	return errs
}

// templateLabels prints as Kubernetes does: map[string]string{"app":"web"}.
func templateLabels(l map[string]string) map[string]string {
	if l == nil {
		return map[string]string{}
	}
	return l
}

func validateLabelSelector(s *LabelSelector, path string) FieldErrors {
	var errs FieldErrors
	errs = append(errs, validateLabels(s.MatchLabels, path+".matchLabels")...)
	for i, e := range s.MatchExpressions {
		p := elemPath(path, ".matchExpressions", i)
		switch e.Operator {
		case "In", "NotIn":
			if len(e.Values) == 0 {
				errs = append(errs, Required(p+".values", "must be specified when `operator` is 'In' or 'NotIn'"))
			}
		case "Exists", "DoesNotExist":
			if len(e.Values) > 0 {
				errs = append(errs, Forbidden(p+".values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
			}
		default:
			errs = append(errs, NotSupported(p+".operator", e.Operator, "In", "NotIn", "Exists", "DoesNotExist"))
		}
		for _, msg := range validation.IsQualifiedName(e.Key) {
			errs = append(errs, Invalid(p+".key", e.Key, msg))
		}
		for j, v := range e.Values {
			for _, msg := range validation.IsValidLabelValue(v) {
				errs = append(errs, Invalid(fmt.Sprintf("%s.values[%d]", p, j), v, msg))
			}
		}
	}
	return errs
}

// --- core: config ---

func validateDataKeys[V any](m map[string]V, path string) FieldErrors {
	var errs FieldErrors
	for _, k := range sortedKeys(m) {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, Invalid(path, k, msg))
		}
	}
	return errs
}

const maxConfigSize = 1 << 20 // 1 MiB, as Kubernetes (etcd's request limit)

func validateConfigMap(c *ConfigMap) FieldErrors {
	var errs FieldErrors
	errs = append(errs, validateDataKeys(c.Data, "data")...)
	errs = append(errs, validateDataKeys(c.BinaryData, "binaryData")...)
	size := 0
	for k, v := range c.Data {
		size += len(v)
		if _, dup := c.BinaryData[k]; dup {
			errs = append(errs, Invalid("data", k, "duplicate of key present in binaryData"))
		}
	}
	for _, v := range c.BinaryData {
		size += len(v)
	}
	if size > maxConfigSize {
		// Kubernetes reports the whole object (an empty path); skiff names
		// the field, binaryData when only it holds anything.
		field := "data"
		if len(c.Data) == 0 {
			field = "binaryData"
		}
		errs = append(errs, TooLong(field, maxConfigSize))
	}
	return errs
}

// TooLong: a value over its size limit, worded as Kubernetes' field.TooLong
// (`data: Too long: may not be more than 1048576 bytes`).
func TooLong(field string, limit int) *FieldError {
	return &FieldError{Type: FieldTooLong, Field: field, Detail: fmt.Sprintf("may not be more than %d bytes", limit)}
}

func validateSecret(s *Secret) FieldErrors {
	var errs FieldErrors
	errs = append(errs, validateDataKeys(s.Data, "data")...)
	errs = append(errs, validateDataKeys(s.StringData, "stringData")...)
	size := 0
	for _, v := range s.Data {
		size += len(v)
	}
	for _, v := range s.StringData {
		size += len(v)
	}
	if size > maxConfigSize {
		errs = append(errs, TooLong("data", maxConfigSize))
	}
	has := func(k string) bool {
		_, a := s.Data[k]
		_, b := s.StringData[k]
		return a || b
	}
	switch s.Type {
	case "kubernetes.io/tls":
		for _, k := range []string{"tls.crt", "tls.key"} {
			if !has(k) {
				errs = append(errs, Required("data["+k+"]", ""))
			}
		}
	case "kubernetes.io/dockerconfigjson":
		if !has(".dockerconfigjson") {
			errs = append(errs, Required("data[.dockerconfigjson]", ""))
		}
	case "kubernetes.io/basic-auth":
		if !has("username") && !has("password") {
			errs = append(errs, Required("data", "must have at least one of the `username` or `password` keys"))
		}
	case "kubernetes.io/service-account-token":
		errs = append(errs, NotSupported("type", s.Type))
	}
	return errs
}

// --- core: service, endpoints, node ---

func validateServiceSpec(s *ServiceSpec) FieldErrors {
	var errs FieldErrors
	switch s.Type {
	case "", ServiceTypeClusterIP, ServiceTypeNodePort:
	default:
		errs = append(errs, NotSupported("spec.type", s.Type, ServiceTypeClusterIP, ServiceTypeNodePort))
	}
	headless := s.ClusterIP == "None"
	if len(s.Ports) == 0 && !headless {
		errs = append(errs, Required("spec.ports", ""))
	}
	if headless && s.Type == ServiceTypeNodePort {
		errs = append(errs, Invalid("spec.clusterIPs[0]", "None", "may not be set to 'None' for NodePort services"))
	}
	if s.ClusterIP != "" && !headless {
		if _, err := netip.ParseAddr(s.ClusterIP); err != nil {
			errs = append(errs, Invalid("spec.clusterIP", s.ClusterIP, "must be empty, 'None', or a valid IP address"))
		}
	}
	if len(s.ClusterIPs) > 0 && s.ClusterIP != "" && s.ClusterIPs[0] != s.ClusterIP {
		errs = append(errs, Invalid("spec.clusterIPs", s.ClusterIPs, "first value must match `clusterIP`"))
	}
	errs = append(errs, validateLabels(s.Selector, "spec.selector")...)
	names := map[string]bool{}
	portProto := map[string]bool{}
	nodePorts := map[int32]bool{}
	for i, p := range s.Ports {
		pp := fmt.Sprintf("spec.ports[%d]", i)
		if len(s.Ports) > 1 && p.Name == "" {
			errs = append(errs, Required(pp+".name", ""))
		} else if p.Name != "" {
			for _, msg := range isDNS1123Label(p.Name) {
				errs = append(errs, Invalid(pp+".name", p.Name, msg))
			}
			if names[p.Name] {
				errs = append(errs, Duplicate(pp+".name", p.Name))
			}
			names[p.Name] = true
		}
		errs = append(errs, validatePortNum(int64(p.Port), pp+".port")...)
		switch p.Protocol {
		case "", ProtocolTCP, ProtocolUDP:
		default:
			errs = append(errs, NotSupported(pp+".protocol", p.Protocol, ProtocolTCP, ProtocolUDP))
		}
		key := fmt.Sprintf("%d/%s", p.Port, defaultString(p.Protocol, ProtocolTCP))
		if portProto[key] {
			errs = append(errs, Duplicate(pp, fmt.Sprintf("%d/%s", p.Port, defaultString(p.Protocol, ProtocolTCP))))
		}
		portProto[key] = true
		errs = append(errs, validatePortRef(p.TargetPort, pp+".targetPort", true)...)
		if p.NodePort != 0 {
			if s.Type != ServiceTypeNodePort {
				errs = append(errs, Forbidden(pp+".nodePort", fmt.Sprintf("may not be used when `type` is '%s'", defaultString(s.Type, ServiceTypeClusterIP))))
			} else if p.NodePort < NodePortMin || p.NodePort > NodePortMax {
				errs = append(errs, Invalid(pp+".nodePort", p.NodePort,
					fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %d-%d", NodePortMin, NodePortMax)))
			}
			if nodePorts[p.NodePort] {
				errs = append(errs, Duplicate(pp+".nodePort", p.NodePort))
			}
			nodePorts[p.NodePort] = true
		}
	}
	switch s.SessionAffinity {
	case "", "None", "ClientIP":
	default:
		errs = append(errs, NotSupported("spec.sessionAffinity", s.SessionAffinity, "ClientIP", "None"))
	}
	if s.ExternalTrafficPolicy != "" {
		if s.Type != ServiceTypeNodePort {
			errs = append(errs, Invalid("spec.externalTrafficPolicy", s.ExternalTrafficPolicy, "may only be set when `type` is 'NodePort' or 'LoadBalancer'"))
		} else if s.ExternalTrafficPolicy != "Cluster" && s.ExternalTrafficPolicy != "Local" {
			errs = append(errs, NotSupported("spec.externalTrafficPolicy", s.ExternalTrafficPolicy, "Cluster", "Local"))
		}
	}
	return errs
}

// The NodePort range, as Kubernetes' default --service-node-port-range.
const (
	NodePortMin = 30000
	NodePortMax = 32767
)

func defaultString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func validatePortNum(p int64, path string) FieldErrors {
	if p < 1 || p > 65535 {
		return FieldErrors{Invalid(path, p, "must be between 1 and 65535, inclusive")}
	}
	return nil
}

// validatePortRef checks a port given by number or by name. A zero number
// is allowed when allowZero (a Service's targetPort, defaulted to port).
func validatePortRef(p IntOrString, path string, allowZero bool) FieldErrors {
	if p.Type == intstr.Int {
		if p.IntVal == 0 && allowZero {
			return nil
		}
		return validatePortNum(int64(p.IntVal), path)
	}
	var errs FieldErrors
	for _, msg := range validation.IsValidPortName(p.StrVal) {
		errs = append(errs, Invalid(path, p.StrVal, msg))
	}
	return errs
}

func validateEndpoints(e *Endpoints) FieldErrors {
	var errs FieldErrors
	for i, ss := range e.Subsets {
		sp := fmt.Sprintf("subsets[%d]", i)
		for j, a := range ss.Addresses {
			if _, err := netip.ParseAddr(a.IP); err != nil {
				errs = append(errs, Invalid(fmt.Sprintf("%s.addresses[%d].ip", sp, j), a.IP, "must be a valid IP address"))
			}
		}
		for j, a := range ss.NotReadyAddresses {
			if _, err := netip.ParseAddr(a.IP); err != nil {
				errs = append(errs, Invalid(fmt.Sprintf("%s.notReadyAddresses[%d].ip", sp, j), a.IP, "must be a valid IP address"))
			}
		}
		for j, p := range ss.Ports {
			errs = append(errs, validatePortNum(int64(p.Port), fmt.Sprintf("%s.ports[%d].port", sp, j))...)
		}
	}
	return errs
}

func validateTaint(t Taint, path string) FieldErrors {
	var errs FieldErrors
	for _, msg := range validation.IsQualifiedName(t.Key) {
		errs = append(errs, Invalid(path+".key", t.Key, msg))
	}
	for _, msg := range validation.IsValidLabelValue(t.Value) {
		errs = append(errs, Invalid(path+".value", t.Value, msg))
	}
	switch t.Effect {
	case TaintEffectNoSched, TaintEffectPrefNo, TaintEffectNoExec:
	case "":
		errs = append(errs, Required(path+".effect", ""))
	default:
		errs = append(errs, NotSupported(path+".effect", t.Effect, TaintEffectNoExec, TaintEffectNoSched, TaintEffectPrefNo))
	}
	return errs
}

// isExtendedResource: a domain-prefixed resource outside kubernetes.io,
// such as nvidia.com/gpu. Extended resources are counted in whole units and
// cannot be overcommitted.
func isExtendedResource(name string) bool {
	if !strings.Contains(name, "/") {
		return false
	}
	domain := name[:strings.IndexByte(name, '/')]
	return domain != "kubernetes.io" && !strings.HasSuffix(domain, ".kubernetes.io") && !strings.HasPrefix(name, "requests.")
}

// isStandardResource: cpu, memory, ephemeral-storage, hugepages-<size>.
func isStandardResource(name string) bool {
	switch name {
	case ResourceCPU, ResourceMemory, "ephemeral-storage":
		return true
	}
	return strings.HasPrefix(name, "hugepages-")
}
