package agent

import (
	"context"
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
	w.cms.AddHandler(h)
	w.nodes.AddHandler(h)
	w.rec = client.NewRecorder(c, "nvidia-device-plugin", node, lg)
	g.wg.Go(func() { w.cms.Run(ctx) })
	g.wg.Go(func() { w.nodes.Run(ctx) })
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
		if !w.cms.WaitForSync(ctx) || !w.nodes.WaitForSync(ctx) {
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
		want = sharingState{From: from, HAMi: true}
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
		pc = gpuplugin.HAMiConfig()
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
		sharing = "HAMi vGPU slices"
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
