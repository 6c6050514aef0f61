package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
)

// The explanation of a node where the claims could not be allocated, one
// line per finding, for Status.Details (`describe pod`, `trace pod`):
//
//	claim default/c1, request gpus: needs 2 of class gpu.nvidia.com; 8 devices on the node: 8 ruled out by the request's selector #0 `device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("100Gi")) >= 0` (gpu-0, gpu-1, ...); 0 left
//	claim default/c1, request gpus: closest: gpu-0 (fails the request's selector #0 only)
//	claim default/c1, constraint matchAttribute skiff.dev/nvlinkDomain: no 2 of the candidates (gpu-0, gpu-4) share a value: gpu-0=nvl-0, gpu-4=nvl-1
//
// It re-evaluates each request alone with the DRA CEL environment (the
// same cache the allocator uses), so it reports what rules devices out;
// the allocator's own search (over all requests together) decided.

// deviceOnNode is one device of the node's slices.
type deviceOnNode struct {
	id     structured.DeviceID
	driver string
	name   string
	dev    *resourcev1.Device
}

func (pl *DynamicResources) explain(ctx context.Context, s *draState, nodeSlices []*resourcev1.ResourceSlice, node *corev1.Node) []string {
	inUse := pl.allocatedOn(pl.devicesOf(node.Name), pl.devicesOf("")).AllocatedDevices
	var devices []deviceOnNode
	for _, sl := range nodeSlices {
		ok, err := structured.NodeMatches(pl.features, node, ptrValue(sl.Spec.NodeName), ptrValue(sl.Spec.AllNodes), sl.Spec.NodeSelector)
		if err != nil || !ok {
			continue
		}
		for i := range sl.Spec.Devices {
			d := &sl.Spec.Devices[i]
			devices = append(devices, deviceOnNode{id: structured.MakeDeviceID(sl.Spec.Driver, sl.Spec.Pool.Name, d.Name), driver: sl.Spec.Driver, name: d.Name, dev: d})
		}
	}
	var lines []string
	if len(devices) == 0 {
		return []string{"no ResourceSlice publishes devices for this node"}
	}
	for _, claim := range s.toAllocate {
		claimName := klog.KObj(claim).String()
		candidates := map[string][]deviceOnNode{}
		for _, r := range claim.Spec.Devices.Requests {
			type alt struct {
				name, class string
				selectors   []resourcev1.DeviceSelector
				mode        resourcev1.DeviceAllocationMode
				count       int64
			}
			var alts []alt
			if e := r.Exactly; e != nil {
				alts = append(alts, alt{r.Name, e.DeviceClassName, e.Selectors, e.AllocationMode, e.Count})
			}
			for _, sub := range r.FirstAvailable {
				alts = append(alts, alt{r.Name + "/" + sub.Name, sub.DeviceClassName, sub.Selectors, sub.AllocationMode, sub.Count})
			}
			for _, a := range alts {
				prefix := fmt.Sprintf("claim %s, request %s", claimName, a.name)
				class, err := pl.Get(a.class)
				if err != nil {
					lines = append(lines, fmt.Sprintf("%s: device class %s does not exist", prefix, a.class))
					continue
				}
				// failures[i]: the selectors device i fails, by label.
				failures := make([][]string, len(devices))
				var free []deviceOnNode
				taken := 0
				ruledOut := map[string][]string{}
				var order []string
				note := func(label, dev string) {
					if _, ok := ruledOut[label]; !ok {
						order = append(order, label)
					}
					ruledOut[label] = append(ruledOut[label], dev)
				}
				for i, d := range devices {
					for j, sel := range class.Spec.Selectors {
						if fail, label := pl.selectorFails(ctx, sel, d, fmt.Sprintf("class %s selector #%d", class.Name, j)); fail {
							failures[i] = append(failures[i], label)
						}
					}
					for j, sel := range a.selectors {
						if fail, label := pl.selectorFails(ctx, sel, d, fmt.Sprintf("the request's selector #%d", j)); fail {
							failures[i] = append(failures[i], label)
						}
					}
					switch {
					case len(failures[i]) > 0:
						note(failures[i][0], d.name)
					case inUse.Has(d.id):
						taken++
					default:
						free = append(free, d)
					}
				}
				want := "all devices"
				if a.mode != resourcev1.DeviceAllocationModeAll {
					want = fmt.Sprintf("%d", max(a.count, 1))
				}
				parts := []string{fmt.Sprintf("needs %s of class %s; %d devices on the node", want, a.class, len(devices))}
				for _, label := range order {
					parts = append(parts, fmt.Sprintf("%d ruled out by %s (%s)", len(ruledOut[label]), label, deviceList(ruledOut[label])))
				}
				if taken > 0 {
					parts = append(parts, fmt.Sprintf("%d already allocated to other claims", taken))
				}
				parts = append(parts, fmt.Sprintf("%d left%s", len(free), listSuffix(free)))
				lines = append(lines, prefix+": "+strings.Join(parts, "; "))
				if len(free) < int(max(a.count, 1)) {
					if c := closest(devices, failures); c != "" {
						lines = append(lines, prefix+": closest: "+c)
					}
				}
				candidates[r.Name] = append(candidates[r.Name], free...)
			}
		}
		for i, c := range claim.Spec.Devices.Constraints {
			lines = append(lines, explainConstraint(claimName, i, c, claim.Spec.Devices.Requests, candidates)...)
		}
	}
	if len(lines) == 0 {
		lines = append(lines, "the requests' candidates exist but no combination satisfies all claims together")
	}
	return lines
}

