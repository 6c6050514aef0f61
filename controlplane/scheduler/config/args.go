package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	v1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
)

// argKind is what this package knows about one plugin's args kind
// (PLUGINArgs): how to make, default and validate it, as Kubernetes'
// SetDefaults_* and Validate*Args.
type argKind struct {
	new      func() runtime.Object
	defaults func(runtime.Object)
	validate func(*field.Path, runtime.Object) field.ErrorList
}

// argKinds by plugin name.
var argKinds = map[string]argKind{
	"NodeResourcesFit": {
		new:      func() runtime.Object { return &v1.NodeResourcesFitArgs{} },
		defaults: func(o runtime.Object) { defaultFitArgs(o.(*v1.NodeResourcesFitArgs)) },
		validate: func(p *field.Path, o runtime.Object) field.ErrorList {
			return validateFitArgs(p, o.(*v1.NodeResourcesFitArgs))
		},
	},
	"NodeResourcesBalancedAllocation": {
		new: func() runtime.Object { return &v1.NodeResourcesBalancedAllocationArgs{} },
		defaults: func(o runtime.Object) {
			a := o.(*v1.NodeResourcesBalancedAllocationArgs)
			if len(a.Resources) == 0 {
				a.Resources = defaultResources()
			}
			for i := range a.Resources {
				if a.Resources[i].Weight == 0 {
					a.Resources[i].Weight = 1
				}
			}
		},
		validate: func(p *field.Path, o runtime.Object) field.ErrorList {
			var errs field.ErrorList
			seen := map[string]bool{}
			for i, r := range o.(*v1.NodeResourcesBalancedAllocationArgs).Resources {
				if seen[r.Name] {
					errs = append(errs, field.Duplicate(p.Child("resources").Index(i).Child("name"), r.Name))
				}
				seen[r.Name] = true
				if r.Weight != 1 {
					errs = append(errs, field.Invalid(p.Child("resources").Index(i).Child("weight"), r.Weight, "must be 1"))
				}
			}
			return errs
		},
	},
	"InterPodAffinity": {
		new: func() runtime.Object { return &v1.InterPodAffinityArgs{} },
		defaults: func(o runtime.Object) {
			if a := o.(*v1.InterPodAffinityArgs); a.HardPodAffinityWeight == nil {
				a.HardPodAffinityWeight = ptr.To[int32](DefaultHardPodAffinityWeight)
			}
		},
		validate: func(p *field.Path, o runtime.Object) field.ErrorList {
			if w := *o.(*v1.InterPodAffinityArgs).HardPodAffinityWeight; w < 0 || w > 100 {
				return field.ErrorList{field.Invalid(p.Child("hardPodAffinityWeight"), w, "not in valid range [0, 100]")}
			}
			return nil
		},
	},
	"PodTopologySpread": {
		new: func() runtime.Object { return &v1.PodTopologySpreadArgs{} },
		defaults: func(o runtime.Object) {
			if a := o.(*v1.PodTopologySpreadArgs); a.DefaultingType == "" {
				a.DefaultingType = v1.SystemDefaulting
			}
		},
		validate: func(p *field.Path, o runtime.Object) field.ErrorList {
			return validateSpreadArgs(p, o.(*v1.PodTopologySpreadArgs))
		},
	},
	"NodeAffinity": {
		new:      func() runtime.Object { return &v1.NodeAffinityArgs{} },
		defaults: func(runtime.Object) {},
		validate: func(p *field.Path, o runtime.Object) field.ErrorList {
			a := o.(*v1.NodeAffinityArgs).AddedAffinity
			if a == nil {
				return nil
			}
			var errs field.ErrorList
			if ns := a.RequiredDuringSchedulingIgnoredDuringExecution; ns != nil {
				_, err := nodeaffinity.NewNodeSelector(ns, field.WithPath(p.Child("addedAffinity", "requiredDuringSchedulingIgnoredDuringExecution")))
				errs = append(errs, fieldErrors(err)...)
			}
			if terms := a.PreferredDuringSchedulingIgnoredDuringExecution; len(terms) > 0 {
				_, err := nodeaffinity.NewPreferredSchedulingTerms(terms, field.WithPath(p.Child("addedAffinity", "preferredDuringSchedulingIgnoredDuringExecution")))
				errs = append(errs, fieldErrors(err)...)
			}
			return errs
		},
	},
	"DefaultPreemption": {
		new: func() runtime.Object { return &v1.DefaultPreemptionArgs{} },
		defaults: func(o runtime.Object) {
			a := o.(*v1.DefaultPreemptionArgs)
			if a.MinCandidateNodesPercentage == nil {
				a.MinCandidateNodesPercentage = ptr.To[int32](DefaultMinCandidateNodesPercentage)
			}
			if a.MinCandidateNodesAbsolute == nil {
				a.MinCandidateNodesAbsolute = ptr.To[int32](DefaultMinCandidateNodesAbsolute)
			}
		},
		validate: func(p *field.Path, o runtime.Object) field.ErrorList {
			a := o.(*v1.DefaultPreemptionArgs)
			pp, ap := p.Child("minCandidateNodesPercentage"), p.Child("minCandidateNodesAbsolute")
			pct, abs := *a.MinCandidateNodesPercentage, *a.MinCandidateNodesAbsolute
			var errs field.ErrorList
			if pct < 0 || pct > 100 {
				errs = append(errs, field.Invalid(pp, pct, "not in valid range [0, 100]"))
			}
			if abs < 0 {
				errs = append(errs, field.Invalid(ap, abs, "not in valid range [0, inf)"))
			}
			if pct == 0 && abs == 0 {
				errs = append(errs, field.Invalid(pp, pct, "cannot be zero at the same time as minCandidateNodesAbsolute"),
					field.Invalid(ap, abs, "cannot be zero at the same time as minCandidateNodesPercentage"))
			}
			return errs
		},
	},
	"VolumeBinding": {
		new: func() runtime.Object { return &v1.VolumeBindingArgs{} },
		defaults: func(o runtime.Object) {
			if a := o.(*v1.VolumeBindingArgs); a.BindTimeoutSeconds == nil {
				a.BindTimeoutSeconds = ptr.To[int64](600)
			}
		},
		validate: func(p *field.Path, o runtime.Object) field.ErrorList {
			a := o.(*v1.VolumeBindingArgs)
			var errs field.ErrorList
			if *a.BindTimeoutSeconds < 0 {
				errs = append(errs, field.Invalid(p.Child("bindTimeoutSeconds"), *a.BindTimeoutSeconds, "invalid BindTimeoutSeconds, should not be a negative value"))
			}
			if a.Shape != nil {
				errs = append(errs, field.Invalid(p.Child("shape"), a.Shape, "unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring"))
			}
			return errs
		},
	},
	"DynamicResources": {
		new: func() runtime.Object { return &v1.DynamicResourcesArgs{} },
		defaults: func(o runtime.Object) {
			if a := o.(*v1.DynamicResourcesArgs); a.FilterTimeout == nil {
				a.FilterTimeout = &metav1.Duration{Duration: DefaultDRAFilterTimeout}
			}
		},
		validate: func(p *field.Path, o runtime.Object) field.ErrorList {
			a := o.(*v1.DynamicResourcesArgs)
			var errs field.ErrorList
			if a.FilterTimeout.Duration < 0 {
				errs = append(errs, field.Invalid(p.Child("filterTimeout"), a.FilterTimeout, "must be zero or positive"))
			}
			if a.BindingTimeout != nil {
				errs = append(errs, field.Forbidden(p.Child("bindingTimeout"), "DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled"))
			}
			return errs
		},
	},
	"Coscheduling": {
		new: func() runtime.Object { return &CoschedulingArgs{} },
		defaults: func(o runtime.Object) {
			if a := o.(*CoschedulingArgs); a.PermitWaitingTimeSeconds == nil {
				a.PermitWaitingTimeSeconds = ptr.To[int64](DefaultPermitWaitingTimeSeconds)
			}
		},
		validate: func(p *field.Path, o runtime.Object) field.ErrorList {
			a := o.(*CoschedulingArgs)
			var errs field.ErrorList
			if *a.PermitWaitingTimeSeconds <= 0 {
				errs = append(errs, field.Invalid(p.Child("permitWaitingTimeSeconds"), *a.PermitWaitingTimeSeconds, "must be greater than 0"))
			}
			if b := a.PodGroupBackoffSeconds; b != nil && *b != 0 {
				errs = append(errs, field.Forbidden(p.Child("podGroupBackoffSeconds"), "not supported by skiff: each member is retried with its own backoff (podInitialBackoffSeconds, podMaxBackoffSeconds)"))
			}
			return errs
		},
	},
}

