package scenario

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/api/fabric"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/cluster"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/controlplane/simnodes"
	"skiff.dev/skiff/membership"
)

// simCluster is one configuration's in-process cluster: a control plane
// and the scenario's simulated nodes.
type simCluster struct {
	cp      *controlplane.ControlPlane
	c       client.Interface
	sims    []*simnodes.Sim
	members *memberView
	dir     string
}

// mockProducts are the nvidia.com/gpu.product labels of go-nvml's mock
// servers (the names their devices report, as GPU feature discovery
// writes them).
var mockProducts = map[string]string{
	"dgxa100": "NVIDIA-A100-SXM4-40GB", "dgxa100-80gb": "NVIDIA-A100-SXM4-80GB",
	"dgxh100": "NVIDIA-H100-80GB-HBM3", "dgxh200": "NVIDIA-H200", "dgxb200": "NVIDIA-B200",
}

// simGroups turns the scenario's nodes into simulated node
// configurations (not yet started).
func (f *File) simGroups() ([]simnodes.Config, error) {
	var out []simnodes.Config
	offset := 0
	add := func(cfg simnodes.Config) {
		cfg.Offset = offset
		offset += cfg.Count
		out = append(out, cfg)
	}
	if c := f.Cluster; c != nil {
		fab, err := fabric.Load(f.path(c.File))
		if err != nil {
			return nil, fmt.Errorf("cluster.file: %w", err)
		}
		cfg := simnodes.DefaultConfig()
		prefix := c.NamePrefix
		if prefix == "" {
			prefix = "node"
		}
		cfg.Count = fab.Nodes
		for i := range fab.Nodes {
			cfg.Names = append(cfg.Names, fmt.Sprintf("%s-%d", prefix, i+1))
		}
		cfg.Labels = func(i int) map[string]string { return fab.NodeLabels(i + 1) }
		if cfg.GPUs, cfg.GPUProduct, err = profileGPUs(fab.GPUs); err != nil {
			return nil, fmt.Errorf("cluster.file %s: %w", c.File, err)
		}
		add(cfg)
	}
	for _, g := range f.Nodes {
		cfg := simnodes.DefaultConfig()
		cfg.Count = max(g.Count, 1)
		if g.Count == 0 {
			cfg.Names = []string{g.Name}
		} else {
			for i := range g.Count {
				cfg.Names = append(cfg.Names, fmt.Sprintf("%s-%d", g.Name, i+1))
			}
		}
		cfg.GPUs = g.GPUs
		if g.GPUProduct != "" {
			cfg.GPUProduct = g.GPUProduct
		}
		if g.CPU != "" {
			cfg.CPU = g.CPU
		}
		if g.Memory != "" {
			cfg.Memory = g.Memory
		}
		labels := g.Labels
		cfg.Labels = func(int) map[string]string { return labels }
		add(cfg)
	}
	seen := map[string]bool{}
	for _, cfg := range out {
		for _, n := range cfg.Names {
			if seen[n] {
				return nil, fmt.Errorf("nodes: node %q is named twice", n)
			}
			seen[n] = true
		}
	}
	return out, nil
}

// profileGPUs reads a cluster file's gpus (sim:PROFILE or none) as a
// GPU count and product label.
func profileGPUs(spec string) (int, string, error) {
	if spec == "" || spec == "none" {
		return 0, "", nil
	}
	name, ok := strings.CutPrefix(spec, "sim:")
	if !ok {
		return 0, "", fmt.Errorf("gpus %q: a scenario simulates its nodes: sim:PROFILE or none", spec)
	}
	var p *gpu.Profile
	var err error
	if strings.HasSuffix(name, ".yaml") {
		p, err = gpu.LoadProfile(name)
	} else {
		p, err = gpu.BuiltinProfile(name)
	}
	if err != nil {
		return 0, "", fmt.Errorf("gpus %q: %w", spec, err)
	}
	product := strings.ReplaceAll(p.Model.Name, " ", "-")
	if p.Mock != "" {
		product = mockProducts[p.Mock]
	}
	return p.Count(), product, nil
}

// startCluster starts a control plane under the scheduler configuration
// file sched ("" the defaults) and the simulated nodes; it returns once
// every node is Ready.
func startCluster(ctx context.Context, groups []simnodes.Config, sched string, lg *slog.Logger) (*simCluster, error) {
	dir, err := os.MkdirTemp("", "skiff-scenario-")
	if err != nil {
		return nil, err
	}
	sc := &simCluster{dir: dir, members: newMemberView()}
	cfg := controlplane.DefaultConfig(dir)
	cfg.API.Listen = "127.0.0.1:0"
	cfg.Store.NoSync = true // a scenario's store is thrown away
	cfg.SchedulerConfig = sched
	cfg.Members = sc.members
	// Simulated time: a failed node's pods go at once.
	cfg.PodEvictionTimeout = time.Nanosecond
	cfg.Log = lg
	if sc.cp, err = cluster.StartControlPlane(ctx, cfg); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	sc.c = sc.cp.Local()
	for _, g := range groups {
		g.Log = lg
		sim, err := cluster.StartSimNodes(ctx, g, sc.c)
		if err != nil {
			sc.stop()
			return nil, fmt.Errorf("simulated nodes: %w", err)
		}
		sc.sims = append(sc.sims, sim)
	}
	return sc, nil
}

func (sc *simCluster) stop() {
	for _, s := range sc.sims {
		s.Stop()
	}
	if sc.cp != nil {
		_ = sc.cp.Stop()
	}
	_ = os.RemoveAll(sc.dir)
}

// sim is the Sim that runs node name, or nil.
func (sc *simCluster) sim(name string) *simnodes.Sim {
	for _, s := range sc.sims {
		for _, n := range s.Names() {
			if n == name {
				return s
			}
		}
	}
	return nil
}

// failNode crashes a node: its Sim stops it and the member view reports
// it dead, as gossip reports a crashed machine.
func (sc *simCluster) failNode(name string) error {
	s := sc.sim(name)
	if s == nil {
		return fmt.Errorf("failNode %q: no such node", name)
	}
	if err := s.Fail(name); err != nil {
		return err
	}
	sc.members.fail(name)
	return nil
}

// memberView is the cluster's gossip view as the node lifecycle
// controller reads it (controllers.MemberSource): every failed node's
// member is dead since it failed; the others are not members at all
// (their heartbeats speak for them).
type memberView struct {
	mu      sync.Mutex
	dead    []membership.Member
	changed chan struct{}
}

func newMemberView() *memberView { return &memberView{changed: make(chan struct{}, 1)} }

func (m *memberView) Members() []membership.Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]membership.Member(nil), m.dead...)
}

func (m *memberView) Changed() <-chan struct{} { return m.changed }

func (m *memberView) fail(name string) {
	m.mu.Lock()
	m.dead = append(m.dead, membership.Member{Name: name, State: membership.Dead, Since: time.Now()})
	m.mu.Unlock()
	select {
	case m.changed <- struct{}{}:
	default:
	}
}