// selectorFails evaluates one selector on one device; a runtime error
// counts as a failure, with the error in the label.
func (pl *DynamicResources) selectorFails(ctx context.Context, sel resourcev1.DeviceSelector, d deviceOnNode, label string) (bool, string) {
	if sel.CEL == nil {
		return false, ""
	}
	expr := sel.CEL.Expression
	label = fmt.Sprintf("%s `%s`", label, expr)
	res := pl.celCache.GetOrCompile(expr)
	if res.Error != nil {
		return true, label + ": " + res.Error.Error()
	}
	ok, _, err := res.DeviceMatches(ctx, cel.Device{Driver: d.driver, Attributes: d.dev.Attributes, Capacity: d.dev.Capacity, AllowMultipleAllocations: d.dev.AllowMultipleAllocations})
	if err != nil {
		return true, label + ": " + err.Error()
	}
	return !ok, label
}

// closest names the devices failing the fewest selectors (at least one).
func closest(devices []deviceOnNode, failures [][]string) string {
	best := -1
	for _, f := range failures {
		if len(f) > 0 && (best < 0 || len(f) < best) {
			best = len(f)
		}
	}
	if best < 0 {
		return ""
	}
	var out []string
	for i, f := range failures {
		if len(f) == best && len(out) < maxClosestCandidates {
			fails := f[0]
			if i := strings.Index(fails, " `"); i > 0 {
				fails = fails[:i]
			}
			if len(f) > 1 {
				fails = fmt.Sprintf("%d selectors", len(f))
			}
			out = append(out, fmt.Sprintf("%s (fails %s only)", devices[i].name, fails))
		}
	}
	return strings.Join(out, ", ")
}

func explainConstraint(claim string, i int, c resourcev1.DeviceConstraint, reqs []resourcev1.DeviceRequest, candidates map[string][]deviceOnNode) []string {
	var attr string
	kind := "matchAttribute"
	switch {
	case c.MatchAttribute != nil:
		attr = string(*c.MatchAttribute)
	case c.DistinctAttribute != nil:
		attr, kind = string(*c.DistinctAttribute), "distinctAttribute"
	default:
		return nil
	}
	names := c.Requests
	if len(names) == 0 {
		for _, r := range reqs {
			names = append(names, r.Name)
		}
	}
	need := 0
	var devs []deviceOnNode
	for _, r := range reqs {
		if slices.Contains(names, r.Name) {
			n := 1
			if r.Exactly != nil && r.Exactly.AllocationMode != resourcev1.DeviceAllocationModeAll {
				n = int(max(r.Exactly.Count, 1))
			}
			need += n
			for _, d := range candidates[r.Name] {
				if !slices.ContainsFunc(devs, func(x deviceOnNode) bool { return x.id == d.id }) {
					devs = append(devs, d)
				}
			}
		}
	}
	prefix := fmt.Sprintf("claim %s, constraint #%d %s %s", claim, i, kind, attr)
	values := map[string][]string{}
	var missing []string
	for _, d := range devs {
		v, ok := attributeValue(d, attr)
		if !ok {
			missing = append(missing, d.name)
			continue
		}
		values[v] = append(values[v], d.name)
	}
	var pairs []string
	best := 0
	for _, d := range devs {
		if v, ok := attributeValue(d, attr); ok {
			pairs = append(pairs, d.name+"="+v)
		}
	}
	for _, ds := range values {
		best = max(best, len(ds))
	}
	var out []string
	if len(missing) > 0 {
		out = append(out, fmt.Sprintf("%s: %d candidates lack the attribute (%s)", prefix, len(missing), strings.Join(missing, ", ")))
	}
	switch {
	case kind == "matchAttribute" && best < need:
		out = append(out, fmt.Sprintf("%s: needs %d devices with one value, at most %d share one: %s", prefix, need, best, trimList(pairs)))
	case kind == "distinctAttribute" && len(values) < need:
		out = append(out, fmt.Sprintf("%s: needs %d different values, the candidates have %d: %s", prefix, need, len(values), trimList(pairs)))
	}
	return out
}

// attributeValue reads a fully qualified attribute (DOMAIN/ID); the
// driver's own attributes may be stored without their domain.
func attributeValue(d deviceOnNode, fq string) (string, bool) {
	a, ok := d.dev.Attributes[resourcev1.QualifiedName(fq)]
	if !ok {
		if domain, id, cut := strings.Cut(fq, "/"); cut && domain == d.driver {
			a, ok = d.dev.Attributes[resourcev1.QualifiedName(id)]
		}
	}
	if !ok {
		return "", false
	}
	switch {
	case a.StringValue != nil:
		return *a.StringValue, true
	case a.IntValue != nil:
		return fmt.Sprint(*a.IntValue), true
	case a.BoolValue != nil:
		return fmt.Sprint(*a.BoolValue), true
	case a.VersionValue != nil:
		return *a.VersionValue, true
	}
	return "", false
}

func deviceList(names []string) string { return trimList(names) }

func trimList(names []string) string {
	if len(names) > maxExplainedDevices {
		return strings.Join(names[:maxExplainedDevices], ", ") + fmt.Sprintf(", ... %d more", len(names)-maxExplainedDevices)
	}
	return strings.Join(names, ", ")
}

func listSuffix(ds []deviceOnNode) string {
	if len(ds) == 0 {
		return ""
	}
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.name
	}
	return " (" + trimList(names) + ")"
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// fromKubernetes converts a k8s.io/api value to skiff's type of the same
// JSON shape.
func fromKubernetes[T any](v any) (*T, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("convert %T: %w", v, err)
	}
	return out, nil
}
