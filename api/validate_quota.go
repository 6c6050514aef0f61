package api

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Kubernetes' resource name sets (pkg/apis/core/helper): what a quota,
// a limit range and a container may name without a domain.
var (
	standardResourceNames = []string{ResourceCPU, ResourceMemory, "ephemeral-storage",
		"requests.cpu", "requests.memory", "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
		"pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "configmaps", "persistentvolumeclaims",
		"storage", "requests.storage", "services.nodeports", "services.loadbalancers"}
	standardQuotaNames = []string{ResourceCPU, ResourceMemory, "ephemeral-storage",
		"requests.cpu", "requests.memory", "requests.storage", "requests.ephemeral-storage",
		"limits.cpu", "limits.memory", "limits.ephemeral-storage",
		"pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "persistentvolumeclaims", "configmaps",
		"services.nodeports", "services.loadbalancers"}
	// integerQuotaNames count objects: whole numbers only.
	integerQuotaNames = []string{"pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "configmaps",
		"persistentvolumeclaims", "services.nodeports", "services.loadbalancers"}
	standardQuotaScopes = []string{ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort,
		ResourceQuotaScopeNotBestEffort, ResourceQuotaScopePriorityClass, ResourceQuotaScopeVolumeAttributesClass}
	podComputeQuotaNames = []string{ResourceCPU, ResourceMemory, "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"}
)

// IsStandardQuotaResourceName reports a quota resource name Kubernetes
// knows without a domain.
func IsStandardQuotaResourceName(name string) bool {
	return slices.Contains(standardQuotaNames, name) || strings.HasPrefix(name, "hugepages-") || strings.HasPrefix(name, "requests.hugepages-")
}

// validateQuotaResourceName is Kubernetes' ValidateResourceQuotaResourceName,
// and skiff's refusal of the names with a domain Kubernetes would accept
// and never count: an extended resource without requests. (nvidia.com/gpu,
// limits.nvidia.com/gpu: extended resources cannot be overcommitted, so a
// quota counts their requests only), a count of a resource that is not
// served, a storage class quota on something else than requests.storage
// or persistentvolumeclaims, a device class quota (DRA, not counted).
func validateQuotaResourceName(name, p string) FieldErrors {
	errs := validateK8sResourceName(name, p)
	if !strings.Contains(name, "/") {
		if !IsStandardQuotaResourceName(name) {
			errs = append(errs, Invalid(p, name, "must be a standard resource for quota"))
		}
		return errs
	}
	if len(errs) > 0 {
		return errs
	}
	switch {
	case strings.HasPrefix(name, ObjectCountPrefix):
		if !servesNamespaced(strings.TrimPrefix(name, ObjectCountPrefix)) {
			errs = append(errs, Invalid(p, name, "not supported by skiff: count/ names a namespaced resource this server serves, as RESOURCE.GROUP (count/pods, count/jobs.batch)"))
		}
	case strings.Contains(name, StorageClassQuotaInfix):
		if r := name[strings.Index(name, StorageClassQuotaInfix)+len(StorageClassQuotaInfix):]; r != "requests.storage" && r != "persistentvolumeclaims" {
			errs = append(errs, Invalid(p, name, "not supported by skiff: a storage class quota is on requests.storage or persistentvolumeclaims"))
		}
	case strings.HasPrefix(name, ResourceRequestsPrefix) && isExtendedResource(strings.TrimPrefix(name, ResourceRequestsPrefix)):
	default:
		errs = append(errs, Invalid(p, name, "not supported by skiff: quota an extended resource by its requests, requests."+strings.TrimPrefix(name, ResourceLimitsPrefix)+" (it cannot be overcommitted: request and limit are equal)"))
	}
	return errs
}

// servesNamespaced reports whether res ("pods", "jobs.batch") is a
// namespaced resource in Kinds.
func servesNamespaced(res string) bool {
	for _, k := range Kinds {
		if k.Namespaced && !k.Internal && k.GroupResource() == res {
			return true
		}
	}
	return false
}

// validateK8sResourceName is Kubernetes' validateResourceName: a
// qualified name, standard when it has no domain.
func validateK8sResourceName(name, p string) FieldErrors {
	var errs FieldErrors
	for _, msg := range validation.IsQualifiedName(name) {
		errs = append(errs, Invalid(p, name, msg))
	}
	if len(errs) > 0 {
		return errs
	}
	if !strings.Contains(name, "/") && !slices.Contains(standardResourceNames, name) && !strings.HasPrefix(name, "hugepages-") {
		errs = append(errs, Invalid(p, name, "must be a standard resource type or fully qualified"))
	}
	return errs
}