// PermitWaitingTime returns Coscheduling's wait from its args.
func (a *CoschedulingArgs) PermitWaitingTime() time.Duration {
	if a == nil || a.PermitWaitingTimeSeconds == nil {
		return DefaultPermitWaitingTimeSeconds * time.Second
	}
	return time.Duration(*a.PermitWaitingTimeSeconds) * time.Second
}

// fieldErrors unpacks the aggregate of field errors nodeaffinity returns.
func fieldErrors(err error) field.ErrorList {
	if err == nil {
		return nil
	}
	var out field.ErrorList
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		for _, e := range agg.Errors() {
			if fe, ok := e.(*field.Error); ok {
				out = append(out, fe)
				continue
			}
			out = append(out, field.InternalError(nil, e))
		}
		return out
	}
	return field.ErrorList{field.InternalError(nil, err)}
}

func defaultResources() []v1.ResourceSpec {
	return []v1.ResourceSpec{{Name: string(corev1.ResourceCPU), Weight: 1}, {Name: string(corev1.ResourceMemory), Weight: 1}}
}

func defaultFitArgs(a *v1.NodeResourcesFitArgs) {
	if a.ScoringStrategy == nil {
		a.ScoringStrategy = &v1.ScoringStrategy{Type: v1.LeastAllocated, Resources: defaultResources()}
	}
	if len(a.ScoringStrategy.Resources) == 0 {
		a.ScoringStrategy.Resources = defaultResources()
	}
	for i := range a.ScoringStrategy.Resources {
		if a.ScoringStrategy.Resources[i].Weight == 0 {
			a.ScoringStrategy.Resources[i].Weight = 1
		}
	}
}

