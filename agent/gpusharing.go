package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"skiff.dev/skiff/agent/devices"
	"skiff.dev/skiff/agent/devices/gpuplugin"
	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/cdi"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/atomicfile"
)

// One GPU inventory across the sharing modes. Every device the node hands
// out (a whole GPU, a replica, an MPS share, a MIG device; through the
// device plugin or a DRA claim) takes a part of one physical GPU, and two
// holdings of one GPU may coexist only when both are shares of the same
// kind: replicas of a time-sliced (or MPS) GPU with each other, MIG
// devices of one geometry with each other. A whole GPU (a device plugin
// GPU or a DRA claim's) excludes every other use of it. NVIDIA's stack
// keeps the device plugin and the DRA driver off each other's GPUs by
// deployment (one or the other per node); skiff runs both and keeps them
// apart here, and a config change that reshapes a GPU still held the old
// way (a pod keeps its whole GPU while time-slicing starts) leaves that
// GPU's new devices unavailable until it is released.

// footprint is how a held device uses its GPU.
type footprint struct {
	parent string // GPU UUID
	shared bool   // a replica or MPS share
	mig    string // the MIG device's UUID, for a MIG device
}

// footprintOf classifies a device ID by the layout in force, or by its
// form when it is of an earlier layout ("<uuid>::<n>" a replica, a GPU
// UUID the whole GPU).
func footprintOf(id string, byID map[string]gpu.SubDevice) (footprint, bool) {
	if sd, ok := byID[id]; ok {
		switch {
		case sd.MIG != nil && sd.Sharing == gpu.SharingMIG:
			return footprint{parent: sd.ParentUUID, mig: sd.MIG.UUID}, true
		case sd.MIG != nil:
			return footprint{parent: sd.ParentUUID, mig: sd.MIG.UUID, shared: true}, true
		case sd.Sharing == gpu.SharingTimeSlicing || sd.Sharing == gpu.SharingMPS || sd.Sharing == gpu.SharingSlice:
			return footprint{parent: sd.ParentUUID, shared: true}, true
		}
		return footprint{parent: sd.ParentUUID}, true
	}
	if uuid, _, ok := gpu.ParseReplicaID(id); ok && strings.HasPrefix(uuid, "GPU-") {
		return footprint{parent: uuid, shared: true}, true
	}
	if strings.HasPrefix(id, "GPU-") {
		return footprint{parent: id}, true
	}
	return footprint{}, false // a MIG device of a geometry gone: its GPU was emptied first
}

// conflicts reports whether holding a and b at once would hand out more
// than the GPU has.
func conflicts(a, b footprint) bool {
	if a.parent != b.parent {
		return false
	}
	switch {
	case a.mig != "" && b.mig != "":
		return a.mig == b.mig && !(a.shared && b.shared)
	case a.mig != "" || b.mig != "":
		return true // a MIG device and the GPU whole (or its replicas)
	}
	return !(a.shared && b.shared)
}

// unavailable is the device manager's Config.Unavailable: the devices of
// resource that a holding elsewhere rules out (a DRA claim's GPU, or a
// device of another resource or shape on the same GPU), to who holds it.
// Called under the manager's lock: it reads the checkpoint it is handed.
func (g *GPUs) unavailable(resource string, held []devices.Holding) map[string]string {
	layout := g.layoutNow()
	byID := make(map[string]gpu.SubDevice, len(layout))
	for _, sd := range layout {
		byID[sd.ID] = sd
	}
	type holding struct {
		id  string
		fp  footprint
		who string
	}
	var hs []holding
	if g.Driver != nil {
		for uuid, claim := range g.Driver.Held() {
			hs = append(hs, holding{fp: footprint{parent: uuid}, who: claim})
		}
	}
	for _, h := range held {
		for _, id := range h.DeviceIDs {
			if fp, ok := footprintOf(id, byID); ok {
				hs = append(hs, holding{id: id, fp: fp, who: h.Namespace + "/" + h.Pod})
			}
		}
	}
	out := map[string]string{}
	for _, sd := range layout {
		if sd.Resource != resource {
			continue
		}
		fp, _ := footprintOf(sd.ID, byID)
		for _, h := range hs {
			if h.id != sd.ID && conflicts(fp, h.fp) {
				out[sd.ID] = h.who
				break
			}
		}
	}
	return out
}

