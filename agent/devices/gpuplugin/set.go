package gpuplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"skiff.dev/skiff/agent/gpu"
)

// SetConfig of a Set.
type SetConfig struct {
	// Source of the GPUs; required.
	Source gpu.Source
	// Dir is the plugin directory (kubelet.sock's).
	Dir string
	// MIG returns the MIG devices of each MIG-enabled GPU, by index
	// (agent/gpu MIGSource); nil: no MIG.
	MIG func(ctx context.Context) (map[int][]gpu.MIGDevice, error)
	// OnLayout is called with a new layout before its plugins register:
	// the simulated driver's CDI spec is rewritten there, so the devices
	// exist before they are advertised. An error stops the change.
	OnLayout func(layout []gpu.SubDevice) error
	// HAMiDecision is what the scheduler decided for a container under
	// HAMi (Config.HAMiDecision).
	HAMiDecision  HAMiDecision
	HAMiAllocated HAMiAllocated
	// Log, or discard.
	Log *slog.Logger
}

// Set is the node's NVIDIA device plugin under a config: one plugin
// server per resource the config's layout has (nvidia.com/gpu,
// nvidia.com/gpu.shared, nvidia.com/mig-1g.5gb, ...), each on its own
// socket and registered with the device manager, as NVIDIA's plugin runs
// one server per resource. Apply changes the config without restarting
// the node: the plugins whose devices changed stop and register again with
// their new devices (the manager's capacity follows), those of resources
// gone stop. Safe for concurrent use.
type Set struct {
	cfg SetConfig
	log *slog.Logger

	mu      sync.Mutex
	applied *PluginConfig
	layout  []gpu.SubDevice
	running map[string]*running // by resource
	changed chan struct{}
	stopped bool
}

type running struct {
	plugin  *Plugin
	devices []gpu.SubDevice
	cancel  context.CancelFunc
	done    chan struct{}
}

// NewSet builds a Set; Apply starts its plugins.
func NewSet(cfg SetConfig) (*Set, error) {
	if cfg.Source == nil || cfg.Dir == "" {
		return nil, errors.New("gpu device plugins: a GPU source and the plugin directory are required")
	}
	lg := cfg.Log
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &Set{cfg: cfg, log: lg.With("component", "gpu-device-plugin"), running: map[string]*running{}, changed: make(chan struct{})}, nil
}

// Apply makes pc the config in force: it computes the layout (an error,
// such as a MIG geometry the strategy cannot serve, changes nothing),
// calls OnLayout, and restarts the plugins whose devices changed.
func (s *Set) Apply(ctx context.Context, pc *PluginConfig) error {
	if pc == nil {
		pc = DefaultConfig()
	}
	devs, err := s.cfg.Source.Devices(ctx)
	if err != nil {
		return fmt.Errorf("list GPUs: %w", err)
	}
	var migs map[int][]gpu.MIGDevice
	if s.cfg.MIG != nil {
		if migs, err = s.cfg.MIG(ctx); err != nil {
			return fmt.Errorf("list MIG devices: %w", err)
		}
	}
	layout, err := Layout(pc, devs, migs)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("gpu device plugins: stopped")
	}
	if s.cfg.OnLayout != nil {
		if err := s.cfg.OnLayout(layout); err != nil {
			return err
		}
	}
	byRes := map[string][]gpu.SubDevice{}
	for _, sd := range layout {
		byRes[sd.Resource] = append(byRes[sd.Resource], sd)
	}
	for res, r := range s.running {
		if !slices.Equal(r.devices, byRes[res]) || s.optionsChanged(pc) {
			r.stop()
			delete(s.running, res)
		}
	}
	var errs []error
	for _, res := range Resources(layout) {
		if _, ok := s.running[res]; ok {
			continue
		}
		if err := s.startLocked(pc, res, byRes[res]); err != nil {
			errs = append(errs, err)
		}
	}
	s.applied, s.layout = pc, layout
	close(s.changed)
	s.changed = make(chan struct{})
	s.log.Info("device plugin config applied", "sharing", pc.Sharing(), "migStrategy", pc.MigStrategy, "resources", Resources(layout), "devices", len(layout))
	return errors.Join(errs...)
}

// optionsChanged: the allocation options differ from the applied ones.
func (s *Set) optionsChanged(pc *PluginConfig) bool {
	a := s.applied
	if a == nil {
		return true
	}
	fa, fb := false, false
	if r := a.Replicated(); r != nil {
		fa = r.FailRequestsGreaterThanOne
	}
	if r := pc.Replicated(); r != nil {
		fb = r.FailRequestsGreaterThanOne
	}
	return fa != fb || a.AllocationPolicy != pc.AllocationPolicy || a.HAMi != pc.HAMi || a.HAMiSettings != pc.HAMiSettings
}

func (s *Set) startLocked(pc *PluginConfig, res string, devs []gpu.SubDevice) error {
	fail := false
	if r := pc.Replicated(); r != nil {
		fail = r.FailRequestsGreaterThanOne
	}
	p, err := New(Config{Source: s.cfg.Source, Dir: s.cfg.Dir, Resource: res, Devices: devs,
		FailRequestsGreaterThanOne: fail, AllocationPolicy: pc.AllocationPolicy, Log: s.log,
		HAMi: pc.HAMi, HAMiSettings: pc.HAMiSettings, HAMiDecision: s.cfg.HAMiDecision, HAMiAllocated: s.cfg.HAMiAllocated})
	if err != nil {
		return err
	}
	if err := p.Serve(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{plugin: p, devices: devs, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := p.Run(ctx); err != nil {
			s.log.Error("GPU device plugin", "resource", res, "err", err)
		}
	}()
	s.running[res] = r
	return nil
}

func (r *running) stop() {
	r.cancel()
	r.plugin.Stop()
	<-r.done
}

// Layout is the layout in force (nil before the first Apply).
func (s *Set) Layout() []gpu.SubDevice {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.layout)
}

// Applied is the config in force (nil before the first Apply).
func (s *Set) Applied() *PluginConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

// Changed returns a channel closed at the next Apply.
func (s *Set) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Stop stops every plugin. Safe to call twice.
func (s *Set) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for res, r := range s.running {
		r.stop()
		delete(s.running, res)
	}
}
