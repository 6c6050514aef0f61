package controlplane

import (
	"context"
	"fmt"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/apiserver"
)

// ensureDeviceClasses creates the DeviceClasses of skiff's built-in DRA
// drivers (gpu.nvidia.com and mig.nvidia.com, as NVIDIA's chart installs
// them), so the quick-start claims work on a fresh cluster. A class that
// exists (an admin may have changed it) is left alone; nodes may not
// create classes (the Node authorizer), so the control plane does, at
// start.
func ensureDeviceClasses(ctx context.Context, reg *apiserver.Registry) error {
	for _, dc := range []*api.DeviceClass{api.NVIDIAGPUDeviceClass(), api.NVIDIAMIGDeviceClass()} {
		if _, err := reg.Create(ctx, api.MustKindOf(dc), dc); err != nil && !api.IsAlreadyExists(err) {
			return fmt.Errorf("create DeviceClass %s: %w", dc.Name, err)
		}
	}
	return nil
}