// MaxCustomPriorityScore is the top of a RequestedToCapacityRatio shape's
// score scale (Kubernetes' config.MaxCustomPriorityScore).
const MaxCustomPriorityScore = 10

func validateFitArgs(p *field.Path, a *v1.NodeResourcesFitArgs) field.ErrorList {
	var errs field.ErrorList
	for i, r := range a.IgnoredResources {
		errs = append(errs, metav1validation.ValidateLabelName(r, p.Child("ignoredResources").Index(i))...)
	}
	for i, g := range a.IgnoredResourceGroups {
		gp := p.Child("ignoredResourceGroups").Index(i)
		if strings.Contains(g, "/") {
			errs = append(errs, field.Invalid(gp, g, "resource group name can't contain '/'"))
		}
		errs = append(errs, metav1validation.ValidateLabelName(g, gp)...)
	}
	sp := p.Child("scoringStrategy")
	s := a.ScoringStrategy
	switch s.Type {
	case v1.LeastAllocated, v1.MostAllocated, v1.RequestedToCapacityRatio:
	default:
		errs = append(errs, field.NotSupported(sp.Child("type"), s.Type, []string{string(v1.LeastAllocated), string(v1.MostAllocated), string(v1.RequestedToCapacityRatio)}))
	}
	for i, r := range s.Resources {
		if r.Weight <= 0 || r.Weight > 100 {
			errs = append(errs, field.Invalid(sp.Child("resources").Index(i).Child("weight"), r.Weight, fmt.Sprintf("resource weight of %v not in valid range (0, 100]", r.Name)))
		}
	}
	if s.Type == v1.RequestedToCapacityRatio {
		if s.RequestedToCapacityRatio == nil {
			errs = append(errs, field.Required(sp.Child("requestedToCapacityRatio"), "must be specified when type is RequestedToCapacityRatio"))
		} else {
			errs = append(errs, validateShape(s.RequestedToCapacityRatio.Shape, sp.Child("requestedToCapacityRatio", "shape"))...)
		}
	} else if s.RequestedToCapacityRatio != nil {
		errs = append(errs, field.Forbidden(sp.Child("requestedToCapacityRatio"), "must be nil when type is not RequestedToCapacityRatio"))
	}
	return errs
}

