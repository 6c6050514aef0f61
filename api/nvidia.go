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
	// NVIDIAMIGDeviceClassName is the DeviceClass NVIDIA's chart installs
	// for MIG devices (attributes profile and parentUUID).
	NVIDIAMIGDeviceClassName = "mig.nvidia.com"
	// NVIDIAMIGDeviceClassSelector is that class's CEL selector.
	NVIDIAMIGDeviceClassSelector = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
)

// NVIDIAGPUDeviceClass is the gpu.nvidia.com DeviceClass, as NVIDIA's
// chart installs it. The control plane creates it at start (a class that
// exists is left alone: an admin may have changed it).
func NVIDIAGPUDeviceClass() *DeviceClass {
	return nvidiaDeviceClass(NVIDIAGPUDeviceClassName, NVIDIAGPUDeviceClassSelector)
}

// NVIDIAMIGDeviceClass is the mig.nvidia.com DeviceClass, as NVIDIA's
// chart installs it (created at start like NVIDIAGPUDeviceClass).
func NVIDIAMIGDeviceClass() *DeviceClass {
	return nvidiaDeviceClass(NVIDIAMIGDeviceClassName, NVIDIAMIGDeviceClassSelector)
}

func nvidiaDeviceClass(name, selector string) *DeviceClass {
	return &DeviceClass{
		TypeMeta:   TypeMeta{APIVersion: ResourceGroup + "/v1", Kind: "DeviceClass"},
		ObjectMeta: ObjectMeta{Name: name},
		Spec:       DeviceClassSpec{Selectors: []DeviceSelector{{CEL: &CELDeviceSelector{Expression: selector}}}},
	}
}

// Names of NVIDIA's GPU sharing stack (the device plugin's config, GPU
// feature discovery's labels, the MIG manager's), shared by the agent,
// which applies and publishes them, and the control plane and CLI, which
// read them.
const (
	// NVIDIAConfigNamespace is where the GPU configs live (the GPU
	// operator keeps them in its own namespace; skiff in kube-system).
	NVIDIAConfigNamespace = "kube-system"
	// NVIDIADevicePluginConfigMap is the ConfigMap of device plugin
	// configs, one per key (the agent's --device-plugin-config names
	// another).
	NVIDIADevicePluginConfigMap = "nvidia-device-plugin-config"
	// NVIDIADevicePluginConfigDefaultKey is the key used when a node has
	// no LabelDevicePluginConfig.
	NVIDIADevicePluginConfigDefaultKey = "default"
	// LabelDevicePluginConfig picks a node's key in the ConfigMap.
	LabelDevicePluginConfig = "nvidia.com/device-plugin.config"

	// GPU feature discovery's labels of sharing.
	LabelGPUReplicas        = "nvidia.com/gpu.replicas"
	LabelGPUSharingStrategy = "nvidia.com/gpu.sharing-strategy"
	LabelMPSCapable         = "nvidia.com/mps.capable"
	LabelMIGCapable         = "nvidia.com/mig.capable"
	LabelMIGStrategy        = "nvidia.com/mig.strategy"

	// The MIG manager's: the geometry asked for (a name in the mig-parted
	// config) and how applying it went (pending, success, failed).
	LabelMIGConfig      = "nvidia.com/mig.config"
	LabelMIGConfigState = "nvidia.com/mig.config.state"
	// NVIDIAMIGPartedConfigMap overrides the built-in mig-parted config
	// (key config.yaml), as the GPU operator's custom config does.
	NVIDIAMIGPartedConfigMap = "custom-mig-parted-config"
)

// DCGMMetricsPath is where a node's agent serves its DCGM-exporter series
// to the API server (the same text as on :9400/metrics): the custom and
// external metrics APIs read every node's there, through nodes/proxy.
const DCGMMetricsPath = "/metrics/dcgm"
