package agent

import (
	"encoding/json"
	"net/http"

	"skiff.dev/skiff/agent/devices"
	"skiff.dev/skiff/api"
)

// DeviceCallsPath serves the device manager's call log (agent/devices
// calllog.go): the real gRPC calls between this node's device manager and
// each device plugin, for the dashboard's sequence view. The API server
// reaches it as /api/v1/nodes/NAME/proxy/devices/calls.
const DeviceCallsPath = "/devices/calls"

// DeviceCalls is what DeviceCallsPath answers.
type DeviceCalls struct {
	Node  string         `json:"node"`
	Calls []devices.Call `json:"calls"`
}

// callLogger is a device allocator that records its calls (devices.Manager).
type callLogger interface{ Calls() []devices.Call }

func (a *Agent) serveDeviceCalls(w http.ResponseWriter, _ *http.Request) {
	out := DeviceCalls{Node: a.cfg.NodeName, Calls: []devices.Call{}}
	if cl, ok := a.cfg.Devices.(callLogger); ok {
		out.Calls = cl.Calls()
	} else if a.cfg.Devices == nil {
		writeStatus(w, api.NewStatusError(http.StatusNotFound, api.ReasonNotFound, "this node runs no device manager"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
