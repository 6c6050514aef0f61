package quota

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
)

// LimitRanger admission, as Kubernetes' plugin/pkg/admission/limitranger:
// ApplyDefaults (mutating) gives a new pod's containers the defaults of
// the namespace's Container items where they name none, and says so in
// the annotation kubernetes.io/limit-ranger; ValidatePod and ValidateClaim
// (validating) check every item's min, max and maxLimitRequestRatio and
// return every violation at once, in Kubernetes' words ("maximum cpu
// usage per Container is 1, but limit is 2").

// ApplyDefaults sets the default requests and limits of ranges' Container
// items on pod's containers that lack them (pod is changed).
func ApplyDefaults(pod *api.Pod, ranges []*api.LimitRange) {
	for _, lr := range ranges {
		requests, limits := api.ResourceList{}, api.ResourceList{}
		for _, it := range lr.Spec.Limits {
			if it.Type != api.LimitTypeContainer {
				continue
			}
			for k, v := range it.DefaultRequest {
				requests[k] = v.DeepCopy()
			}
			for k, v := range it.Default {
				limits[k] = v.DeepCopy()
			}
		}
		var notes []string
		for i := range pod.Spec.Containers {
			notes = mergeDefaults(&pod.Spec.Containers[i], requests, limits, "container", notes)
		}
		for i := range pod.Spec.InitContainers {
			notes = mergeDefaults(&pod.Spec.InitContainers[i], requests, limits, "init container", notes)
		}
		if len(notes) > 0 {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[api.AnnotationLimitRanger] = "LimitRanger plugin set: " + strings.Join(notes, "; ")
		}
	}
}

// mergeDefaults is Kubernetes' mergeContainerResources.
func mergeDefaults(c *api.Container, requests, limits api.ResourceList, what string, notes []string) []string {
	var setRequests, setLimits []string
	if c.Resources.Limits == nil {
		c.Resources.Limits = api.ResourceList{}
	}
	if c.Resources.Requests == nil {
		c.Resources.Requests = api.ResourceList{}
	}
	for k, v := range limits {
		if _, ok := c.Resources.Limits[k]; !ok {
			c.Resources.Limits[k] = v.DeepCopy()
			setLimits = append(setLimits, k)
		}
	}
	for k, v := range requests {
		if _, ok := c.Resources.Requests[k]; !ok {
			c.Resources.Requests[k] = v.DeepCopy()
			setRequests = append(setRequests, k)
		}
	}
	if len(setRequests) > 0 {
		slices.Sort(setRequests)
		notes = append(notes, strings.Join(setRequests, ", ")+fmt.Sprintf(" request for %s %s", what, c.Name))
	}
	if len(setLimits) > 0 {
		slices.Sort(setLimits)
		notes = append(notes, strings.Join(setLimits, ", ")+fmt.Sprintf(" limit for %s %s", what, c.Name))
	}
	if len(c.Resources.Limits) == 0 {
		c.Resources.Limits = nil
	}
	if len(c.Resources.Requests) == 0 {
		c.Resources.Requests = nil
	}
	return notes
}

// ValidatePod is Kubernetes' PodValidateLimitFunc over every range: nil,
// or the violations ("[a, b]" when several, as an aggregate prints).
func ValidatePod(pod *api.Pod, ranges []*api.LimitRange) error {
	var errs []string
	for _, lr := range ranges {
		for _, it := range lr.Spec.Limits {
			switch it.Type {
			case api.LimitTypeContainer:
				for _, cs := range [][]api.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
					for i := range cs {
						errs = append(errs, bounds(it, cs[i].Resources.Requests, cs[i].Resources.Limits)...)
					}
				}
			case api.LimitTypePod:
				errs = append(errs, bounds(it, podRequests(&pod.Spec), podLimits(&pod.Spec))...)
			}
		}
	}
	return aggregate(errs)
}

// ValidateClaim is Kubernetes' PersistentVolumeClaimValidateLimitFunc: a
// claim's requests within each PersistentVolumeClaim item's min and max.
func ValidateClaim(pvc *api.PersistentVolumeClaim, ranges []*api.LimitRange) error {
	var errs []string
	for _, lr := range ranges {
		for _, it := range lr.Spec.Limits {
			if it.Type != api.LimitTypePersistentVolumeClaim {
				continue
			}
			for _, k := range Names(it.Min) {
				if err := minConstraint(it.Type, k, it.Min[k], pvc.Spec.Resources.Requests, api.ResourceList{}); err != "" {
					errs = append(errs, err)
				}
			}
			for _, k := range Names(it.Max) {
				if err := maxRequestConstraint(it.Type, k, it.Max[k], pvc.Spec.Resources.Requests); err != "" {
					errs = append(errs, err)
				}
			}
		}
	}
	return aggregate(errs)
}

