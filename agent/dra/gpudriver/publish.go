package gpudriver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Publish writes the node's pool when its slices changed (a new pool
// generation, every slice rewritten with it), or creates it: one slice,
// or with DynamicMIG the slices of poolSlices; slices of the pool no
// longer wanted are deleted.
func (d *Driver) Publish(ctx context.Context) error {
	d.pubMu.Lock()
	defer d.pubMu.Unlock()
	devs, err := d.SliceDevices(ctx)
	if err != nil {
		return err
	}
	want, err := d.poolSlices(ctx, devs)
	if err != nil {
		return err
	}
	node, base := d.cfg.NodeName, SliceName(d.cfg.NodeName)
	// Found by a list of the node's slices, as the kubelet's slice
	// controller does: the Node authorizer answers a node's get of a slice
	// that does not exist (yet) with 403, not 404.
	mine, _, err := client.List[*api.ResourceSlice](ctx, d.cfg.Client, "", api.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return fmt.Errorf("list the ResourceSlices of node %s: %w", node, err)
	}
	old := map[string]*api.ResourceSlice{}
	var gen int64
	for _, s := range mine {
		if s.Name == base || strings.HasPrefix(s.Name, base+"-") {
			old[s.Name] = s
			gen = max(gen, s.Spec.Pool.Generation)
		}
	}
	same := len(old) == len(want)
	for _, w := range want {
		if o := old[w.name]; o == nil || o.Spec.Pool.Generation != gen || !sameSlice(o, w.spec, node, len(want)) {
			same = false
		}
	}
	if same {
		return nil
	}
	gen++
	for _, w := range want {
		spec := w.spec
		spec.Driver, spec.NodeName = DriverName, &node
		spec.Pool = api.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: int64(len(want))}
		if o := old[w.name]; o != nil {
			s := api.Clone(o)
			s.Spec = spec
			if _, err := d.cfg.Client.Update(ctx, s); err != nil {
				return fmt.Errorf("update ResourceSlice %s: %w", w.name, err)
			}
			continue
		}
		s := &api.ResourceSlice{
			TypeMeta:   api.TypeMeta{APIVersion: api.ResourceGroup + "/v1", Kind: "ResourceSlice"},
			ObjectMeta: api.ObjectMeta{Name: w.name}, Spec: spec,
		}
		if _, err := d.cfg.Client.Create(ctx, s); err != nil {
			return fmt.Errorf("create ResourceSlice %s: %w", w.name, err)
		}
	}
	kind := api.MustKindOf(&api.ResourceSlice{})
	for name := range old {
		if !slices.ContainsFunc(want, func(w namedSlice) bool { return w.name == name }) {
			if err := d.cfg.Client.Delete(ctx, kind, "", name, api.DeleteOptions{}); err != nil && !api.IsNotFound(err) {
				return fmt.Errorf("delete ResourceSlice %s: %w", name, err)
			}
		}
	}
	d.log.Info("published ResourceSlice", "slice", base, "slices", len(want), "devices", len(devs), "generation", gen)
	return nil
}

// sameSlice reports whether slice s already says spec (in a pool of n
// slices of this node).
func sameSlice(s *api.ResourceSlice, spec api.ResourceSliceSpec, node string, n int) bool {
	return s.Spec.Driver == DriverName && s.Spec.NodeName != nil && *s.Spec.NodeName == node && s.Spec.Pool.Name == node &&
		s.Spec.Pool.ResourceSliceCount == int64(n) && sameDevices(s.Spec.Devices, spec.Devices) && ((len(s.Spec.SharedCounters) == 0 && len(spec.SharedCounters) == 0) || sameJSON(s.Spec.SharedCounters, spec.SharedCounters))
}

func sameDevices(a, b []api.Device) bool { return (len(a) == 0 && len(b) == 0) || sameJSON(a, b) }

func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
