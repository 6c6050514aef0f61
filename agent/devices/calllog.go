package devices

import (
	"slices"
	"sort"
	"sync"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// The call log: every gRPC call between the manager and a plugin, kept in
// memory for the dashboard's sequence view (the course's "device plugin
// gRPC sequence", from the real run). The agent serves it at
// GET /devices/calls, reached through the API server's nodes/NAME/proxy.
//
// It is bounded per resource: the calls of the current registration
// (Register, GetDevicePluginOptions, the first ListAndWatch answer) are
// kept until the plugin registers again, and the MaxCalls most recent
// others (ListAndWatch updates, GetPreferredAllocation, Allocate,
// PreStartContainer) behind them; older ones are dropped.

// MaxCalls bounds the calls kept per resource besides its registration.
const MaxCalls = 256

// Who sent a call, as the course's lanes name the parties.
const (
	// FromPlugin: the plugin called the manager (Register) or sent on
	// its stream (ListAndWatch answers).
	FromPlugin = "plugin"
	// FromManager: the manager (the kubelet's side) called the plugin.
	FromManager = "kubelet"
)

// Call is one recorded call or stream message.
type Call struct {
	// Seq numbers the calls of one agent in the order they were
	// recorded (a call when it returned).
	Seq int64 `json:"seq"`
	// Resource is the plugin's resource name (nvidia.com/gpu).
	Resource string `json:"resource"`
	// Method: Register, GetDevicePluginOptions, ListAndWatch,
	// GetPreferredAllocation, Allocate or PreStartContainer.
	Method string `json:"method"`
	// From is FromPlugin or FromManager.
	From string `json:"from"`
	// Start and End of the call (equal for a stream message).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Pod ("ns/name") the call was made for, when one was.
	Pod string `json:"pod,omitempty"`
	// Request and Response: the payloads, as plain JSON-able values.
	Request  any `json:"request,omitempty"`
	Response any `json:"response,omitempty"`
	// Error of a failed call.
	Error string `json:"error,omitempty"`
}

// callLog is the manager's log; safe for concurrent use.
type callLog struct {
	mu     sync.Mutex
	seq    int64
	byRes  map[string]*resourceCalls
	now    func() time.Time
	maxLen int
}

type resourceCalls struct {
	registration []Call // of the current registration
	recent       []Call // at most maxLen, oldest first
}

func newCallLog() *callLog {
	return &callLog{byRes: map[string]*resourceCalls{}, now: time.Now, maxLen: MaxCalls}
}

// add records c; a Register starts a new registration, and the first
// ListAndWatch answer after it joins the registration.
func (l *callLog) add(c Call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	c.Seq = l.seq
	rc := l.byRes[c.Resource]
	if rc == nil {
		rc = &resourceCalls{}
		l.byRes[c.Resource] = rc
	}
	switch {
	case c.Method == "Register":
		// Register is recorded when it returns, after the
		// GetDevicePluginOptions call it made.
		rc.registration = nil
		if n := len(rc.recent); n > 0 && rc.recent[n-1].Method == "GetDevicePluginOptions" {
			rc.registration = append(rc.registration, rc.recent[n-1])
			rc.recent = rc.recent[:n-1]
		}
		rc.registration = append(rc.registration, c)
	case c.Method == "ListAndWatch" && len(rc.registration) > 0 && !hasMethod(rc.registration, "ListAndWatch"):
		rc.registration = append(rc.registration, c)
	default:
		rc.recent = append(rc.recent, c)
		if n := len(rc.recent) - l.maxLen; n > 0 {
			rc.recent = slices.Clone(rc.recent[n:])
		}
	}
}

func hasMethod(cs []Call, m string) bool {
	return slices.ContainsFunc(cs, func(c Call) bool { return c.Method == m })
}

// calls returns a copy of every kept call, by start time (a Register,
// recorded when it returns, comes before the calls it made).
func (l *callLog) calls() []Call {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Call
	for _, rc := range l.byRes {
		out = append(out, rc.registration...)
		out = append(out, rc.recent...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Start.Equal(out[j].Start) {
			return out[i].Start.Before(out[j].Start)
		}
		return out[i].Seq < out[j].Seq
	})
	return out
}

// Calls returns the recorded calls between the manager and its plugins,
// by start time (see the call log above).
func (m *Manager) Calls() []Call { return m.callLog.calls() }

// record adds a call that ran from start to now.
func (m *Manager) record(resource, method, from, pod string, start time.Time, req, resp any, err error) {
	c := Call{Resource: resource, Method: method, From: from, Pod: pod, Start: start, End: m.callLog.now(), Request: req, Response: resp}
	if err != nil {
		c.Error = err.Error()
	}
	m.callLog.add(c)
}

// deviceList is a ListAndWatch answer as the log shows it.
func deviceList(resp *pluginapi.ListAndWatchResponse) map[string]any {
	devs := make([]map[string]any, 0, len(resp.GetDevices()))
	for _, d := range resp.GetDevices() {
		row := map[string]any{"id": d.GetID(), "health": d.GetHealth()}
		if t := d.GetTopology(); t != nil && len(t.GetNodes()) > 0 {
			var numa []int64
			for _, n := range t.GetNodes() {
				numa = append(numa, n.GetID())
			}
			row["numa"] = numa
		}
		devs = append(devs, row)
	}
	return map[string]any{"devices": devs}
}
