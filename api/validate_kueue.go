package api

import (
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Validation of the Kueue kinds, as Kueue's CRD schema rules and its
// validating webhooks (pkg/webhooks/*_webhook.go) word it.

// Kueue's limits (+kubebuilder:validation:MaxItems).
const (
	kueueMaxResourceGroups   = 16
	kueueMaxCoveredResources = 64
	kueueMaxFlavors          = 64
	kueueMaxFlavorItems      = 8 // nodeLabels, nodeTaints, tolerations of a ResourceFlavor
	kueueMaxPodSets          = 8
	kueueMaxTopologyLevels   = 16
	kueueHostnameLabel       = "kubernetes.io/hostname"
)

func validateKueue(obj Object) FieldErrors {
	switch o := obj.(type) {
	case *ResourceFlavor:
		return append(validateMeta(&o.ObjectMeta, false, isDNS1123Subdomain), validateResourceFlavor(o)...)
	case *ClusterQueue:
		return append(validateMeta(&o.ObjectMeta, false, isDNS1123Subdomain), validateClusterQueue(o)...)
	case *LocalQueue:
		errs := validateMeta(&o.ObjectMeta, true, isDNS1123Subdomain)
		if o.Spec.ClusterQueue != "" {
			for _, msg := range isDNS1123Subdomain(o.Spec.ClusterQueue) {
				errs = append(errs, Invalid("spec.clusterQueue", o.Spec.ClusterQueue, msg))
			}
		}
		return append(errs, validateStopPolicy(o.Spec.StopPolicy, "spec.stopPolicy")...)
	case *Workload:
		return append(validateMeta(&o.ObjectMeta, true, isDNS1123Subdomain), validateWorkload(o)...)
	case *Topology:
		return append(validateMeta(&o.ObjectMeta, false, isDNS1123Subdomain), validateTopology(o)...)
	}
	return nil
}

func validateKueueUpdate(n, o Object) FieldErrors {
	switch n := n.(type) {
	case *LocalQueue:
		if n.Spec.ClusterQueue != o.(*LocalQueue).Spec.ClusterQueue {
			return FieldErrors{Invalid("spec.clusterQueue", n.Spec.ClusterQueue, "field is immutable")}
		}
	case *Topology:
		if !reflect.DeepEqual(n.Spec.Levels, o.(*Topology).Spec.Levels) {
			return FieldErrors{Invalid("spec.levels", n.Spec.Levels, "field is immutable")}
		}
	case *ResourceFlavor:
		old := o.(*ResourceFlavor)
		if old.Spec.TopologyName == nil {
			return nil
		}
		var errs FieldErrors
		if !reflect.DeepEqual(emptyNil(n.Spec.NodeLabels), emptyNil(old.Spec.NodeLabels)) {
			errs = append(errs, Invalid("spec", "", "nodeLabels are immutable when topologyName is set"))
		}
		if !reflect.DeepEqual(n.Spec.Tolerations, old.Spec.Tolerations) {
			errs = append(errs, Invalid("spec", "", "tolerations are immutable when topologyName is set"))
		}
		if n.Spec.TopologyName == nil || *n.Spec.TopologyName != *old.Spec.TopologyName {
			errs = append(errs, Invalid("spec", "", "topologyName is immutable when topologyName is set"))
		}
		return errs
	case *Workload:
		old := o.(*Workload)
		if old.Status.Admission != nil && !reflect.DeepEqual(n.Spec.PodSets, old.Spec.PodSets) {
			return FieldErrors{Invalid("spec.podSets", "", "field is immutable")}
		}
	}
	return nil
}

func validateResourceFlavor(rf *ResourceFlavor) FieldErrors {
	var errs FieldErrors
	s := rf.Spec
	if len(s.NodeLabels) > kueueMaxFlavorItems {
		errs = append(errs, tooMany("spec.nodeLabels", len(s.NodeLabels), kueueMaxFlavorItems))
	}
	errs = append(errs, validateLabels(s.NodeLabels, "spec.nodeLabels")...)
	if len(s.NodeTaints) > kueueMaxFlavorItems {
		errs = append(errs, tooMany("spec.nodeTaints", len(s.NodeTaints), kueueMaxFlavorItems))
	}
	type keyEffect struct{ key, effect string }
	seen := map[keyEffect]bool{}
	for i, t := range s.NodeTaints {
		p := fmt.Sprintf("spec.nodeTaints[%d]", i)
		errs = append(errs, validateTaint(t, p)...)
		if seen[keyEffect{t.Key, t.Effect}] {
			d := Duplicate(p, t)
			d.Detail = "taints must be unique by key and effect pair"
			errs = append(errs, d)
		}
		seen[keyEffect{t.Key, t.Effect}] = true
	}
	if len(s.Tolerations) > kueueMaxFlavorItems {
		errs = append(errs, tooMany("spec.tolerations", len(s.Tolerations), kueueMaxFlavorItems))
	}
	for i, t := range s.Tolerations {
		errs = append(errs, validateToleration(t, fmt.Sprintf("spec.tolerations[%d]", i))...)
	}
	if s.TopologyName != nil && len(s.NodeLabels) == 0 {
		errs = append(errs, Invalid("spec", "", "at least one nodeLabel is required when topology is set"))
	}
	return errs
}

func validateClusterQueue(cq *ClusterQueue) FieldErrors {
	var errs FieldErrors
	s := cq.Spec
	if len(s.ResourceGroups) > kueueMaxResourceGroups {
		errs = append(errs, tooMany("spec.resourceGroups", len(s.ResourceGroups), kueueMaxResourceGroups))
	}
	seenRes, seenFlavors := map[string]bool{}, map[string]bool{}
	for i, rg := range s.ResourceGroups {
		p := fmt.Sprintf("spec.resourceGroups[%d]", i)
		if len(rg.CoveredResources) > kueueMaxCoveredResources {
			errs = append(errs, tooMany(p+".coveredResources", len(rg.CoveredResources), kueueMaxCoveredResources))
		}
		if len(rg.Flavors) > kueueMaxFlavors {
			errs = append(errs, tooMany(p+".flavors", len(rg.Flavors), kueueMaxFlavors))
		}
		for j, name := range rg.CoveredResources {
			rp := fmt.Sprintf("%s.coveredResources[%d]", p, j)
			for _, msg := range validation.IsQualifiedName(name) {
				errs = append(errs, Invalid(rp, name, msg))
			}
			if seenRes[name] {
				errs = append(errs, Duplicate(rp, name))
			}
			seenRes[name] = true
		}
		for j, f := range rg.Flavors {
			fp := fmt.Sprintf("%s.flavors[%d]", p, j)
			if f.Name == "" {
				errs = append(errs, Required(fp+".name", ""))
			}
			if seenFlavors[f.Name] {
				errs = append(errs, Duplicate(fp+".name", f.Name))
			}
			seenFlavors[f.Name] = true
			if len(f.Resources) != len(rg.CoveredResources) {
				errs = append(errs, Invalid(p, "", "flavors must have the same number of resources as the coveredResources"))
			}
			for k, rq := range f.Resources {
				if k >= len(rg.CoveredResources) {
					break
				}
				qp := fmt.Sprintf("%s.resources[%d]", fp, k)
				if rq.Name != rg.CoveredResources[k] {
					errs = append(errs, Invalid(qp+".name", rq.Name, "must match the name in coveredResources"))
				}
				errs = append(errs, validateResourceQuantity(rq.Name, rq.NominalQuota, qp+".nominalQuota")...)
				if rq.BorrowingLimit != nil {
					if s.CohortName == "" {
						errs = append(errs, Invalid(qp+".borrowingLimit", rq.BorrowingLimit.String(), "must be nil when cohort is empty"))
					}
					errs = append(errs, validateResourceQuantity(rq.Name, *rq.BorrowingLimit, qp+".borrowingLimit")...)
				}
				if rq.LendingLimit != nil {
					errs = append(errs, validateResourceQuantity(rq.Name, *rq.LendingLimit, qp+".lendingLimit")...)
					if s.CohortName == "" {
						errs = append(errs, Invalid(qp+".lendingLimit", rq.LendingLimit.String(), "must be nil when cohort is empty"))
					}
					if rq.LendingLimit.Cmp(rq.NominalQuota) > 0 {
						errs = append(errs, Invalid(qp+".lendingLimit", rq.LendingLimit.String(), "must be less than or equal to the nominalQuota"))
					}
				}
			}
		}
	}
	if s.CohortName != "" {
		for _, msg := range isDNS1123Subdomain(s.CohortName) {
			errs = append(errs, Invalid("spec.cohortName", s.CohortName, msg))
		}
	}
	switch s.QueueingStrategy {
	case "", StrictFIFO, BestEffortFIFO:
	default:
		errs = append(errs, NotSupported("spec.queueingStrategy", s.QueueingStrategy, StrictFIFO, BestEffortFIFO))
	}
	if s.NamespaceSelector != nil {
		errs = append(errs, validateLabelSelector(s.NamespaceSelector, "spec.namespaceSelector")...)
	}
	if p := s.Preemption; p != nil {
		errs = append(errs, enumOf("spec.preemption.reclaimWithinCohort", p.ReclaimWithinCohort, KueuePreemptNever, KueuePreemptLowerPriority, KueuePreemptAny)...)
		errs = append(errs, enumOf("spec.preemption.withinClusterQueue", p.WithinClusterQueue, KueuePreemptNever, KueuePreemptLowerPriority, KueuePreemptLowerOrNewerEqualPriority)...)
		if b := p.BorrowWithinCohort; b != nil {
			errs = append(errs, enumOf("spec.preemption.borrowWithinCohort.policy", b.Policy, KueuePreemptNever, KueuePreemptLowerPriority)...)
			if b.Policy != "" && b.Policy != KueuePreemptNever {
				errs = append(errs, Unknown("spec.preemption.borrowWithinCohort", "borrowWithinCohort policies other than Never are not supported by skiff"))
			}
			if p.ReclaimWithinCohort == KueuePreemptNever && b.Policy != "" && b.Policy != KueuePreemptNever {
				errs = append(errs, Invalid("spec.preemption", "", "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"))
			}
		}
	}
	return append(errs, validateStopPolicy(s.StopPolicy, "spec.stopPolicy")...)
}

func enumOf(path, v string, allowed ...string) FieldErrors {
	if v == "" || slices.Contains(allowed, v) {
		return nil
	}
	return FieldErrors{NotSupported(path, v, allowed...)}
}

func validateStopPolicy(p *string, path string) FieldErrors {
	if p == nil {
		return nil
	}
	return enumOf(path, *p, StopPolicyNone, StopPolicyHold, StopPolicyHoldAndDrain)
}

func validateWorkload(w *Workload) FieldErrors {
	var errs FieldErrors
	s := w.Spec
	switch n := len(s.PodSets); {
	case n == 0:
		errs = append(errs, Required("spec.podSets", ""))
	case n > kueueMaxPodSets:
		errs = append(errs, tooMany("spec.podSets", n, kueueMaxPodSets))
	}
	seen := map[string]bool{}
	for i, ps := range s.PodSets {
		p := fmt.Sprintf("spec.podSets[%d]", i)
		for _, msg := range isDNS1123Label(ps.Name) {
			errs = append(errs, Invalid(p+".name", ps.Name, msg))
		}
		if seen[ps.Name] {
			errs = append(errs, Duplicate(p+".name", ps.Name))
		}
		seen[ps.Name] = true
		errs = append(errs, nonNegative(int64(ps.Count), p+".count")...)
		if ps.MinCount != nil {
			errs = append(errs, Unknown(p+".minCount", "partial admission is not supported by skiff"))
		}
		errs = append(errs, validatePodSpec(&ps.Template.Spec, p+".template.spec")...)
	}
	if s.PriorityClassRef != nil && s.Priority == nil {
		errs = append(errs, Invalid("spec", "", "priority should not be nil when priorityClassRef is set"))
	}
	return errs
}

func validateTopology(t *Topology) FieldErrors {
	var errs FieldErrors
	levels := t.Spec.Levels
	switch n := len(levels); {
	case n == 0:
		errs = append(errs, Required("spec.levels", ""))
	case n > kueueMaxTopologyLevels:
		errs = append(errs, tooMany("spec.levels", n, kueueMaxTopologyLevels))
	}
	seen := map[string]bool{}
	for i, l := range levels {
		p := fmt.Sprintf("spec.levels[%d].nodeLabel", i)
		if l.NodeLabel == "" {
			errs = append(errs, Required(p, ""))
		}
		for _, msg := range validation.IsQualifiedName(l.NodeLabel) {
			errs = append(errs, Invalid(p, l.NodeLabel, msg))
		}
		if seen[l.NodeLabel] {
			errs = append(errs, Invalid("spec.levels", "", "must be unique"))
		}
		seen[l.NodeLabel] = true
		if l.NodeLabel == kueueHostnameLabel && i != len(levels)-1 {
			errs = append(errs, Invalid("spec.levels", "", "the kubernetes.io/hostname label can only be used at the lowest level of topology"))
		}
	}
	return errs
}