// validateQuotaQuantity is Kubernetes' ValidateResourceQuantityValue,
// and skiff's bound: not negative, a whole number for counts and extended
// resources, an amount that fits.
func validateQuotaQuantity(name string, q Quantity, p string) FieldErrors {
	if q.Sign() < 0 {
		return FieldErrors{Invalid(p, q.String(), "must be greater than or equal to 0")}
	}
	base := strings.TrimPrefix(strings.TrimPrefix(name, ResourceRequestsPrefix), ResourceLimitsPrefix)
	if _, ok := ResourceAmount(base, q); !ok {
		return FieldErrors{Invalid(p, q.String(), fmt.Sprintf("must be less than or equal to %s", maxQuantityString(base)))}
	}
	if (slices.Contains(integerQuotaNames, name) || isExtendedResource(name)) && !isWhole(q) {
		return FieldErrors{Invalid(p, q.String(), "must be an integer")}
	}
	return nil
}

// validateResourceQuota is Kubernetes' ValidateResourceQuota: the spec
// and the status.
func validateResourceQuota(q *ResourceQuota) FieldErrors {
	var errs FieldErrors
	for _, name := range sortedKeys(q.Spec.Hard) {
		p := "spec.hard[" + name + "]"
		errs = append(errs, validateQuotaResourceName(name, p)...)
		errs = append(errs, validateQuotaQuantity(name, q.Spec.Hard[name], p)...)
	}
	errs = append(errs, validateQuotaScopes(&q.Spec)...)
	for _, part := range []struct {
		p    string
		list ResourceList
	}{{"status.hard", q.Status.Hard}, {"status.used", q.Status.Used}} {
		for _, name := range sortedKeys(part.list) {
			p := part.p + "[" + name + "]"
			errs = append(errs, validateQuotaResourceName(name, p)...)
			errs = append(errs, validateQuotaQuantity(name, part.list[name], p)...)
		}
	}
	return errs
}

// validateResourceQuotaUpdate: a quota's scopes are immutable.
func validateResourceQuotaUpdate(q, old *ResourceQuota) FieldErrors {
	if !slices.Equal(sortedStrings(q.Spec.Scopes), sortedStrings(old.Spec.Scopes)) {
		return FieldErrors{Invalid("spec.scopes", q.Spec.Scopes, "field is immutable")}
	}
	return nil
}

