package cdi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/specs-go"
)

// ClaimKind is the CDI vendor/class of the per-claim specs the DRA GPU
// driver writes (NVIDIA's k8s-dra-driver-gpu uses the same).
const ClaimKind = "k8s.gpu.nvidia.com/claim"

// ClaimDevice is one GPU of a prepared claim.
type ClaimDevice struct {
	// Name is the DRA device name, gpu-MINOR.
	Name string
	// UUID of the GPU.
	UUID string
	// Env is more of the device's environment: what its claim's config
	// sets (NVIDIA's MPS client variables, skiff's sharing note).
	Env []string
	// Sim, when not nil, is the whole device on a simulated GPU (a MIG
	// device the driver created: SimMIGEdits); the claim's device is then
	// the only CDI device the container gets for it.
	Sim *specs.ContainerEdits
}

// ClaimSpecName is the file name of a claim's spec.
func ClaimSpecName(claimUID string) string { return "skiff-claim-" + claimUID + ".yaml" }

// ClaimDeviceName is the fully qualified CDI name of a claim's device:
// "k8s.gpu.nvidia.com/claim=UID-gpu-0".
func ClaimDeviceName(claimUID, device string) string {
	return ClaimKind + "=" + claimUID + "-" + device
}

// WriteClaimSpec writes the CDI spec of one prepared claim into dir: a
// device UID-gpu-N per GPU whose edits say, in the container's
// environment, which claim the GPU came through
// (DRA_CLAIM_GPU_N=NAMESPACE/NAME/UUID). The GPU itself (device node,
// driver files, the simulated nvidia-smi record) comes from the GPU's own
// CDI device, nvidia.com/gpu=INDEX, which the driver returns beside it:
// one definition of each GPU for both the device plugin and DRA.
// It returns the spec's path.
func WriteClaimSpec(dir, namespace, name, claimUID string, devs []ClaimDevice) (string, error) {
	if dir == "" || claimUID == "" {
		return "", errors.New("write claim CDI spec: spec dir and claim uid are required")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("write claim CDI spec: %w", err)
	}
	spec := &specs.Spec{Kind: ClaimKind}
	for _, d := range devs {
		edits := specs.ContainerEdits{
			Env: append([]string{fmt.Sprintf("DRA_CLAIM_%s=%s/%s/%s", EnvName(d.Name), namespace, name, d.UUID)}, d.Env...),
		}
		if d.Sim != nil {
			edits.Env = append(edits.Env, d.Sim.Env...)
			edits.DeviceNodes, edits.Mounts = d.Sim.DeviceNodes, d.Sim.Mounts
		}
		spec.Devices = append(spec.Devices, specs.Device{Name: claimUID + "-" + d.Name, ContainerEdits: edits})
	}
	version, err := specs.MinimumRequiredVersion(spec)
	if err != nil {
		return "", fmt.Errorf("write claim CDI spec: %w", err)
	}
	spec.Version = version
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		return "", fmt.Errorf("write claim CDI spec: %w", err)
	}
	if err := cache.WriteSpec(spec, ClaimSpecName(claimUID)); err != nil {
		return "", fmt.Errorf("write claim CDI spec: %w", err)
	}
	return filepath.Join(dir, ClaimSpecName(claimUID)), nil
}

// RemoveClaimSpec removes a claim's spec; a missing one is fine.
func RemoveClaimSpec(dir, claimUID string) error {
	err := os.Remove(filepath.Join(dir, ClaimSpecName(claimUID)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove claim CDI spec: %w", err)
	}
	return nil
}

// EnvName turns gpu-3 into GPU_3 (DRA_CLAIM_GPU_3).
func EnvName(device string) string {
	b := []byte(device)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		default:
			b[i] = '_'
		}
	}
	return string(b)
}
