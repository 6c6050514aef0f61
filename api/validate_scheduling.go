package api

import (
	"fmt"
)

// validatePriorityClass follows Kubernetes' pkg/apis/scheduling/validation:
// a DNS-1123 subdomain name, names with "system-" reserved for the built-in
// classes, user values at most one billion, a known preemption policy.
func validatePriorityClass(pc *PriorityClass) FieldErrors {
	errs := validateMeta(&pc.ObjectMeta, false, isDNS1123Subdomain)
	system := false
	for _, s := range SystemPriorityClasses() {
		if s.Name == pc.Name {
			system = true
			if pc.Value != s.Value {
				errs = append(errs, Invalid("value", pc.Value, fmt.Sprintf("value of system priority class %s must be %d", s.Name, s.Value)))
			}
		}
	}
	if !system {
		if len(pc.Name) >= len(SystemPriorityClassPrefix) && pc.Name[:len(SystemPriorityClassPrefix)] == SystemPriorityClassPrefix {
			errs = append(errs, Forbidden("metadata.name", "priority class names with '"+SystemPriorityClassPrefix+"' prefix are reserved for system use only"))
		}
		if pc.Value > HighestUserDefinablePriority {
			errs = append(errs, Forbidden("value", fmt.Sprintf("maximum allowed value of a user defined priority is %d", HighestUserDefinablePriority)))
		}
	}
	if p := pc.PreemptionPolicy; p != nil && *p != PreemptLowerPriority && *p != PreemptNever {
		errs = append(errs, NotSupported("preemptionPolicy", *p, PreemptNever, PreemptLowerPriority))
	}
	return errs
}

// validatePriorityClassUpdate: value and preemptionPolicy are immutable.
func validatePriorityClassUpdate(n, o *PriorityClass) FieldErrors {
	var errs FieldErrors
	if n.Value != o.Value {
		errs = append(errs, Forbidden("value", "may not be changed in an update."))
	}
	np, op := PreemptLowerPriority, PreemptLowerPriority
	if n.PreemptionPolicy != nil {
		np = *n.PreemptionPolicy
	}
	if o.PreemptionPolicy != nil {
		op = *o.PreemptionPolicy
	}
	if np != op {
		errs = append(errs, Invalid("preemptionPolicy", np, "field is immutable"))
	}
	return errs
}

// defaultPriorityClass: preemptionPolicy PreemptLowerPriority, as Kubernetes.
func defaultPriorityClass(pc *PriorityClass) {
	if pc.PreemptionPolicy == nil {
		p := PreemptLowerPriority
		pc.PreemptionPolicy = &p
	}
}
