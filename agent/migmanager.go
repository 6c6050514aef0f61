package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/migparted"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/atomicfile"
)

// The MIG manager, as the GPU operator's: the node label
// nvidia.com/mig.config names a geometry of the mig-parted config (the
// built-in one, or ConfigMap kube-system/custom-mig-parted-config, key
// config.yaml); the manager applies it to the GPUs and says how it went
// in the label nvidia.com/mig.config.state: pending, then success or
// failed. Like NVIDIA's, it changes a GPU only when no pod uses it: while
// one does, the state stays pending and a Warning event names the pods
// (it never deletes them). On simulated GPUs it partitions them itself;
// on real ones nvidia-mig-parted does, and skiff reads the result.

// Event reasons of the MIG manager, on the Node.
const (
	ReasonMIGConfigApplied = "MIGConfigApplied"
	ReasonMIGConfigPending = "MIGConfigPending"
	ReasonMIGConfigFailed  = "MIGConfigFailed"
)

// The states of nvidia.com/mig.config.state.
const (
	MIGStatePending = "pending"
	MIGStateSuccess = "success"
	MIGStateFailed  = "failed"
)

type migManager struct {
	g  *GPUs
	mc gpu.MIGConfigurer // nil: real GPUs

	mu      sync.Mutex
	state   string
	applied string // the config the GPUs have
	lastMsg string
}

// migState is the geometry kept across agent restarts (DATA-DIR/gpu-mig.json):
// simulated GPUs forget it with the process, as real ones with a reboot.
type migState struct {
	Config string                    `json:"config"`
	Devs   map[string]map[string]int `json:"gpus"` // GPU index → profile → count
}

func (m *migManager) path() string { return filepath.Join(m.g.dataDir, "gpu-mig.json") }

// restore applies the geometry of the last run before the plugins start.
func (m *migManager) restore() {
	if m.mc == nil || m.g.dataDir == "" {
		return
	}
	b, err := os.ReadFile(m.path())
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var st migState
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		m.g.log.Warn("MIG state unreadable: GPUs start without MIG", "path", m.path(), "err", err)
		return
	}
	for idx, devs := range st.Devs {
		var i int
		if _, err := fmt.Sscan(idx, &i); err != nil {
			continue
		}
		if err := m.mc.SetMIG(i, true, requests(devs)); err != nil {
			m.g.log.Warn("MIG state does not apply", "gpu", i, "err", err)
		}
	}
	m.applied, m.state = st.Config, MIGStateSuccess
}

func (m *migManager) save(config string, cur map[int][]gpu.MIGDevice) error {
	st := migState{Config: config, Devs: map[string]map[string]int{}}
	for i, devs := range cur {
		st.Devs[fmt.Sprint(i)] = countProfiles(devs)
	}
	b, _ := json.Marshal(st)
	return atomicfile.WriteFile(m.path(), b, 0o600)
}

func countProfiles(devs []gpu.MIGDevice) map[string]int {
	out := map[string]int{}
	for _, d := range devs {
		out[d.Profile]++
	}
	return out
}

func requests(counts map[string]int) []gpu.MIGRequest {
	var out []gpu.MIGRequest
	for _, p := range slices.Sorted(maps.Keys(counts)) {
		if counts[p] > 0 {
			out = append(out, gpu.MIGRequest{Profile: p, Count: counts[p]})
		}
	}
	return out
}

// Labels is nvidia.com/mig.config.state once the manager has worked.
func (m *migManager) Labels() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == "" {
		return nil
	}
	return map[string]string{api.LabelMIGConfigState: m.state}
}

func (m *migManager) pending() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state == MIGStatePending
}

func (m *migManager) setState(state string) {
	m.mu.Lock()
	changed := m.state != state
	m.state = state
	m.mu.Unlock()
	if changed && m.g.Manager != nil {
		m.g.Manager.Notify() // the node's labels are written at once
	}
}

// say records an event once per distinct message.
func (m *migManager) say(ctx context.Context, w *configWatch, n *api.Node, typ, reason, msg string) {
	m.mu.Lock()
	repeat := m.lastMsg == msg
	m.lastMsg = msg
	m.mu.Unlock()
	if !repeat {
		w.rec.Event(ctx, n, typ, reason, msg)
	}
}

