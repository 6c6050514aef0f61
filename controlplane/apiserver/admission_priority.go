package apiserver

import (
	"context"
	"fmt"

	"skiff.dev/skiff/api"
)

// Priority admission, as Kubernetes' Priority admission plugin
// (plugin/pkg/admission/priority):
//
//   - A new pod's spec.priorityClassName is resolved to spec.priority and
//     spec.preemptionPolicy from the PriorityClass of that name; a pod
//     that names none gets the globalDefault class (the lowest-valued one
//     if several claim it), else priority 0. The scheduler only ever reads
//     spec.priority.
//   - A class that does not exist is refused with 403 Forbidden,
//     "no PriorityClass with name X was found".
//   - A pod may carry spec.priority or spec.preemptionPolicy only when they
//     equal what its class resolves to (a pod copied from `get -o yaml`).
//   - The built-in classes system-cluster-critical and system-node-critical
//     resolve even when no object of that name is stored.
//   - A PriorityClass marked globalDefault is refused on create while
//     another default exists.
//
// Resolution happens once, on create: changing a class later does not
// change the priority of pods that already exist (as in Kubernetes).
var priorityClassKind = api.MustKindOf(&api.PriorityClass{})

// admitPriority runs the admission above for pods and priority classes;
// other kinds pass untouched. obj is the registry's own copy and is changed
// in place.
func (r *Registry) admitPriority(ctx context.Context, k *api.Kind, obj api.Object) error {
	switch o := obj.(type) {
	case *api.Pod:
		return r.admitPodPriority(ctx, o)
	case *api.PriorityClass:
		if !o.GlobalDefault {
			return nil
		}
		def, err := r.defaultPriorityClass(ctx)
		if err != nil {
			return err
		}
		if def != nil && def.Name != o.Name {
			return forbidden(k, o.Name, fmt.Sprintf("PriorityClass %s is already marked as default. Only one default can exist", def.Name))
		}
	}
	return nil
}

func (r *Registry) admitPodPriority(ctx context.Context, pod *api.Pod) error {
	var (
		priority int32
		policy   = api.PreemptLowerPriority
		s        = &pod.Spec
	)
	if s.PriorityClassName == "" {
		def, err := r.defaultPriorityClass(ctx)
		if err != nil {
			return err
		}
		if def != nil {
			s.PriorityClassName, priority = def.Name, def.Value
			if def.PreemptionPolicy != nil {
				policy = *def.PreemptionPolicy
			}
		}
	} else {
		pc, err := r.priorityClass(ctx, s.PriorityClassName)
		if err != nil {
			return err
		}
		if pc == nil {
			return forbidden(podKind, pod.Name, fmt.Sprintf("no PriorityClass with name %s was found", s.PriorityClassName))
		}
		priority = pc.Value
		if pc.PreemptionPolicy != nil {
			policy = *pc.PreemptionPolicy
		}
	}
	if s.Priority != nil && *s.Priority != priority {
		return forbidden(podKind, pod.Name, fmt.Sprintf("the integer value of priority (%d) must not be provided in pod spec; "+
			"priority admission controller computed %d from the given PriorityClass name", *s.Priority, priority))
	}
	if s.PreemptionPolicy != nil && *s.PreemptionPolicy != policy {
		return forbidden(podKind, pod.Name, fmt.Sprintf("the string value of PreemptionPolicy (%s) must not be provided in pod spec; "+
			"priority admission controller computed %s from the given PriorityClass name", *s.PreemptionPolicy, policy))
	}
	s.Priority, s.PreemptionPolicy = &priority, &policy
	return nil
}

// priorityClass reads a class by name, falling back to the built-in ones;
// nil when there is none.
func (r *Registry) priorityClass(ctx context.Context, name string) (*api.PriorityClass, error) {
	obj, err := r.store.Get(ctx, priorityClassKind, "", name)
	if err == nil {
		return obj.(*api.PriorityClass), nil
	}
	if !api.IsNotFound(err) {
		return nil, fmt.Errorf("get priority class %q: %w", name, err)
	}
	for _, pc := range api.SystemPriorityClasses() {
		if pc.Name == name {
			return pc, nil
		}
	}
	return nil, nil
}

// defaultPriorityClass is the globalDefault class with the lowest value, or nil.
func (r *Registry) defaultPriorityClass(ctx context.Context) (*api.PriorityClass, error) {
	items, _, err := r.listShared(ctx, priorityClassKind, "")
	if err != nil {
		return nil, fmt.Errorf("list priority classes: %w", err)
	}
	var def *api.PriorityClass
	for _, o := range items {
		pc := o.(*api.PriorityClass)
		if pc.GlobalDefault && (def == nil || pc.Value < def.Value) {
			def = pc
		}
	}
	return def, nil
}
