package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/blang/semver/v4"
	"k8s.io/apimachinery/pkg/util/validation"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// Validation of the DRA kinds (resource.go), after Kubernetes'
// pkg/apis/resource/validation: names, request names, counts and modes,
// firstAvailable, constraints naming requests of the claim, CEL selectors
// that compile in the DRA environment within the cost limit, opaque
// config, slices' pools and devices, and the claim status invariants.

// CELCompiler is the DRA CEL environment (k8s.io/dynamic-resource-allocation/cel):
// device.driver, device.attributes[DOMAIN].NAME, device.capacity[DOMAIN].NAME
// as quantities, semver, cost estimates. One for the process: environments
// are costly to build.
var CELCompiler = dracel.GetCompiler(dracel.Features{})

// CompileDeviceSelector compiles one selector as the API server does when
// it stores it (the NewExpressions environment) and returns the field
// error Kubernetes returns for it at path, or nil.
func CompileDeviceSelector(expression, path string) *FieldError {
	if len(expression) > CELSelectorExpressionMaxLength {
		return TooLong(path, CELSelectorExpressionMaxLength)
	}
	env := environment.NewExpressions
	res := CELCompiler.CompileCELExpression(expression, dracel.Options{EnvType: &env})
	if res.Error != nil {
		var ce *apiservercel.Error
		if errors.As(res.Error, &ce) && ce.Type == apiservercel.ErrorTypeRequired {
			return Required(path, ce.Detail)
		}
		return Invalid(path, expression, res.Error.Detail)
	}
	if res.MaxCost > CELSelectorExpressionMaxCost {
		return Forbidden(path, "too complex, exceeds cost limit")
	}
	return nil
}

func validateResourceObject(obj Object) FieldErrors {
	switch o := obj.(type) {
	case *DeviceClass:
		errs := validateMeta(&o.ObjectMeta, false, isDNS1123Subdomain)
		errs = append(errs, validateSelectors(o.Spec.Selectors, "spec.selectors")...)
		if len(o.Spec.Config) > DeviceConfigMaxSize {
			errs = append(errs, tooMany("spec.config", len(o.Spec.Config), DeviceConfigMaxSize))
		}
		for i, c := range o.Spec.Config {
			errs = append(errs, validateDeviceConfiguration(c.DeviceConfiguration, fmt.Sprintf("spec.config[%d]", i))...)
		}
		return errs
	case *ResourceClaim:
		errs := validateMeta(&o.ObjectMeta, true, isDNS1123Subdomain)
		return append(errs, validateDeviceClaim(&o.Spec.Devices, "spec.devices")...)
	case *ResourceClaimTemplate:
		errs := validateMeta(&o.ObjectMeta, true, isDNS1123Subdomain)
		errs = append(errs, validateLabels(o.Spec.Labels, "spec.metadata.labels")...)
		return append(errs, validateDeviceClaim(&o.Spec.Spec.Devices, "spec.spec.devices")...)
	case *ResourceSlice:
		errs := validateMeta(&o.ObjectMeta, false, isDNS1123Subdomain)
		return append(errs, validateResourceSliceSpec(&o.Spec)...)
	}
	return nil
}

func validateDNSLabelField(v, path string) FieldErrors {
	if v == "" {
		return FieldErrors{Required(path, "")}
	}
	var errs FieldErrors
	for _, msg := range isDNS1123Label(v) {
		errs = append(errs, Invalid(path, v, msg))
	}
	return errs
}

func validateDNSSubdomainField(v, path string) FieldErrors {
	if v == "" {
		return FieldErrors{Required(path, "")}
	}
	var errs FieldErrors
	for _, msg := range isDNS1123Subdomain(v) {
		errs = append(errs, Invalid(path, v, msg))
	}
	return errs
}

// validateDriverName: a DNS subdomain of at most 63 characters, as a CSI
// driver's name.
func validateDriverName(v, path string) FieldErrors {
	if v == "" {
		return FieldErrors{Required(path, "")}
	}
	if len(v) > 63 {
		return FieldErrors{TooLong(path, 63)}
	}
	return validateDNSSubdomainField(strings.ToLower(v), path)
}

// requestNames maps each request of a claim to its subrequests' names.
type requestNames map[string]map[string]bool