// reconcile brings the GPUs to the geometry the node's label names.
func (m *migManager) reconcile(ctx context.Context, n *api.Node, w *configWatch) {
	want := n.Labels[api.LabelMIGConfig]
	if want == "" {
		return
	}
	fail := func(msg string) {
		m.setState(MIGStateFailed)
		m.say(ctx, w, n, api.EventWarning, ReasonMIGConfigFailed, fmt.Sprintf("%s=%s: %s", api.LabelMIGConfig, want, msg))
	}
	cfg, err := m.config(ctx, w)
	if err != nil {
		fail(err.Error())
		return
	}
	if m.mc == nil {
		fail("skiff partitions simulated GPUs only; on real GPUs apply the geometry with nvidia-mig-parted, and skiff reads it")
		return
	}
	var gpus []migparted.GPU
	for _, d := range m.g.devs {
		gpus = append(gpus, migparted.GPU{Index: d.Index, PCIDeviceID: m.mc.PCIDeviceID(d.Index)})
	}
	targets, err := cfg.Geometry(want, gpus)
	if err != nil {
		fail(err.Error())
		return
	}
	cur, err := m.g.migDevices(ctx)
	if err != nil {
		fail(err.Error())
		return
	}
	var changing []int
	for _, i := range slices.Sorted(maps.Keys(targets)) {
		t := targets[i]
		devs, enabled := cur[i]
		if t.Enabled != enabled || (t.Enabled && !maps.Equal(nonZero(t.Devices), countProfiles(devs))) {
			changing = append(changing, i)
		}
	}
	m.mu.Lock()
	done := len(changing) == 0 && m.applied == want && m.state == MIGStateSuccess
	m.mu.Unlock()
	if done {
		return
	}
	if busy := m.busy(changing); len(busy) > 0 {
		m.setState(MIGStatePending)
		m.say(ctx, w, n, api.EventWarning, ReasonMIGConfigPending, fmt.Sprintf(
			"%s=%s waits: the MIG manager repartitions a GPU only when no pod uses it (skiff does not delete them): %s",
			api.LabelMIGConfig, want, strings.Join(busy, "; ")))
		return
	}
	m.setState(MIGStatePending)
	if err := m.apply(changing, targets, cur); err != nil {
		fail(err.Error())
		return
	}
	after, _ := m.g.migDevices(ctx)
	if err := m.save(want, after); err != nil {
		m.g.log.Warn("save the MIG state", "err", err)
	}
	if err := m.g.Plugins.Apply(ctx, m.g.Plugins.Applied()); err != nil {
		fail("the device plugin cannot advertise the new MIG devices: " + err.Error())
		return
	}
	m.mu.Lock()
	m.applied = want
	m.mu.Unlock()
	m.setState(MIGStateSuccess)
	m.say(ctx, w, n, api.EventNormal, ReasonMIGConfigApplied, fmt.Sprintf("applied MIG config %s: %s", want, describeMIG(after, len(m.g.devs))))
}

// apply sets the geometry of the GPUs that change, all or nothing.
func (m *migManager) apply(changing []int, targets map[int]migparted.Target, cur map[int][]gpu.MIGDevice) error {
	var done []int
	for _, i := range changing {
		t := targets[i]
		if err := m.mc.SetMIG(i, t.Enabled, requests(t.Devices)); err != nil {
			for _, j := range done { // put back what changed
				devs, enabled := cur[j]
				_ = m.mc.SetMIG(j, enabled, requests(countProfiles(devs)))
			}
			return err
		}
		done = append(done, i)
	}
	return nil
}

// busy names the pods (and claims) holding a part of each GPU in gpus.
func (m *migManager) busy(gpus []int) []string {
	uuids := map[string]int{}
	for _, i := range gpus {
		uuids[m.g.devs[i].UUID] = i
	}
	held := map[int][]string{}
	for uuid, who := range m.g.heldByDevicePlugin() {
		if i, ok := uuids[uuid]; ok {
			held[i] = append(held[i], who)
		}
	}
	if m.g.Driver != nil {
		for uuid, claim := range m.g.Driver.Held() {
			if i, ok := uuids[uuid]; ok {
				held[i] = append(held[i], claim)
			}
		}
	}
	var out []string
	for _, i := range slices.Sorted(maps.Keys(held)) {
		sort.Strings(held[i])
		out = append(out, fmt.Sprintf("GPU %d is used by %s", i, strings.Join(slices.Compact(held[i]), ", ")))
	}
	return out
}

// config is ConfigMap kube-system/custom-mig-parted-config's config.yaml
// when it exists, else the built-in one.
func (m *migManager) config(ctx context.Context, w *configWatch) (*migparted.Config, error) {
	o, err := w.c.Get(ctx, api.MustKindOf(&api.ConfigMap{}), api.NVIDIAConfigNamespace, api.NVIDIAMIGPartedConfigMap)
	if api.IsNotFound(err) {
		return migparted.Default(), nil
	}
	if err != nil {
		return nil, err
	}
	data, ok := o.(*api.ConfigMap).Data["config.yaml"]
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s/%s has no key config.yaml", api.NVIDIAConfigNamespace, api.NVIDIAMIGPartedConfigMap)
	}
	cfg, err := migparted.Parse([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %v", api.NVIDIAConfigNamespace, api.NVIDIAMIGPartedConfigMap, oneLine(err))
	}
	return cfg, nil
}

func nonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v > 0 {
			out[k] = v
		}
	}
	return out
}

// describeMIG: "GPU 0-7: 7x 1g.5gb" style, per GPU.
func describeMIG(devs map[int][]gpu.MIGDevice, n int) string {
	var parts []string
	for i := range n {
		c, ok := devs[i]
		if !ok {
			parts = append(parts, fmt.Sprintf("GPU %d: MIG disabled", i))
			continue
		}
		var ps []string
		counts := countProfiles(c)
		for _, p := range slices.Sorted(maps.Keys(counts)) {
			ps = append(ps, fmt.Sprintf("%dx %s", counts[p], p))
		}
		parts = append(parts, fmt.Sprintf("GPU %d: %s", i, strings.Join(ps, ", ")))
	}
	return strings.Join(parts, "; ")
}