// heldByDevicePlugin maps the GPUs the device plugin handed any part of
// to a pod holding it, for the DRA driver (a claim takes a GPU whole).
func (g *GPUs) heldByDevicePlugin() map[string]string {
	byID := g.layoutByID()
	out := map[string]string{}
	for _, h := range g.Manager.Holdings() {
		for _, id := range h.DeviceIDs {
			if fp, ok := footprintOf(id, byID); ok {
				out[fp.parent] = h.Namespace + "/" + h.Pod
			}
		}
	}
	return out
}

// parentGPUs are the GPUs (by UUID) that device IDs of the layout in
// force are, or are parts of, each once.
func (g *GPUs) parentGPUs(ids []string) []string {
	byID := g.layoutByID()
	var out []string
	for _, id := range ids {
		if fp, ok := footprintOf(id, byID); ok && !slices.Contains(out, fp.parent) {
			out = append(out, fp.parent)
		}
	}
	return out
}

// layoutByID is layoutNow by device ID.
func (g *GPUs) layoutByID() map[string]gpu.SubDevice {
	layout := g.layoutNow()
	byID := make(map[string]gpu.SubDevice, len(layout))
	for _, sd := range layout {
		byID[sd.ID] = sd
	}
	return byID
}

// layoutNow is the plugins' layout, or every GPU whole before they start.
func (g *GPUs) layoutNow() []gpu.SubDevice {
	g.smu.Lock() // set by startPlugins while the DRA driver already publishes
	plugins := g.Plugins
	g.smu.Unlock()
	if plugins != nil {
		if l := plugins.Layout(); l != nil {
			return l
		}
	}
	return gpu.WholeGPUs(g.devs, gpuplugin.ResourceName)
}

// sharingState is the device plugin config in force, kept across agent
// restarts (DATA-DIR/gpu-sharing.json), so a restarted agent advertises
// what it did before, not whole GPUs, until it has read the ConfigMap.
type sharingState struct {
	// From says where the config came from ("ConfigMap kube-system/NAME
	// key KEY"; "" for none).
	From string `json:"from"`
	// Config is the key's text.
	Config string `json:"config"`
	// HAMi: the node is labelled gpu=on and hands out HAMi's slices
	// (the ConfigMap does not apply then); Config is then the
	// api.HAMiNodeSettings resolved from HAMi's device config, in JSON
	// ("": HAMi's defaults).
	HAMi bool `json:"hami,omitempty"`
}

// hamiSettings are a HAMi node's settings (HAMi's defaults when Config
// does not hold them).
func (st sharingState) hamiSettings() api.HAMiNodeSettings {
	s := api.HAMiDefaultNodeSettings()
	if st.Config != "" {
		var got api.HAMiNodeSettings
		if err := json.Unmarshal([]byte(st.Config), &got); err == nil && got.SplitCount > 0 && got.MemoryScaling > 0 && got.CoreScaling > 0 {
			s = got
		}
	}
	return s
}

func (g *GPUs) statePath() string { return filepath.Join(g.dataDir, "gpu-sharing.json") }

func (g *GPUs) readSharingState() (sharingState, *gpuplugin.PluginConfig) {
	var st sharingState
	b, err := os.ReadFile(g.statePath())
	if errors.Is(err, fs.ErrNotExist) || g.dataDir == "" {
		return st, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		g.log.Warn("GPU sharing state unreadable: starting without sharing until the config is read", "path", g.statePath(), "err", err)
		return sharingState{}, nil
	}
	if st.HAMi {
		return st, gpuplugin.HAMiConfig(st.hamiSettings())
	}
	if st.Config == "" {
		return st, nil
	}
	pc, err := gpuplugin.ParseConfig([]byte(st.Config))
	if err != nil {
		g.log.Warn("GPU sharing state no longer parses: starting without sharing", "err", err)
		return sharingState{}, nil
	}
	return st, pc
}

func (g *GPUs) writeSharingState(st sharingState) error {
	if g.dataDir == "" {
		return nil
	}
	b, _ := json.Marshal(st)
	return atomicfile.WriteFile(g.statePath(), b, 0o600)
}

