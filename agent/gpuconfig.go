package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"skiff.dev/skiff/agent/devices/gpuplugin"
	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The device plugin's config, as NVIDIA's config manager (the plugin's
// sidecar) follows it: the ConfigMap of configs (kube-system/
// nvidia-device-plugin-config unless --device-plugin-config names
// another), the key named by the node's label nvidia.com/device-plugin.config,
// else the key "default", else no sharing. A change of either is applied
// at once, without a restart: the plugins register again with their new
// devices. A config that does not parse or apply is refused, with the
// plugin's words, in a Warning event on the Node; the node keeps the
// config it had (the last good one), and a later good one applies.

// Event reasons on the Node.
const (
	ReasonDevicePluginConfigApplied = "DevicePluginConfigApplied"
	ReasonInvalidDevicePluginConfig = "InvalidDevicePluginConfig"
)

// ConfigMapRef splits --device-plugin-config: "NAME" (in kube-system) or
// "NAMESPACE/NAME".
func ConfigMapRef(ref string) (namespace, name string) {
	if ns, n, ok := strings.Cut(ref, "/"); ok {
		return ns, n
	}
	if ref == "" {
		ref = api.NVIDIADevicePluginConfigMap
	}
	return api.NVIDIAConfigNamespace, ref
}

// configWatch follows the ConfigMap and the node's labels.
type configWatch struct {
	g        *GPUs
	c        client.Interface
	node     string
	ns, name string
	cms      *client.Informer
	nodes    *client.Informer
	hamiDev  *client.Informer // HAMi's device config (kube-system/hami-scheduler-device)
	hamiNode *client.Informer // and its per-node one (kube-system/hami-device-plugin)
	rec      *client.Recorder
	log      *slog.Logger
	kick     chan struct{}
	lastBad  string // the last refusal, not repeated while nothing changes
}

// watchConfig starts following the device plugin config (and, with it,
// the MIG config) until ctx ends.
func (g *GPUs) watchConfig(ctx context.Context, c client.Interface, node, ref string, lg *slog.Logger) {
	ns, name := ConfigMapRef(ref)
	w := &configWatch{g: g, c: c, node: node, ns: ns, name: name, log: lg, kick: make(chan struct{}, 1)}
	w.cms = client.NewInformer(c, api.MustKindOf(&api.ConfigMap{}), ns, api.ListOptions{FieldSelector: "metadata.name=" + name}, lg)
	w.nodes = client.NewInformer(c, api.MustKindOf(&api.Node{}), "", api.ListOptions{FieldSelector: "metadata.name=" + node}, lg)
	kick := func() {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	h := client.Handler{OnAdd: func(api.Object) { kick() }, OnUpdate: func(_, _ api.Object) { kick() }, OnDelete: func(api.Object) { kick() }}
	w.hamiDev = client.NewInformer(c, api.MustKindOf(&api.ConfigMap{}), api.HAMiConfigNamespace, api.ListOptions{FieldSelector: "metadata.name=" + api.HAMiDeviceConfigMap}, lg)
	w.hamiNode = client.NewInformer(c, api.MustKindOf(&api.ConfigMap{}), api.HAMiConfigNamespace, api.ListOptions{FieldSelector: "metadata.name=" + api.HAMiNodeConfigMap}, lg)
	for _, inf := range []*client.Informer{w.cms, w.nodes, w.hamiDev, w.hamiNode} {
		inf.AddHandler(h)
	}
	w.rec = client.NewRecorder(c, "nvidia-device-plugin", node, lg)
	g.wg.Go(func() { w.cms.Run(ctx) })
	g.wg.Go(func() { w.nodes.Run(ctx) })
	g.wg.Go(func() { w.hamiDev.Run(ctx) })
	g.wg.Go(func() { w.hamiNode.Run(ctx) })
	g.wg.Go(func() { _ = w.rec.Run(ctx) })
	g.wg.Go(func() { // a pending MIG config goes on when its GPUs' pods are gone
		for {
			changed := g.Manager.Changed()
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			if g.mig != nil && g.mig.pending() {
				kick()
			}
		}
	})
	g.wg.Go(func() {
		if !w.cms.WaitForSync(ctx) || !w.nodes.WaitForSync(ctx) || !w.hamiDev.WaitForSync(ctx) || !w.hamiNode.WaitForSync(ctx) {
			return
		}
		for {
			w.reconcile(ctx)
			select {
			case <-ctx.Done():
				return
			case <-w.kick:
			}
		}
	})
}

// reconcile applies the config the node should have, if it is not the one
// in force.
func (w *configWatch) reconcile(ctx context.Context) {
	o, ok := w.nodes.Get("", w.node)
	if !ok {
		return // the node registers soon
	}
	n := o.(*api.Node)
	if w.g.mig != nil {
		w.g.mig.reconcile(ctx, n, w)
	}
	key, explicit := n.Labels[api.LabelDevicePluginConfig]
	if !explicit || key == "" {
		key = api.NVIDIADevicePluginConfigDefaultKey
	}
	var data string
	found := false
	if co, ok := w.cms.Get(w.ns, w.name); ok {
		data, found = co.(*api.ConfigMap).Data[key]
	}
	want := sharingState{}
	from := fmt.Sprintf("ConfigMap %s/%s key %q", w.ns, w.name, key)
	switch {
	case n.Labels[api.HAMiNodeLabel] == api.HAMiNodeLabelValue:
		// HAMi's chart runs its device plugin, not NVIDIA's, on gpu=on nodes.
		from = fmt.Sprintf("HAMi (node label %s=%s)", api.HAMiNodeLabel, api.HAMiNodeLabelValue)
		s, hfrom, err := w.hamiSettings()
		if err != nil {
			w.refuse(ctx, n, err.Error())
			return
		}
		b, _ := json.Marshal(s)
		want = sharingState{From: from + hfrom, HAMi: true, Config: string(b)}
	case found:
		want = sharingState{From: from, Config: data}
	case explicit:
		w.refuse(ctx, n, fmt.Sprintf("%s: no such config (node label %s=%s)", from, api.LabelDevicePluginConfig, key))
		return
	}
	cur := w.g.currentSharing()
	if want == cur {
		w.lastBad = ""
		return
	}
	var pc *gpuplugin.PluginConfig
	if want.HAMi {
		pc = gpuplugin.HAMiConfig(want.hamiSettings())
	} else if want.Config != "" {
		var err error
		if pc, err = gpuplugin.ParseConfig([]byte(want.Config)); err != nil {
			w.refuse(ctx, n, fmt.Sprintf("%s: %v", from, oneLine(err)))
			return
		}
	}
	if err := w.g.Plugins.Apply(ctx, pc); err != nil {
		w.refuse(ctx, n, fmt.Sprintf("%s: %v", from, oneLine(err)))
		return
	}
	w.g.setSharing(want)
	if err := w.g.writeSharingState(want); err != nil {
		w.log.Warn("save the GPU sharing config", "err", err)
	}
	w.lastBad = ""
	w.rec.Event(ctx, n, api.EventNormal, ReasonDevicePluginConfigApplied, describeApplied(want, pc, w.g.Plugins.Layout()))
}

// refuse says once why the config was not applied; the node keeps its own.
func (w *configWatch) refuse(ctx context.Context, n *api.Node, why string) {
	if why == w.lastBad {
		return
	}
	w.lastBad = why
	keep := w.g.currentSharing().From
	if keep == "" {
		keep = "no sharing"
	}
	msg := why + "; the node keeps its config (" + keep + ")"
	w.log.Warn("device plugin config refused", "why", msg)
	w.rec.Event(ctx, n, api.EventWarning, ReasonInvalidDevicePluginConfig, msg)
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// describeApplied is the applied event's message: where from, the
// strategy, and what the node now advertises.
func describeApplied(st sharingState, pc *gpuplugin.PluginConfig, layout []gpu.SubDevice) string {
	from := st.From
	if from == "" {
		from = "no config"
	}
	count := map[string]int{}
	for _, sd := range layout {
		count[sd.Resource]++
	}
	var res []string
	for _, r := range gpuplugin.Resources(layout) {
		res = append(res, fmt.Sprintf("%s: %d", r, count[r]))
	}
	sharing := string(pc.Sharing())
	if pc != nil && pc.HAMi {
		s := pc.HAMiSettings
		sharing = fmt.Sprintf("HAMi vGPU slices (deviceSplitCount %d, deviceMemoryScaling %g, deviceCoreScaling %g", s.SplitCount, s.MemoryScaling, s.CoreScaling)
		if s.FilterUUIDs != "" || s.FilterIndexes != "" {
			sharing += fmt.Sprintf(", filterdevices uuid [%s] index [%s]", s.FilterUUIDs, s.FilterIndexes)
		}
		sharing += ")"
	}
	return fmt.Sprintf("applied %s: sharing %s, migStrategy %s; advertising %s", from, sharing,
		orDefault(pc).MigStrategy, strings.Join(res, ", "))
}

func orDefault(pc *gpuplugin.PluginConfig) *gpuplugin.PluginConfig {
	if pc == nil {
		return gpuplugin.DefaultConfig()
	}
	return pc
}

func (g *GPUs) currentSharing() sharingState {
	g.smu.Lock()
	defer g.smu.Unlock()
	return g.sharing
}

func (g *GPUs) setSharing(st sharingState) {
	g.smu.Lock()
	defer g.smu.Unlock()
	g.sharing = st
}

// hamiSettings resolves the node's HAMi settings from HAMi's device config
// and its per-node config, as HAMi's device plugin reads them (none: HAMi's
// defaults); from says which were read. A ConfigMap without its key or
// whose key does not parse is an error naming it and the field.
func (w *configWatch) hamiSettings() (s api.HAMiNodeSettings, from string, err error) {
	var dc *api.HAMiDeviceConfig
	var nc *api.HAMiNodeConfigs
	read := func(inf *client.Informer, name, key string, parse func([]byte) error) error {
		o, ok := inf.Get(api.HAMiConfigNamespace, name)
		if !ok {
			return nil
		}
		where := fmt.Sprintf("ConfigMap %s/%s key %q", api.HAMiConfigNamespace, name, key)
		data, ok := o.(*api.ConfigMap).Data[key]
		if !ok {
			return fmt.Errorf("%s: no such key", where)
		}
		if err := parse([]byte(data)); err != nil {
			return fmt.Errorf("%s: %s", where, oneLine(err))
		}
		from += ", " + where
		return nil
	}
	if err := read(w.hamiDev, api.HAMiDeviceConfigMap, api.HAMiDeviceConfigKey, func(b []byte) (err error) {
		dc, err = api.ParseHAMiDeviceConfig(b)
		return err
	}); err != nil {
		return s, "", err
	}
	if err := read(w.hamiNode, api.HAMiNodeConfigMap, api.HAMiNodeConfigKey, func(b []byte) (err error) {
		nc, err = api.ParseHAMiNodeConfigs(b)
		return err
	}); err != nil {
		return s, "", err
	}
	return api.NodeSettings(dc, nc, w.node), from, nil
}