func validateShape(shape []v1.UtilizationShapePoint, p *field.Path) field.ErrorList {
	if len(shape) == 0 {
		return field.ErrorList{field.Required(p, "at least one point must be specified")}
	}
	var errs field.ErrorList
	for i := 1; i < len(shape); i++ {
		if shape[i-1].Utilization >= shape[i].Utilization {
			errs = append(errs, field.Invalid(p.Index(i).Child("utilization"), shape[i].Utilization, "values must be sorted in increasing order"))
			break
		}
	}
	for i, pt := range shape {
		if pt.Utilization < 0 || pt.Utilization > 100 {
			errs = append(errs, field.Invalid(p.Index(i).Child("utilization"), pt.Utilization, "not in valid range [0, 100]"))
		}
		if pt.Score < 0 || pt.Score > MaxCustomPriorityScore {
			errs = append(errs, field.Invalid(p.Index(i).Child("score"), pt.Score, fmt.Sprintf("not in valid range [0, %d]", MaxCustomPriorityScore)))
		}
	}
	return errs
}

func validateSpreadArgs(p *field.Path, a *v1.PodTopologySpreadArgs) field.ErrorList {
	var errs field.ErrorList
	tp := p.Child("defaultingType")
	switch a.DefaultingType {
	case v1.SystemDefaulting:
		if len(a.DefaultConstraints) > 0 {
			errs = append(errs, field.Invalid(tp, a.DefaultingType, "when .defaultConstraints are not empty"))
		}
	case v1.ListDefaulting:
	default:
		errs = append(errs, field.NotSupported(tp, a.DefaultingType, []string{string(v1.SystemDefaulting), string(v1.ListDefaulting)}))
	}
	cp := p.Child("defaultConstraints")
	for i, c := range a.DefaultConstraints {
		ip := cp.Index(i)
		if c.MaxSkew <= 0 {
			errs = append(errs, field.Invalid(ip.Child("maxSkew"), c.MaxSkew, "not in valid range (0, inf)"))
		}
		if c.TopologyKey == "" {
			errs = append(errs, field.Required(ip.Child("topologyKey"), "can not be empty"))
		} else {
			errs = append(errs, metav1validation.ValidateLabelName(c.TopologyKey, ip.Child("topologyKey"))...)
		}
		switch c.WhenUnsatisfiable {
		case "":
			errs = append(errs, field.Required(ip.Child("whenUnsatisfiable"), "can not be empty"))
		case corev1.DoNotSchedule, corev1.ScheduleAnyway:
		default:
			errs = append(errs, field.NotSupported(ip.Child("whenUnsatisfiable"), c.WhenUnsatisfiable, []string{string(corev1.DoNotSchedule), string(corev1.ScheduleAnyway)}))
		}
		if c.LabelSelector != nil {
			errs = append(errs, field.Forbidden(ip.Child("labelSelector"), "constraint must not define a selector, as they deduced for each pod"))
		}
		for j := range i {
			if o := a.DefaultConstraints[j]; o.TopologyKey == c.TopologyKey && o.WhenUnsatisfiable == c.WhenUnsatisfiable {
				errs = append(errs, field.Duplicate(ip, fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)))
				break
			}
		}
	}
	return errs
}

// DefaultArgs returns plugin name's defaulted args, nil for a plugin
// without an args kind.
func DefaultArgs(name string) runtime.Object {
	k, ok := argKinds[name]
	if !ok {
		return nil
	}
	args := k.new()
	k.defaults(args)
	return args
}

// ValidArgs returns a defaulted copy of plugin name's args, or an error
// naming each invalid field (under "args"): what a plugin's factory
// checks, for args built in code rather than read from a file.
func ValidArgs(name string, args runtime.Object) (runtime.Object, error) {
	k, ok := argKinds[name]
	if !ok {
		return args, nil
	}
	if reflect.TypeOf(args) != reflect.TypeOf(k.new()) {
		return nil, fmt.Errorf("plugin %s: args of type %T, want %T", name, args, k.new())
	}
	args = args.DeepCopyObject()
	k.defaults(args)
	if errs := k.validate(field.NewPath("args"), args); len(errs) > 0 {
		return nil, fmt.Errorf("plugin %s: %w", name, errs.ToAggregate())
	}
	return args, nil
}
