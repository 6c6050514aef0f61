package gputopology

import (
	"encoding/json"
	"fmt"
)

// AnnotationDevices holds a NodeDevices in JSON: the devices the node
// hands out of its GPUs now (whole GPUs, time-sliced replicas, MPS
// shares, MIG devices), what each one's holder sees, and who holds it.
// The agent rewrites it with the other GPU annotations; `describe node`
// and the dashboard show each GPU split into its devices from it.
const AnnotationDevices = "skiff.dev/gpu-devices"

// NodeDevices is the value of AnnotationDevices.
type NodeDevices struct {
	// Sharing is the device plugin's strategy (none, time-slicing, mps),
	// MIGStrategy its flags.migStrategy.
	Sharing     string `json:"sharing"`
	MIGStrategy string `json:"migStrategy,omitempty"`
	// Devices in the order the node lists them (by GPU).
	Devices []SharedDevice `json:"devices"`
}

// SharedDevice is one device of a GPU.
type SharedDevice struct {
	GPU int    `json:"gpu"`
	ID  string `json:"id"`
	// Sharing: none, time-slicing, mps, mig, slice.
	Sharing  string `json:"sharing"`
	Resource string `json:"resource"`
	// Profile is a MIG device's ("1g.5gb").
	Profile string `json:"profile,omitempty"`
	// MemoryMiB and SMPercent are what its holder may use: the whole GPU's
	// memory for a time-sliced replica, its share for MPS, its own for MIG.
	MemoryMiB uint64 `json:"memoryMiB"`
	SMPercent int    `json:"smPercent"`
	// Holder is "namespace/pod/container" (or "claim namespace/name");
	// "" when free.
	Holder string `json:"holder,omitempty"`
}

// ParseNodeDevices reads an AnnotationDevices value.
func ParseNodeDevices(s string) (*NodeDevices, error) {
	var n NodeDevices
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationDevices, err)
	}
	return &n, nil
}