// startPlugins starts the device plugins under the config of the last
// run (or none), and waits for their first device lists.
func (g *GPUs) startPlugins(ctx context.Context, dir string, lg *slog.Logger) error {
	set, err := gpuplugin.NewSet(gpuplugin.SetConfig{Source: g.Source, Dir: dir, OnLayout: g.onLayout, MIG: g.migDevices,
		HAMiDecision: g.hamiDecision, HAMiAllocated: g.hamiBindPhase, Log: lg})
	if err != nil {
		return err
	}
	g.smu.Lock()
	g.Plugins = set
	g.smu.Unlock()
	g.mig = &migManager{g: g}
	if mc, ok := g.Source.(gpu.MIGConfigurer); ok {
		g.mig.mc = mc
		g.mig.restore()
	}
	st, pc := g.readSharingState()
	if err := set.Apply(ctx, pc); err != nil && pc != nil {
		lg.Warn("the last GPU sharing config does not apply now: starting without sharing", "from", st.From, "err", err)
		st = sharingState{}
		if err := set.Apply(ctx, nil); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	g.sharing = st
	g.waitListed(ctx, lg)
	return nil
}

// waitListed waits until the manager lists every device of the layout, so
// the node registers with them.
func (g *GPUs) waitListed(ctx context.Context, lg *slog.Logger) {
	layout := g.Plugins.Layout()
	want := map[string]int{}
	for _, sd := range layout {
		want[sd.Resource]++
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	err := g.Manager.Wait(wctx, func(s devices.Snapshot) bool {
		for res, n := range want {
			if len(s[res].Devices) != n || !s[res].Registered {
				return false
			}
		}
		return true
	})
	if err != nil {
		lg.Warn("GPU device plugins have not listed their devices yet", "err", err)
	}
}

// onLayout: the simulated driver's CDI spec gets the new devices before
// they are advertised.
func (g *GPUs) onLayout(layout []gpu.SubDevice) error {
	if g.cdi == nil {
		return nil
	}
	if _, err := cdi.WriteSimSpec(*g.cdi, g.devs, layout, g.topo); err != nil {
		return fmt.Errorf("simulated GPUs' CDI spec: %w", err)
	}
	return nil
}

// migDevices lists the MIG devices of the Source (none when it has no
// MIG) but the ones the DRA driver created for its claims (dynamic MIG):
// those are the claims', not the device plugin's or the MIG manager's
// (a GPU left with none of its own is not in MIG mode for them).
func (g *GPUs) migDevices(ctx context.Context) (map[int][]gpu.MIGDevice, error) {
	ms, ok := g.Source.(gpu.MIGSource)
	if !ok {
		return nil, nil
	}
	all, err := ms.MIGDevices(ctx)
	if err != nil || g.Driver == nil {
		return all, err
	}
	own := g.Driver.MIGDeviceUUIDs()
	if len(own) == 0 {
		return all, nil
	}
	out := map[int][]gpu.MIGDevice{}
	for i, devs := range all {
		devs = slices.DeleteFunc(slices.Clone(devs), func(m gpu.MIGDevice) bool { return own[m.UUID] })
		if len(devs) > 0 {
			out[i] = devs
		}
	}
	return out, nil
}

// Labels are the node's GPU labels now, in GPU feature discovery's form,
// under the config and layout in force: the model labels of gpu.Labels,
// nvidia.com/gpu.product with -SHARED (shared, not renamed) or
// -MIG-<profile> (migStrategy single), nvidia.com/gpu.replicas and
// .sharing-strategy, nvidia.com/mps.capable, nvidia.com/mig.capable,
// nvidia.com/mig.strategy and, with the mixed strategy, the
// nvidia.com/mig-<profile>.* labels; and skiff.dev/device-plugin
// (api.LabelSkiffDevicePlugin: builtin or external).
func (g *GPUs) Labels() map[string]string {
	if g == nil || len(g.devs) == 0 {
		return nil
	}
	var pc *gpuplugin.PluginConfig
	var layout []gpu.SubDevice
	if g.Plugins != nil {
		pc, layout = g.Plugins.Applied(), g.Plugins.Layout()
	}
	l := gpuplugin.Labels(pc, g.devs, layout, g.Source.Simulated())
	if g.mig != nil {
		maps.Copy(l, g.mig.Labels())
	}
	l[api.LabelSkiffDevicePlugin] = g.plugin
	return l
}

// nodeDevices is the AnnotationDevices value: every device of the layout
// with what its holder sees and who holds it.
func (g *GPUs) nodeDevices() gputopology.NodeDevices {
	nd := gputopology.NodeDevices{Sharing: string(gpu.SharingNone), Devices: []gputopology.SharedDevice{}}
	if g.Plugins != nil {
		if pc := g.Plugins.Applied(); pc != nil {
			nd.Sharing, nd.MIGStrategy = string(pc.Sharing()), pc.MigStrategy
		}
	}
	holders := g.holders()
	for _, sd := range g.layoutNow() {
		d := gputopology.SharedDevice{GPU: sd.ParentIndex, ID: sd.ID, Sharing: string(sd.Sharing), Resource: sd.Resource,
			MemoryMiB: sd.MemoryMiB, SMPercent: sd.SMPercent}
		if sd.MIG != nil {
			d.Profile = sd.MIG.Profile
		}
		if h, ok := holders[sd.ID]; ok {
			d.Holder = h.String()
		} else if h, ok := holders[sd.ParentUUID]; ok && h.Claim != "" {
			d.Holder = h.String() // the GPU is a claim's, whole
		}
		nd.Devices = append(nd.Devices, d)
	}
	return nd
}

// hamiDecision is the container's part of the scheduler's HAMi decision
// on its pod (hami.io/vgpu-devices-to-allocate), read from the API: the
// scheduler writes it before it binds the pod, so a pod on this node has it.
func (g *GPUs) hamiDecision(ctx context.Context, key, container string) ([]api.HAMiContainerDevice, error) {
	if g.client == nil {
		return nil, errors.New("no API client")
	}
	ns, name, _ := strings.Cut(key, "/")
	p, err := client.Get[*api.Pod](ctx, g.client, ns, name)
	if err != nil {
		return nil, err
	}
	raw, ok := p.Annotations[api.HAMiDevicesToAllocate]
	if !ok {
		return nil, fmt.Errorf("no %s annotation: the pod was not scheduled by HAMi", api.HAMiDevicesToAllocate)
	}
	pd, err := api.DecodeHAMiPodDevices(raw)
	if err != nil {
		return nil, err
	}
	for i, c := range p.Spec.Containers {
		if c.Name == container {
			if i >= len(pd) {
				return nil, fmt.Errorf("%s has no entry for container %d", api.HAMiDevicesToAllocate, i)
			}
			return pd[i], nil
		}
	}
	return nil, fmt.Errorf("no container %q", container)
}

// hamiBindPhase moves the pod's hami.io/bind-phase on after an allocation,
// as HAMi's device plugin does: "failed" when one fails (the pod fails at
// admission with the reason, UnexpectedAdmissionError), "success" once the
// last container with cards has them. A pod gone or replaced is left; a
// write lost to a conflict is tried again.
func (g *GPUs) hamiBindPhase(ctx context.Context, key, container string, allocErr error) {
	if g.client == nil {
		return
	}
	ns, name, _ := strings.Cut(key, "/")
	for range 5 {
		p, err := client.Get[*api.Pod](ctx, g.client, ns, name)
		if err != nil {
			return
		}
		phase := api.HAMiBindPhaseFailed
		if allocErr == nil {
			if !lastHAMiContainer(p, container) {
				return
			}
			phase = api.HAMiBindPhaseSuccess
		}
		if p.Annotations[api.HAMiBindPhase] == phase {
			return
		}
		p = api.Clone(p)
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[api.HAMiBindPhase] = phase
		if _, err = g.client.Update(ctx, p); err == nil || !api.IsConflict(err) {
			if err != nil {
				g.log.Warn("HAMi bind phase not written", "pod", key, "phase", phase, "err", err)
			}
			return
		}
	}
}

// lastHAMiContainer reports whether container is the last of p's
// containers with cards in its HAMi decision.
func lastHAMiContainer(p *api.Pod, container string) bool {
	pd := api.PodHAMiDevices(p)
	last := ""
	for i, c := range p.Spec.Containers {
		if i < len(pd) && len(pd[i]) > 0 {
			last = c.Name
		}
	}
	return last == container
}