// bounds checks one item's min, max and ratio against requests and limits.
func bounds(it api.LimitRangeItem, requests, limits api.ResourceList) []string {
	var errs []string
	for _, k := range Names(it.Min) {
		if e := minConstraint(it.Type, k, it.Min[k], requests, limits); e != "" {
			errs = append(errs, e)
		}
	}
	for _, k := range Names(it.Max) {
		if e := maxConstraint(it.Type, k, it.Max[k], requests, limits); e != "" {
			errs = append(errs, e)
		}
	}
	for _, k := range Names(it.MaxLimitRequestRatio) {
		if e := ratioConstraint(it.Type, k, it.MaxLimitRequestRatio[k], requests, limits); e != "" {
			errs = append(errs, e)
		}
	}
	return errs
}

func aggregate(errs []string) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return refuse("%s", errs[0])
	}
	return refuse("[%s]", strings.Join(errs, ", "))
}

// values is Kubernetes' requestLimitEnforcedValues: the three in
// millis when that cannot overflow, else in units.
func values(req, lim, enforced api.Quantity) (r, l, e int64) {
	r, l, e = req.Value(), lim.Value(), enforced.Value()
	if r <= resource.MaxMilliValue && l <= resource.MaxMilliValue && e <= resource.MaxMilliValue {
		r, l, e = req.MilliValue(), lim.MilliValue(), enforced.MilliValue()
	}
	return r, l, e
}

func minConstraint(typ, name string, enforced api.Quantity, requests, limits api.ResourceList) string {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	r, l, e := values(req, lim, enforced)
	switch {
	case !hasReq:
		return fmt.Sprintf("minimum %s usage per %s is %s.  No request is specified", name, typ, enforced.String())
	case r < e:
		return fmt.Sprintf("minimum %s usage per %s is %s, but request is %s", name, typ, enforced.String(), req.String())
	case hasLim && l < e:
		return fmt.Sprintf("minimum %s usage per %s is %s, but limit is %s", name, typ, enforced.String(), lim.String())
	}
	return ""
}

func maxRequestConstraint(typ, name string, enforced api.Quantity, requests api.ResourceList) string {
	req, hasReq := requests[name]
	r, _, e := values(req, resource.Quantity{}, enforced)
	switch {
	case !hasReq:
		return fmt.Sprintf("maximum %s usage per %s is %s.  No request is specified", name, typ, enforced.String())
	case r > e:
		return fmt.Sprintf("maximum %s usage per %s is %s, but request is %s", name, typ, enforced.String(), req.String())
	}
	return ""
}

func maxConstraint(typ, name string, enforced api.Quantity, requests, limits api.ResourceList) string {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	r, l, e := values(req, lim, enforced)
	switch {
	case !hasLim:
		return fmt.Sprintf("maximum %s usage per %s is %s.  No limit is specified", name, typ, enforced.String())
	case l > e:
		return fmt.Sprintf("maximum %s usage per %s is %s, but limit is %s", name, typ, enforced.String(), lim.String())
	case hasReq && r > e:
		return fmt.Sprintf("maximum %s usage per %s is %s, but request is %s", name, typ, enforced.String(), req.String())
	}
	return ""
}

func ratioConstraint(typ, name string, enforced api.Quantity, requests, limits api.ResourceList) string {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	r, l, _ := values(req, lim, enforced)
	if !hasReq || r == 0 {
		return fmt.Sprintf("%s max limit to request ratio per %s is %s, but no request is specified or request is 0", name, typ, enforced.String())
	}
	if !hasLim || l == 0 {
		return fmt.Sprintf("%s max limit to request ratio per %s is %s, but no limit is specified or limit is 0", name, typ, enforced.String())
	}
	observed := float64(l) / float64(r)
	display := observed
	maxRatio := float64(enforced.Value())
	if enforced.Value() <= resource.MaxMilliValue {
		observed *= 1000
		maxRatio = float64(enforced.MilliValue())
	}
	if observed > maxRatio {
		return fmt.Sprintf("%s max limit to request ratio per %s is %s, but provided ratio is %f", name, typ, enforced.String(), display)
	}
	return ""
}
