//go:build benchdra

package main

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// draBuilt: this build has the dra variant.
const draBuilt = true

// draTemplate is the ResourceClaimTemplate every dra pod names.
const draTemplate = "single-gpu"

// setupDRA publishes each node's 8 GPUs in a gpu.nvidia.com ResourceSlice
// (the attributes skiff's driver publishes, which the gpu.nvidia.com
// DeviceClass the control plane creates selects on) and creates the
// single-gpu template in default.
func setupDRA(ctx context.Context, c client.Interface, nodes []string) error {
	const writers = 32
	work := make(chan string)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				if _, err := c.Create(ctx, gpuSlice(n)); err != nil {
					errs <- fmt.Errorf("create ResourceSlice of %s: %w", n, err)
					return
				}
			}
		}()
	}
	for _, n := range nodes {
		select {
		case work <- n:
		case err := <-errs:
			close(work)
			wg.Wait()
			return err
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	tmpl := &api.ResourceClaimTemplate{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: draTemplate},
		Spec: api.ResourceClaimTemplateSpec{Spec: api.ResourceClaimSpec{Devices: api.DeviceClaim{Requests: []api.DeviceRequest{{
			Name: "gpu", Exactly: &api.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: api.DeviceAllocationModeExactCount, Count: 1}}}}}}}
	if _, err := c.Create(ctx, tmpl); err != nil {
		return fmt.Errorf("create ResourceClaimTemplate: %w", err)
	}
	return nil
}

// gpuSlice is node's pool: gpu-0..gpu-7, two NVLink domains of four.
func gpuSlice(node string) *api.ResourceSlice {
	s := &api.ResourceSlice{ObjectMeta: api.ObjectMeta{Name: node + "-gpu.nvidia.com"}, Spec: api.ResourceSliceSpec{
		Driver: "gpu.nvidia.com", NodeName: &node, Pool: api.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
	for i := range 8 {
		typ, product, ver, dom := "gpu", "NVIDIA A100-SXM4-80GB", "550.54.15", fmt.Sprintf("%s-nvl-%d", node, i/4)
		idx := int64(i)
		s.Spec.Devices = append(s.Spec.Devices, api.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[string]api.DeviceAttribute{"type": {StringValue: &typ}, "productName": {StringValue: &product},
				"index": {IntValue: &idx}, "driverVersion": {VersionValue: &ver}, "skiff.dev/nvlinkDomain": {StringValue: &dom}},
			Capacity: map[string]api.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}},
		})
	}
	return s
}

// draPod asks for one GPU through the template, as examples/dra does.
func draPod(p *api.Pod) {
	tmpl := draTemplate
	p.Spec.ResourceClaims = []api.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
	p.Spec.Containers[0].Resources.Claims = []api.ContainerResourceClaim{{Name: "gpu"}}
}
