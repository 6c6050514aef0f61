package api

// Names NVIDIA's stack spells, shared by the agent (which publishes them)
// and the control plane (which reads them). The GPU topology annotation
// skiff's agents publish is in api/gputopology.
const (
	// NVIDIAGPUDriver is NVIDIA's DRA driver (k8s-dra-driver-gpu) and
	// the domain of its device attributes.
	NVIDIAGPUDriver = "gpu.nvidia.com"
	// NVIDIAGPUDeviceClassName is the DeviceClass NVIDIA's chart installs
	// for whole GPUs.
	NVIDIAGPUDeviceClassName = "gpu.nvidia.com"
	// NVIDIAGPUDeviceClassSelector is that class's CEL selector.
	NVIDIAGPUDeviceClassSelector = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)

// NVIDIAGPUDeviceClass is the gpu.nvidia.com DeviceClass, as NVIDIA's
// chart installs it. The control plane creates it at start (a class that
// exists is left alone: an admin may have changed it).
func NVIDIAGPUDeviceClass() *DeviceClass {
	return &DeviceClass{
		TypeMeta:   TypeMeta{APIVersion: ResourceGroup + "/v1", Kind: "DeviceClass"},
		ObjectMeta: ObjectMeta{Name: NVIDIAGPUDeviceClassName},
		Spec: DeviceClassSpec{Selectors: []DeviceSelector{{
			CEL: &CELDeviceSelector{Expression: NVIDIAGPUDeviceClassSelector},
		}}},
	}
}
