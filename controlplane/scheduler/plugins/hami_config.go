package plugins

import (
	"context"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// HAMi's device config (ConfigMap kube-system/hami-scheduler-device, key
// device-config.yaml), followed live: its defaultMemory and defaultCores
// are what a container asking only nvidia.com/gpu asks per card. A config
// that does not parse is refused (api.ParseHAMiDeviceConfig, the agent's
// parser too, which reports it on its Node) and the last good one stays;
// none at all is HAMi's defaults. A change retries the waiting pods.

// Run implements framework.EventSourcePlugin: a change of the device
// config's ConfigMap (any other ConfigMap is not the plugin's) loads it
// and, when the defaults changed, retries the waiting pods.
func (h *HAMi) Run(ctx context.Context, moved func()) {
	if h.cfg == nil {
		close(h.cfgReg)
		return
	}
	changed := func(o api.Object) {
		if m := o.GetObjectMeta(); m.Namespace != api.HAMiConfigNamespace || m.Name != api.HAMiDeviceConfigMap {
			return
		}
		if h.loadConfig() {
			moved()
		}
	}
	reg := h.cfg.AddHandler(client.Handler{OnAdd: changed, OnUpdate: func(_, o api.Object) { changed(o) }, OnDelete: changed})
	close(h.cfgReg)
	h.cfgInfs.Start(ctx) // a no-op when the scheduler started them
	<-ctx.Done()
	h.cfg.RemoveHandler(reg)
	if h.ownsCfg {
		h.cfgInfs.Wait()
	}
}

// WaitForSync implements framework.EventSourcePlugin: the config is read
// before the first cycle.
func (h *HAMi) WaitForSync(ctx context.Context) bool {
	if h.cfg == nil {
		return true
	}
	select {
	case <-h.cfgReg:
	case <-ctx.Done():
		return false
	}
	if !h.cfg.WaitForSync(ctx) {
		return false
	}
	h.loadConfig()
	return true
}

// loadConfig applies the ConfigMap's config; true when the defaults changed.
func (h *HAMi) loadConfig() bool {
	var d api.HAMiRequestDefaults // no ConfigMap or no key: HAMi's defaults
	if o, ok := h.cfg.Get(api.HAMiConfigNamespace, api.HAMiDeviceConfigMap); ok {
		if data, ok := o.(*api.ConfigMap).Data[api.HAMiDeviceConfigKey]; ok {
			c, err := api.ParseHAMiDeviceConfig([]byte(data))
			if err != nil {
				h.log.Warn("HAMi device config refused: keeping the last good one", "configmap",
					api.HAMiConfigNamespace+"/"+api.HAMiDeviceConfigMap, "err", err)
				return false
			}
			d = c.RequestDefaults()
		}
	}
	old := h.defaults.Swap(&d)
	return old == nil || *old != d
}

// requestDefaults are the defaults in force.
func (h *HAMi) requestDefaults() api.HAMiRequestDefaults {
	if d := h.defaults.Load(); d != nil {
		return *d
	}
	return api.HAMiRequestDefaults{}
}