func gatherRequestNames(d *DeviceClaim) requestNames {
	out := requestNames{}
	for _, r := range d.Requests {
		subs := map[string]bool{}
		for _, s := range r.FirstAvailable {
			subs[s.Name] = true
		}
		out[r.Name] = subs
	}
	return out
}

// has: "REQUEST" or "REQUEST/SUBREQUEST".
func (r requestNames) has(name string) bool {
	req, sub, hasSub := strings.Cut(name, "/")
	subs, ok := r[req]
	if !ok || strings.Contains(sub, "/") {
		return false
	}
	return !hasSub || subs[sub]
}

const requestRefMessage = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"

func validateRequestRefs(refs []string, names requestNames, path string) FieldErrors {
	var errs FieldErrors
	seen := map[string]bool{}
	for i, n := range refs {
		p := elemPath(path, "", i)
		if seen[n] {
			errs = append(errs, Duplicate(p, n))
		}
		seen[n] = true
		if !names.has(n) {
			errs = append(errs, Invalid(p, n, requestRefMessage))
		}
	}
	return errs
}

func validateDeviceClaim(d *DeviceClaim, p string) FieldErrors {
	var errs FieldErrors
	names := gatherRequestNames(d)
	if len(d.Requests) > DeviceRequestsMaxSize {
		errs = append(errs, tooMany(p+".requests", len(d.Requests), DeviceRequestsMaxSize))
	}
	seen := map[string]bool{}
	for i, r := range d.Requests {
		rp := elemPath(p, ".requests", i)
		errs = append(errs, validateDNSLabelField(r.Name, rp+".name")...)
		if r.Name != "" && seen[r.Name] {
			errs = append(errs, Duplicate(rp+".name", r.Name))
		}
		seen[r.Name] = true
		switch {
		case r.Exactly == nil && len(r.FirstAvailable) == 0:
			errs = append(errs, Required(rp, "exactly one of `exactly` or `firstAvailable` is required"))
		case r.Exactly != nil && len(r.FirstAvailable) > 0:
			errs = append(errs, Invalid(rp, nil, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
		case r.Exactly != nil:
			e := r.Exactly
			errs = append(errs, validateDeviceClassRef(e.DeviceClassName, rp+".exactly.deviceClassName")...)
			errs = append(errs, validateSelectors(e.Selectors, rp+".exactly.selectors")...)
			errs = append(errs, validateAllocationMode(e.AllocationMode, e.Count, rp+".exactly")...)
			errs = append(errs, validateTolerations(e.Tolerations, rp+".exactly.tolerations")...)
		default:
			if len(r.FirstAvailable) > FirstAvailableDeviceRequestMaxSize {
				errs = append(errs, tooMany(rp+".firstAvailable", len(r.FirstAvailable), FirstAvailableDeviceRequestMaxSize))
			}
			subSeen := map[string]bool{}
			for j, s := range r.FirstAvailable {
				sp := fmt.Sprintf("%s.firstAvailable[%d]", rp, j)
				errs = append(errs, validateDNSLabelField(s.Name, sp+".name")...)
				if s.Name != "" && subSeen[s.Name] {
					errs = append(errs, Duplicate(sp+".name", s.Name))
				}
				subSeen[s.Name] = true
				errs = append(errs, validateDeviceClassRef(s.DeviceClassName, sp+".deviceClassName")...)
				errs = append(errs, validateSelectors(s.Selectors, sp+".selectors")...)
				errs = append(errs, validateAllocationMode(s.AllocationMode, s.Count, sp)...)
				errs = append(errs, validateTolerations(s.Tolerations, sp+".tolerations")...)
			}
		}
	}
	if len(d.Constraints) > DeviceConstraintsMaxSize {
		errs = append(errs, tooMany(p+".constraints", len(d.Constraints), DeviceConstraintsMaxSize))
	}
	for i, c := range d.Constraints {
		cp := elemPath(p, ".constraints", i)
		errs = append(errs, validateRequestRefs(c.Requests, names, cp+".requests")...)
		switch {
		case c.MatchAttribute != nil && c.DistinctAttribute != nil:
			errs = append(errs, Invalid(cp, nil, "exactly one of `matchAttribute` or `distinctAttribute` is required, but multiple fields are set"))
		case c.MatchAttribute != nil:
			errs = append(errs, validateFullyQualifiedName(*c.MatchAttribute, cp+".matchAttribute")...)
		case c.DistinctAttribute != nil:
			errs = append(errs, validateFullyQualifiedName(*c.DistinctAttribute, cp+".distinctAttribute")...)
		default:
			errs = append(errs, Required(cp+".matchAttribute", ""))
		}
	}
	if len(d.Config) > DeviceConfigMaxSize {
		errs = append(errs, tooMany(p+".config", len(d.Config), DeviceConfigMaxSize))
	}
	for i, c := range d.Config {
		cp := elemPath(p, ".config", i)
		errs = append(errs, validateRequestRefs(c.Requests, names, cp+".requests")...)
		errs = append(errs, validateDeviceConfiguration(c.DeviceConfiguration, cp)...)
	}
	return errs
}

func validateDeviceClassRef(name, path string) FieldErrors {
	return validateDNSSubdomainField(name, path)
}

// validateAllocationMode: ExactCount with a count above zero, or All
// without a count. Runs after defaulting (mode ExactCount, count 1) in the
// API server; before it, an empty mode reads as ExactCount.
func validateAllocationMode(mode string, count int64, p string) FieldErrors {
	switch mode {
	case DeviceAllocationModeAll:
		if count != 0 {
			return FieldErrors{Invalid(p+".count", count, fmt.Sprintf("must not be specified when allocationMode is '%s'", mode))}
		}
	case DeviceAllocationModeExactCount, "":
		if count < 0 || (mode != "" && count == 0) {
			return FieldErrors{Invalid(p+".count", count, "must be greater than zero")}
		}
	default:
		return FieldErrors{NotSupported(p+".allocationMode", mode, DeviceAllocationModeAll, DeviceAllocationModeExactCount)}
	}
	return nil
}

func validateSelectors(sels []DeviceSelector, path string) FieldErrors {
	var errs FieldErrors
	if len(sels) > DeviceSelectorsMaxSize {
		errs = append(errs, tooMany(path, len(sels), DeviceSelectorsMaxSize))
	}
	for i, s := range sels {
		sp := elemPath(path, "", i)
		if s.CEL == nil {
			errs = append(errs, Required(sp+".cel", ""))
			continue
		}
		if e := CompileDeviceSelector(s.CEL.Expression, sp+".cel.expression"); e != nil {
			errs = append(errs, e)
		}
	}
	return errs
}

func validateTolerations(ts []DeviceToleration, path string) FieldErrors {
	var errs FieldErrors
	for i, t := range ts {
		tp := elemPath(path, "", i)
		if t.Key != "" {
			for _, msg := range validation.IsQualifiedName(t.Key) {
				errs = append(errs, Invalid(tp+".key", t.Key, msg))
			}
		}
		switch t.Operator {
		case "", DeviceTolerationOpEqual:
		case DeviceTolerationOpExists:
			if t.Value != "" {
				errs = append(errs, Invalid(tp+".value", t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, NotSupported(tp+".operator", t.Operator, DeviceTolerationOpEqual, DeviceTolerationOpExists))
		}
		switch t.Effect {
		case "", DeviceTaintEffectNoSchedule, DeviceTaintEffectNoExecute:
		default:
			errs = append(errs, NotSupported(tp+".effect", t.Effect, DeviceTaintEffectNoExecute, DeviceTaintEffectNoSchedule))
		}
	}
	return errs
}

func validateDeviceConfiguration(c DeviceConfiguration, p string) FieldErrors {
	if c.Opaque == nil {
		return FieldErrors{Required(p+".opaque", "")}
	}
	errs := validateDriverName(c.Opaque.Driver, p+".opaque.driver")
	pp := p + ".opaque.parameters"
	raw := bytes.TrimSpace(c.Opaque.Parameters)
	switch {
	case len(raw) == 0:
		errs = append(errs, Required(pp, ""))
	case len(raw) > OpaqueParametersMaxLength:
		errs = append(errs, TooLong(pp, OpaqueParametersMaxLength))
	default:
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			errs = append(errs, Invalid(pp, "<value omitted>", "parameters must be a valid JSON object: "+err.Error()))
		}
	}
	return errs
}

// validateFullyQualifiedName: DOMAIN/ID, e.g. gpu.nvidia.com/nvlinkDomain.
func validateFullyQualifiedName(name, path string) FieldErrors {
	domain, id, ok := strings.Cut(name, "/")
	if !ok || domain == "" {
		return FieldErrors{Required(path, "a fully qualified name must be a domain and a name separated by a slash")}
	}
	errs := validateCIdentifier(id, path)
	return append(errs, validateAttributeDomain(domain, path)...)
}

func validateCIdentifier(id, path string) FieldErrors {
	var errs FieldErrors
	if len(id) > DeviceMaxIDLength {
		errs = append(errs, TooLong(path, DeviceMaxIDLength))
	}
	for _, msg := range validation.IsCIdentifier(id) {
		errs = append(errs, Invalid(path, id, msg))
	}
	return errs
}

func validateAttributeDomain(domain, path string) FieldErrors {
	var errs FieldErrors
	if len(domain) > DeviceMaxDomainLength {
		errs = append(errs, TooLong(path, DeviceMaxDomainLength))
	}
	for _, msg := range isDNS1123Subdomain(domain) {
		errs = append(errs, Invalid(path, domain, msg))
	}
	return errs
}

// validateQualifiedName: ID or DOMAIN/ID (attribute and capacity names).
func validateQualifiedName(name, path string) FieldErrors {
	if name == "" {
		return FieldErrors{Required(path, "name required")}
	}
	if domain, id, ok := strings.Cut(name, "/"); ok {
		return append(validateCIdentifier(id, path), validateAttributeDomain(domain, path)...)
	}
	return validateCIdentifier(name, path)
}

func validateResourceSliceSpec(s *ResourceSliceSpec) FieldErrors {
	errs := validateDriverName(s.Driver, "spec.driver")
	if s.Pool.Name == "" {
		errs = append(errs, Required("spec.pool.name", ""))
	} else {
		if len(s.Pool.Name) > validation.DNS1123SubdomainMaxLength {
			errs = append(errs, TooLong("spec.pool.name", validation.DNS1123SubdomainMaxLength))
		}
		for part := range strings.SplitSeq(s.Pool.Name, "/") {
			for _, msg := range isDNS1123Subdomain(part) {
				errs = append(errs, Invalid("spec.pool.name", s.Pool.Name, msg))
			}
		}
	}
	if s.Pool.Generation < 0 {
		errs = append(errs, Invalid("spec.pool.generation", s.Pool.Generation, "must be greater than or equal to zero"))
	}
	if s.Pool.ResourceSliceCount <= 0 {
		errs = append(errs, Invalid("spec.pool.resourceSliceCount", s.Pool.ResourceSliceCount, "must be greater than zero"))
	}
	n := 0
	if s.NodeName != nil {
		n++
		for _, msg := range isDNS1123Subdomain(*s.NodeName) {
			errs = append(errs, Invalid("spec.nodeName", *s.NodeName, msg))
		}
	}
	if s.NodeSelector != nil {
		n++
		for i, t := range s.NodeSelector.NodeSelectorTerms {
			errs = append(errs, validateNodeSelectorTerm(t, fmt.Sprintf("spec.nodeSelector.nodeSelectorTerms[%d]", i))...)
		}
		if len(s.NodeSelector.NodeSelectorTerms) != 1 {
			errs = append(errs, Invalid("spec.nodeSelector.nodeSelectorTerms", len(s.NodeSelector.NodeSelectorTerms), "must have exactly one node selector term"))
		}
	}
	if s.AllNodes != nil && *s.AllNodes {
		n++
	}
	switch {
	case n == 0:
		errs = append(errs, Required("spec", "exactly one of `nodeName`, `nodeSelector`, `allNodes` is required"))
	case n > 1:
		errs = append(errs, Invalid("spec", nil, "exactly one of `nodeName`, `nodeSelector`, `allNodes` is required, but multiple fields are set"))
	}
	if s.SharedCounters != nil && s.Devices != nil {
		errs = append(errs, Invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed"))
	}
	maxDevices := ResourceSliceMaxDevices
	for _, d := range s.Devices {
		if len(d.Taints) > 0 || len(d.ConsumesCounters) > 0 {
			maxDevices = ResourceSliceMaxDevicesWithTaintsOrConsumesCounters
		}
	}
	if len(s.Devices) > maxDevices {
		errs = append(errs, tooMany("spec.devices", len(s.Devices), maxDevices))
	}
	errs = append(errs, validateCounterSets(s.SharedCounters)...)
	names := map[string]bool{}
	for i, d := range s.Devices {
		dp := fmt.Sprintf("spec.devices[%d]", i)
		errs = append(errs, validateConsumesCounters(d.ConsumesCounters, dp+".consumesCounters")...)
		errs = append(errs, validateDNSLabelField(d.Name, dp+".name")...)
		if d.Name != "" && names[d.Name] {
			errs = append(errs, Duplicate(dp+".name", d.Name))
		}
		names[d.Name] = true
		if len(d.Attributes)+len(d.Capacity) > ResourceSliceMaxAttributesAndCapacitiesPerDevice {
			errs = append(errs, Invalid(dp, len(d.Attributes)+len(d.Capacity), fmt.Sprintf("the total number of attributes and capacities must not exceed %d", ResourceSliceMaxAttributesAndCapacitiesPerDevice)))
		}
		for _, name := range sortedKeys(d.Attributes) {
			ap := dp + ".attributes[" + name + "]"
			errs = append(errs, validateQualifiedName(name, ap)...)
			errs = append(errs, validateDeviceAttribute(d.Attributes[name], ap)...)
		}
		for _, name := range sortedKeys(d.Capacity) {
			errs = append(errs, validateQualifiedName(name, dp+".capacity["+name+"]")...)
			if v := d.Capacity[name].Value; v.Sign() < 0 {
				errs = append(errs, Invalid(dp+".capacity["+name+"].value", v.String(), "must be greater than or equal to 0"))
			}
		}
		for j, t := range d.Taints {
			tp := fmt.Sprintf("%s.taints[%d]", dp, j)
			for _, msg := range validation.IsQualifiedName(t.Key) {
				errs = append(errs, Invalid(tp+".key", t.Key, msg))
			}
			if t.Effect != DeviceTaintEffectNoSchedule && t.Effect != DeviceTaintEffectNoExecute {
				errs = append(errs, NotSupported(tp+".effect", t.Effect, DeviceTaintEffectNoExecute, DeviceTaintEffectNoSchedule))
			}
		}
	}
	return errs
}

// validateCounterSets checks a slice's sharedCounters as Kubernetes:
// at most 8, names unique DNS labels, each with 1..32 counters.
func validateCounterSets(sets []CounterSet) FieldErrors {
	if len(sets) > ResourceSliceMaxCounterSets {
		return FieldErrors{tooMany("spec.sharedCounters", len(sets), ResourceSliceMaxCounterSets)}
	}
	var errs FieldErrors
	seen := map[string]bool{}
	for i, cs := range sets {
		p := fmt.Sprintf("spec.sharedCounters[%d]", i)
		errs = append(errs, validateDNSLabelField(cs.Name, p+".name")...)
		errs = append(errs, validateCounters(cs.Counters, ResourceSliceMaxCountersPerCounterSet, p+".counters")...)
		if seen[cs.Name] {
			errs = append(errs, Duplicate(p, cs.Name))
		}
		seen[cs.Name] = true
	}
	return errs
}

// validateConsumesCounters checks a device's consumesCounters: at most 2,
// one per counter set, each naming its set and 1..32 counters.
func validateConsumesCounters(cs []DeviceCounterConsumption, p string) FieldErrors {
	if len(cs) > ResourceSliceMaxDeviceCounterConsumptionsPerDevice {
		return FieldErrors{tooMany(p, len(cs), ResourceSliceMaxDeviceCounterConsumptionsPerDevice)}
	}
	var errs FieldErrors
	seen := map[string]bool{}
	for i, c := range cs {
		cp := elemPath(p, "", i)
		errs = append(errs, validateDNSLabelField(c.CounterSet, cp+".counterSet")...)
		errs = append(errs, validateCounters(c.Counters, ResourceSliceMaxCountersPerDeviceCounterConsumption, cp+".counters")...)
		if seen[c.CounterSet] {
			errs = append(errs, Duplicate(cp, c.CounterSet))
		}
		seen[c.CounterSet] = true
	}
	return errs
}

func validateCounters(m map[string]Counter, limit int, p string) FieldErrors {
	switch {
	case len(m) == 0:
		return FieldErrors{Required(p, "")}
	case len(m) > limit:
		return FieldErrors{tooMany(p, len(m), limit)}
	}
	var errs FieldErrors
	for _, name := range sortedKeys(m) {
		errs = append(errs, validateDNSLabelField(name, p+"["+name+"]")...)
	}
	return errs
}

func validateDeviceAttribute(a DeviceAttribute, p string) FieldErrors {
	var errs FieldErrors
	n := 0
	if a.IntValue != nil {
		n++
	}
	if a.BoolValue != nil {
		n++
	}
	if a.StringValue != nil {
		n++
		if len(*a.StringValue) > DeviceAttributeMaxValueLength {
			errs = append(errs, TooLong(p+".string", DeviceAttributeMaxValueLength))
		}
	}
	if a.VersionValue != nil {
		n++
		if _, err := semver.Parse(*a.VersionValue); err != nil {
			errs = append(errs, Invalid(p+".version", *a.VersionValue, "must be a string compatible with semver.org spec 2.0.0"))
		}
		if len(*a.VersionValue) > DeviceAttributeMaxValueLength {
			errs = append(errs, TooLong(p+".version", DeviceAttributeMaxValueLength))
		}
	}
	switch n {
	case 0:
		errs = append(errs, Required(p, "exactly one value must be specified"))
	case 1:
	default:
		errs = append(errs, Invalid(p, nil, "exactly one value must be specified"))
	}
	return errs
}

// validateResourceUpdate: a claim's spec and a template's spec are
// immutable; a claim's status keeps Kubernetes' invariants (reservedFor
// needs an allocation, no new consumers once the claim is being deleted,
// an allocation is not changed, only removed); a class, a slice may change.
func validateResourceUpdate(n, o Object) FieldErrors {
	switch nc := n.(type) {
	case *ResourceClaim:
		oc := o.(*ResourceClaim)
		var errs FieldErrors
		if !jsonEqual(nc.Spec, oc.Spec) {
			errs = append(errs, Invalid("spec", "<value omitted>", "field is immutable"))
		}
		return append(errs, validateClaimStatusUpdate(nc, oc)...)
	case *ResourceClaimTemplate:
		if !jsonEqual(nc.Spec, o.(*ResourceClaimTemplate).Spec) {
			return FieldErrors{Invalid("spec", "<value omitted>", "field is immutable")}
		}
	}
	return nil
}

func jsonEqual(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

func validateClaimStatusUpdate(n, o *ResourceClaim) FieldErrors {
	var errs FieldErrors
	st, old := &n.Status, &o.Status
	if len(st.ReservedFor) > ResourceClaimReservedForMaxSize {
		errs = append(errs, tooMany("status.reservedFor", len(st.ReservedFor), ResourceClaimReservedForMaxSize))
	}
	seen := map[string]bool{}
	for i, r := range st.ReservedFor {
		rp := fmt.Sprintf("status.reservedFor[%d]", i)
		if r.Resource == "" {
			errs = append(errs, Required(rp+".resource", ""))
		}
		if r.Name == "" {
			errs = append(errs, Required(rp+".name", ""))
		}
		if r.UID == "" {
			errs = append(errs, Required(rp+".uid", ""))
		} else if seen[r.UID] {
			errs = append(errs, Duplicate(rp, r.UID))
		}
		seen[r.UID] = true
	}
	if len(st.ReservedFor) > 0 {
		if st.Allocation == nil {
			errs = append(errs, Forbidden("status.reservedFor", "may not be specified when `allocated` is not set"))
		} else if n.DeletionTimestamp != nil {
			for _, r := range st.ReservedFor {
				if !o.IsReservedFor(r.UID) {
					errs = append(errs, Forbidden("status.reservedFor", "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set"))
					break
				}
			}
		}
	}
	switch {
	case old.Allocation != nil && st.Allocation != nil:
		if !jsonEqual(st.Allocation, old.Allocation) {
			errs = append(errs, Invalid("status.allocation", "<value omitted>", "field is immutable"))
		}
	case st.Allocation != nil:
		names := gatherRequestNames(&n.Spec.Devices)
		if len(st.Allocation.Devices.Results) > AllocationResultsMaxSize {
			errs = append(errs, tooMany("status.allocation.devices.results", len(st.Allocation.Devices.Results), AllocationResultsMaxSize))
		}
		for i, r := range st.Allocation.Devices.Results {
			rp := fmt.Sprintf("status.allocation.devices.results[%d]", i)
			if !names.has(r.Request) {
				errs = append(errs, Invalid(rp+".request", r.Request, requestRefMessage))
			}
			errs = append(errs, validateDriverName(r.Driver, rp+".driver")...)
			if r.Pool == "" {
				errs = append(errs, Required(rp+".pool", ""))
			}
			errs = append(errs, validateDNSLabelField(r.Device, rp+".device")...)
		}
	}
	return errs
}

// defaultResourceObject: allocationMode ExactCount and count 1, as
// Kubernetes defaults v1 requests and subrequests.
func defaultResourceObject(obj Object) {
	var d *DeviceClaim
	switch o := obj.(type) {
	case *ResourceClaim:
		d = &o.Spec.Devices
	case *ResourceClaimTemplate:
		d = &o.Spec.Spec.Devices
	default:
		return
	}
	for i := range d.Requests {
		if e := d.Requests[i].Exactly; e != nil {
			defaultAllocationMode(&e.AllocationMode, &e.Count)
		}
		for j := range d.Requests[i].FirstAvailable {
			s := &d.Requests[i].FirstAvailable[j]
			defaultAllocationMode(&s.AllocationMode, &s.Count)
		}
	}
}

func defaultAllocationMode(mode *string, count *int64) {
	if *mode == "" {
		*mode = DeviceAllocationModeExactCount
	}
	if *mode == DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}

// validatePodResourceClaims checks spec.resourceClaims and the
// containers' resources.claims, as Kubernetes' pod validation.
func validatePodResourceClaims(s *PodSpec, p string) FieldErrors {
	var errs FieldErrors
	names := map[string]bool{}
	for i, c := range s.ResourceClaims {
		cp := elemPath(p, ".resourceClaims", i)
		errs = append(errs, validateDNSLabelField(c.Name, cp+".name")...)
		if c.Name != "" && names[c.Name] {
			errs = append(errs, Duplicate(cp+".name", c.Name))
		}
		names[c.Name] = true
		switch {
		case c.ResourceClaimName != nil && c.ResourceClaimTemplateName != nil:
			errs = append(errs, Invalid(cp, c, "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"))
		case c.ResourceClaimName != nil:
			errs = append(errs, validateDNSSubdomainField(*c.ResourceClaimName, cp+".resourceClaimName")...)
		case c.ResourceClaimTemplateName != nil:
			errs = append(errs, validateDNSSubdomainField(*c.ResourceClaimTemplateName, cp+".resourceClaimTemplateName")...)
		default:
			errs = append(errs, Required(cp, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
		}
	}
	for kind, cs := range map[string][]Container{"containers": s.Containers, "initContainers": s.InitContainers} {
		for i, c := range cs {
			seen := map[string]bool{}
			for j, rc := range c.Resources.Claims {
				rp := fmt.Sprintf("%s.%s[%d].resources.claims[%d]", p, kind, i, j)
				key := rc.Name + "/" + rc.Request
				switch {
				case rc.Name == "":
					errs = append(errs, Required(rp+".name", ""))
				case !names[rc.Name]:
					errs = append(errs, NotFoundField(rp, rc.Name, "must be one of the names in pod.spec.resourceClaims"))
				case seen[key]:
					errs = append(errs, Duplicate(rp, rc.Name))
				}
				seen[key] = true
				if rc.Request != "" {
					errs = append(errs, validateDNSLabelField(rc.Request, rp+".request")...)
				}
			}
		}
	}
	return errs
}

// NotFoundField is Kubernetes' field.NotFound with a detail.
func NotFoundField(field string, value any, detail string) *FieldError {
	return &FieldError{Type: FieldNotFound, Field: field, Value: value, Detail: detail}
}
