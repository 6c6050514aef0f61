package cli

import (
	"context"
	"strconv"
	"strings"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// DRA kinds in describe: what a student compares with the device plugin
// path: the requests, the allocation (which driver, pool and device), who
// the claim is reserved for, and the devices a node publishes with their
// attributes.

func describeResourceClaim(w *describeWriter, c *api.ResourceClaim) {
	w.objectHeader(&c.ObjectMeta, true)
	controlledBy(w, c)
	w.line(0, "Spec:\n")
	describeClaimSpec(w, 1, &c.Spec)
	state := "pending"
	if c.Status.Allocation != nil {
		state = "allocated"
	}
	if len(c.Status.ReservedFor) > 0 {
		state += ",reserved"
	}
	if c.DeletionTimestamp != nil {
		state = "deleted," + state
	}
	w.line(0, "State:\t%s\n", state)
	w.line(0, "Status:\n")
	if a := c.Status.Allocation; a != nil {
		w.line(1, "Allocation:\n")
		if a.AllocationTimestamp != nil {
			w.line(2, "Allocated At:\t%s\n", describeTime(a.AllocationTimestamp.Time))
		}
		w.line(2, "Devices:\n")
		w.line(3, "Request\tDriver\tPool\tDevice\n")
		w.line(3, "-------\t------\t----\t------\n")
		for _, r := range a.Devices.Results {
			w.line(3, "%s\t%s\t%s\t%s\n", r.Request, r.Driver, r.Pool, r.Device)
		}
		if a.NodeSelector != nil {
			for _, t := range a.NodeSelector.NodeSelectorTerms {
				for _, e := range t.MatchFields {
					w.line(2, "Node Selector:\t%s %s %s\n", e.Key, e.Operator, strings.Join(e.Values, ","))
				}
				for _, e := range t.MatchExpressions {
					w.line(2, "Node Selector:\t%s %s %s\n", e.Key, e.Operator, strings.Join(e.Values, ","))
				}
			}
		}
	} else {
		w.line(1, "Allocation:\t<none> (the scheduler allocates devices when it places a pod that uses the claim)\n")
	}
	if len(c.Status.ReservedFor) == 0 {
		w.line(1, "Reserved For:\t<none>\n")
	} else {
		w.line(1, "Reserved For:\n")
		for _, r := range c.Status.ReservedFor {
			w.line(2, "%s\t%s\t%s\n", orDefault(r.Resource, "pods"), r.Name, r.UID)
		}
	}
}

func describeClaimSpec(w *describeWriter, level int, s *api.ResourceClaimSpec) {
	w.line(level, "Requests:\n")
	for _, r := range s.Devices.Requests {
		w.line(level+1, "%s:\n", r.Name)
		if e := r.Exactly; e != nil {
			describeExact(w, level+2, e.DeviceClassName, e.AllocationMode, e.Count, e.Selectors)
		}
		for _, sub := range r.FirstAvailable {
			w.line(level+2, "First Available %s:\n", sub.Name)
			describeExact(w, level+3, sub.DeviceClassName, sub.AllocationMode, sub.Count, sub.Selectors)
		}
	}
	for _, c := range s.Devices.Constraints {
		reqs := orDefault(strings.Join(c.Requests, ","), "all requests")
		if c.MatchAttribute != nil {
			w.line(level, "Constraint:\tmatchAttribute %s (%s)\n", *c.MatchAttribute, reqs)
		}
		if c.DistinctAttribute != nil {
			w.line(level, "Constraint:\tdistinctAttribute %s (%s)\n", *c.DistinctAttribute, reqs)
		}
	}
	for _, c := range s.Devices.Config {
		if c.Opaque != nil {
			w.line(level, "Config:\t%s %s (%s)\n", c.Opaque.Driver, string(c.Opaque.Parameters), orDefault(strings.Join(c.Requests, ","), "all requests"))
		}
	}
}

func describeExact(w *describeWriter, level int, class, mode string, count int64, sels []api.DeviceSelector) {
	w.line(level, "Device Class:\t%s\n", class)
	mode = orDefault(mode, api.DeviceAllocationModeExactCount)
	if mode == api.DeviceAllocationModeExactCount {
		if count == 0 {
			count = 1
		}
		w.line(level, "Allocation Mode:\t%s (%d)\n", mode, count)
	} else {
		w.line(level, "Allocation Mode:\t%s\n", mode)
	}
	for _, s := range sels {
		if s.CEL != nil {
			w.line(level, "Selector:\t%s\n", s.CEL.Expression)
		}
	}
}

func describeResourceClaimTemplate(w *describeWriter, t *api.ResourceClaimTemplate) {
	w.objectHeader(&t.ObjectMeta, true)
	w.line(0, "Claim Spec:\n")
	describeClaimSpec(w, 1, &t.Spec.Spec)
}

func describeDeviceClass(w *describeWriter, c *api.DeviceClass) {
	w.objectHeader(&c.ObjectMeta, false)
	w.line(0, "Selectors:\n")
	for _, s := range c.Spec.Selectors {
		if s.CEL != nil {
			w.line(1, "%s\n", s.CEL.Expression)
		}
	}
	for _, cfg := range c.Spec.Config {
		if cfg.Opaque != nil {
			w.line(0, "Config:\t%s %s\n", cfg.Opaque.Driver, string(cfg.Opaque.Parameters))
		}
	}
}

// describeResourceSlice lists the devices with every attribute and
// capacity, and which claim holds each (from the claims' allocations).
func describeResourceSlice(ctx context.Context, w *describeWriter, cl client.Interface, s *api.ResourceSlice) {
	w.objectHeader(&s.ObjectMeta, false)
	w.line(0, "Driver:\t%s\n", s.Spec.Driver)
	w.line(0, "Pool:\t%s (generation %d, %d slice(s))\n", s.Spec.Pool.Name, s.Spec.Pool.Generation, s.Spec.Pool.ResourceSliceCount)
	switch {
	case s.Spec.NodeName != nil:
		w.line(0, "Node:\t%s\n", *s.Spec.NodeName)
	case s.Spec.AllNodes != nil && *s.Spec.AllNodes:
		w.line(0, "Node:\t<all nodes>\n")
	default:
		w.line(0, "Node:\t<node selector>\n")
	}
	holders := map[string]string{}
	if claims, _, err := client.List[*api.ResourceClaim](ctx, cl, "", api.ListOptions{}); err == nil {
		for _, c := range claims {
			if c.Status.Allocation == nil {
				continue
			}
			for _, r := range c.Status.Allocation.Devices.Results {
				if r.Driver == s.Spec.Driver && r.Pool == s.Spec.Pool.Name {
					holders[r.Device] = c.Namespace + "/" + c.Name
				}
			}
		}
	}
	w.line(0, "Devices:\t%d\n", len(s.Spec.Devices))
	for _, d := range s.Spec.Devices {
		w.line(1, "%s:\n", d.Name)
		w.line(2, "Allocated To:\t%s\n", orDefault(holders[d.Name], "<free>"))
		w.line(2, "Attributes:\n")
		for _, n := range sortedKeys(d.Attributes) {
			w.line(3, "%s:\t%s\n", n, attributeValue(d.Attributes[n]))
		}
		w.line(2, "Capacity:\n")
		for _, n := range sortedKeys(d.Capacity) {
			q := d.Capacity[n].Value
			w.line(3, "%s:\t%s\n", n, q.String())
		}
		for _, t := range d.Taints {
			w.line(2, "Taint:\t%s=%s:%s\n", t.Key, t.Value, t.Effect)
		}
	}
}

func attributeValue(a api.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return *a.StringValue
	case a.VersionValue != nil:
		return *a.VersionValue + " (version)"
	case a.IntValue != nil:
		return strconv.FormatInt(*a.IntValue, 10)
	case a.BoolValue != nil:
		return strconv.FormatBool(*a.BoolValue)
	}
	return "<none>"
}