// validateQuotaScopes is Kubernetes' validateResourceQuotaScopes and
// validateScopeSelector, with skiff's refusal of the two scopes it does
// not evaluate.
func validateQuotaScopes(s *ResourceQuotaSpec) FieldErrors {
	var errs FieldErrors
	hard := sortedKeys(s.Hard)
	seen := map[string]bool{}
	scopeErrs := func(scope, p string, bad any) FieldErrors {
		var out FieldErrors
		switch {
		case scope == ResourceQuotaScopeCrossNamespacePodAffinity || scope == ResourceQuotaScopeVolumeAttributesClass:
			out = append(out, Invalid(p, bad, "scope "+scope+" is not supported by skiff"))
		case !slices.Contains(standardQuotaScopes, scope):
			out = append(out, Invalid(p, bad, "unsupported scope"))
		}
		for _, k := range hard {
			if IsStandardQuotaResourceName(k) && !scopeValidForResource(scope, k) {
				out = append(out, Invalid(p, bad, "unsupported scope applied to resource"))
			}
		}
		return out
	}
	for _, scope := range s.Scopes {
		errs = append(errs, scopeErrs(scope, "spec.scopes", s.Scopes)...)
		seen[scope] = true
	}
	errs = append(errs, conflictingScopes(seen, "spec.scopes", s.Scopes)...)
	if s.ScopeSelector == nil {
		return errs
	}
	p := "spec.scopeSelector.matchExpressions"
	selSeen := map[string]bool{}
	for _, req := range s.ScopeSelector.MatchExpressions {
		if !slices.Contains(standardQuotaScopes, req.ScopeName) && req.ScopeName != ResourceQuotaScopeCrossNamespacePodAffinity {
			errs = append(errs, Invalid(p+".scopeName", req.ScopeName, "unsupported scope"))
		} else if req.ScopeName == ResourceQuotaScopeCrossNamespacePodAffinity || req.ScopeName == ResourceQuotaScopeVolumeAttributesClass {
			errs = append(errs, Invalid(p+".scopeName", req.ScopeName, "scope "+req.ScopeName+" is not supported by skiff"))
		}
		for _, k := range hard {
			if IsStandardQuotaResourceName(k) && !scopeValidForResource(req.ScopeName, k) {
				errs = append(errs, Invalid(p, scopeSelectorValue{s.ScopeSelector}, "unsupported scope applied to resource"))
			}
		}
		switch req.ScopeName {
		case ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort, ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeCrossNamespacePodAffinity:
			if req.Operator != ScopeSelectorOpExists {
				errs = append(errs, Invalid(p+".operator", req.Operator,
					"must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"))
			}
		}
		switch req.Operator {
		case ScopeSelectorOpIn, ScopeSelectorOpNotIn:
			if len(req.Values) == 0 {
				errs = append(errs, Required(p+".values", "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
			}
		case ScopeSelectorOpExists, ScopeSelectorOpDoesNotExist:
			if len(req.Values) != 0 {
				errs = append(errs, Invalid(p+".values", req.Values, "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
			}
		default:
			errs = append(errs, Invalid(p+".operator", req.Operator, "not a valid selector operator"))
		}
		selSeen[req.ScopeName] = true
	}
	return append(errs, conflictingScopes(selSeen, p, s.Scopes)...)
}

func conflictingScopes(seen map[string]bool, p string, scopes []string) FieldErrors {
	if seen[ResourceQuotaScopeBestEffort] && seen[ResourceQuotaScopeNotBestEffort] ||
		seen[ResourceQuotaScopeTerminating] && seen[ResourceQuotaScopeNotTerminating] {
		return FieldErrors{Invalid(p, scopes, "conflicting scopes")}
	}
	return nil
}

// scopeValidForResource is Kubernetes' IsResourceQuotaScopeValidForResource.
func scopeValidForResource(scope, name string) bool {
	switch scope {
	case ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeNotBestEffort,
		ResourceQuotaScopePriorityClass, ResourceQuotaScopeCrossNamespacePodAffinity:
		return name == "pods" || slices.Contains(podComputeQuotaNames, name)
	case ResourceQuotaScopeBestEffort:
		return name == "pods"
	case ResourceQuotaScopeVolumeAttributesClass:
		return name == "persistentvolumeclaims" || name == "requests.storage"
	}
	return true
}

// validateLimitRange is Kubernetes' ValidateLimitRange.
func validateLimitRange(lr *LimitRange) FieldErrors {
	var errs FieldErrors
	types := map[string]bool{}
	for i := range lr.Spec.Limits {
		it := &lr.Spec.Limits[i]
		ip := fmt.Sprintf("spec.limits[%d]", i)
		errs = append(errs, validateLimitType(it.Type, ip+".type")...)
		if types[it.Type] {
			errs = append(errs, Duplicate(ip+".type", it.Type))
		}
		types[it.Type] = true
		keys := map[string]bool{}
		names := func(list ResourceList, field string) {
			for _, k := range sortedKeys(list) {
				errs = append(errs, validateLimitResourceName(it.Type, k, ip+"."+field+"["+k+"]")...)
				keys[k] = true
			}
		}
		names(it.Max, "max")
		names(it.Min, "min")
		if it.Type == LimitTypePod {
			if len(it.Default) > 0 {
				errs = append(errs, Forbidden(ip+".default", "may not be specified when `type` is 'Pod'"))
			}
			if len(it.DefaultRequest) > 0 {
				errs = append(errs, Forbidden(ip+".defaultRequest", "may not be specified when `type` is 'Pod'"))
			}
		} else {
			names(it.Default, "default")
			names(it.DefaultRequest, "defaultRequest")
		}
		if it.Type == LimitTypePersistentVolumeClaim {
			_, hasMin := it.Min["storage"]
			_, hasMax := it.Max["storage"]
			if !hasMin && !hasMax {
				errs = append(errs, Required(ip+".limits", "either minimum or maximum storage value is required, but neither was provided"))
			}
		}
		names(it.MaxLimitRequestRatio, "maxLimitRequestRatio")
		for _, k := range sortedKeys(keys) {
			errs = append(errs, validateLimitValues(it, k, ip)...)
		}
	}
	return errs
}

// validateLimitValues checks the order min <= defaultRequest <= default
// <= max and the ratio of one resource of a limit range item, in
// Kubernetes' words.
func validateLimitValues(it *LimitRangeItem, k, ip string) FieldErrors {
	var errs FieldErrors
	minQ, hasMin := it.Min[k]
	maxQ, hasMax := it.Max[k]
	def, hasDef := it.Default[k]
	defReq, hasDefReq := it.DefaultRequest[k]
	ratio, hasRatio := it.MaxLimitRequestRatio[k]
	key := func(field string) string { return ip + "." + field + "[" + k + "]" }
	if hasMin && hasMax && minQ.Cmp(maxQ) > 0 {
		errs = append(errs, Invalid(key("min"), minQ.String(), fmt.Sprintf("min value %s is greater than max value %s", minQ.String(), maxQ.String())))
	}
	if hasDefReq && hasMin && minQ.Cmp(defReq) > 0 {
		errs = append(errs, Invalid(key("defaultRequest"), defReq.String(), fmt.Sprintf("min value %s is greater than default request value %s", minQ.String(), defReq.String())))
	}
	if hasDefReq && hasMax && defReq.Cmp(maxQ) > 0 {
		errs = append(errs, Invalid(key("defaultRequest"), defReq.String(), fmt.Sprintf("default request value %s is greater than max value %s", defReq.String(), maxQ.String())))
	}
	if hasDefReq && hasDef && defReq.Cmp(def) > 0 {
		errs = append(errs, Invalid(key("defaultRequest"), defReq.String(), fmt.Sprintf("default request value %s is greater than default limit value %s", defReq.String(), def.String())))
	}
	if hasDef && hasMin && minQ.Cmp(def) > 0 {
		errs = append(errs, Invalid(key("default"), minQ.String(), fmt.Sprintf("min value %s is greater than default value %s", minQ.String(), def.String())))
	}
	if hasDef && hasMax && def.Cmp(maxQ) > 0 {
		errs = append(errs, Invalid(key("default"), maxQ.String(), fmt.Sprintf("default value %s is greater than max value %s", def.String(), maxQ.String())))
	}
	one := resource.NewQuantity(1, resource.DecimalSI)
	if hasRatio && ratio.Cmp(*one) < 0 {
		errs = append(errs, Invalid(key("maxLimitRequestRatio"), ratio.String(), fmt.Sprintf("ratio %s is less than 1", ratio.String())))
	}
	if hasRatio && hasMin && hasMax {
		r, minV, maxV := float64(ratio.Value()), minQ.Value(), maxQ.Value()
		if ratio.Value() < resource.MaxMilliValue && minV < resource.MaxMilliValue && maxV < resource.MaxMilliValue {
			r, minV, maxV = float64(ratio.MilliValue())/1000, minQ.MilliValue(), maxQ.MilliValue()
		}
		if limit := float64(maxV) / float64(minV); r > limit {
			errs = append(errs, Invalid(key("maxLimitRequestRatio"), ratio.String(), fmt.Sprintf("ratio %s is greater than max/min = %f", ratio.String(), limit)))
		}
	}
	if isExtendedResource(k) || strings.HasPrefix(k, "hugepages-") {
		if hasDef && hasDefReq && def.Cmp(defReq) != 0 {
			errs = append(errs, Invalid(key("defaultRequest"), defReq.String(), fmt.Sprintf("default value %s must equal to defaultRequest value %s in %s", def.String(), defReq.String(), k)))
		}
	}
	return errs
}

func validateLimitType(t, p string) FieldErrors {
	var errs FieldErrors
	for _, msg := range validation.IsQualifiedName(t) {
		errs = append(errs, Invalid(p, t, msg))
	}
	if len(errs) > 0 {
		return errs
	}
	if !strings.Contains(t, "/") && t != LimitTypePod && t != LimitTypeContainer && t != LimitTypePersistentVolumeClaim {
		errs = append(errs, Invalid(p, t, "must be a standard limit type or fully qualified"))
	}
	return errs
}

// validateLimitResourceName: Pod and Container items name container
// resources, other items any resource (Kubernetes'
// validateLimitRangeResourceName).
func validateLimitResourceName(t, name, p string) FieldErrors {
	errs := validateK8sResourceName(name, p)
	if t != LimitTypePod && t != LimitTypeContainer {
		return errs
	}
	if !strings.Contains(name, "/") {
		if name != ResourceCPU && name != ResourceMemory && name != "ephemeral-storage" && !strings.HasPrefix(name, "hugepages-") {
			errs = append(errs, Invalid(p, name, "must be a standard resource for containers"))
		}
	} else if isExtendedResource(name) && len(validation.IsQualifiedName(ResourceRequestsPrefix+name)) > 0 {
		errs = append(errs, Invalid(p, name, "doesn't follow extended resource name standard"))
	}
	return errs
}

func sortedStrings(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// scopeSelectorValue prints a ScopeSelector as kube-apiserver's field
// errors print its internal type.
type scopeSelectorValue struct{ s *ScopeSelector }

func (v scopeSelectorValue) String() string {
	var parts []string
	for _, r := range v.s.MatchExpressions {
		parts = append(parts, fmt.Sprintf(`{"ScopeName":%q,"Operator":%q,"Values":%s}`, r.ScopeName, r.Operator, jsonStrings(r.Values)))
	}
	return `{"MatchExpressions":[` + strings.Join(parts, ",") + `]}`
}

func jsonStrings(s []string) string {
	if s == nil {
		return "null"
	}
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return "[" + strings.Join(q, ",") + "]"
}
