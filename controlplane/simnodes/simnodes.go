package simnodes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// LabelSimulated marks simulated nodes ("true").
const LabelSimulated = "skiff.dev/simulated"

// LabelGPUCount is the number of GPUs of a node, as NVIDIA's GPU feature discovery labels it.
const LabelGPUCount = "nvidia.com/gpu.count"

// MaxCount is the most nodes one Sim runs: each gets a /24 pod CIDR of
// 100.64.0.0/10 (the shared address space, never routed here), outside
// the cluster CIDR the node IPAM controller hands out for real nodes.
const MaxCount = 1 << 14

// Config chooses how many nodes to simulate and what each looks like.
type Config struct {
	// Count of nodes; 0 runs nothing.
	Count int
	// NamePrefix: nodes are NamePrefix00001, NamePrefix00002, ...
	NamePrefix string
	// Names, when set, name the nodes instead (Count must be len(Names)).
	Names []string
	// Labels, when set, are extra labels of node i (from 0), such as a
	// cluster file's NVLink domain (api/fabric).
	Labels func(i int) map[string]string
	// Offset numbers the nodes' pod CIDRs and host IPs from this index,
	// so that several Sims in one process do not share them.
	Offset int
	// CPU, Memory and Pods: capacity (= allocatable) of each node, as quantities.
	CPU, Memory, Pods string
	// GPUs per node (nvidia.com/gpu), and their product name label.
	GPUs       int
	GPUProduct string
	// RunPods marks pods bound to the nodes Running and completes their
	// deletes. Off, pods stay as the scheduler left them (benchmarks that
	// measure scheduling alone, as Kubernetes' scheduler_perf).
	RunPods bool
	// HeartbeatInterval between renewals of every node's Ready heartbeat.
	HeartbeatInterval time.Duration
	// Writers bounds concurrent API writes (registration, heartbeats).
	Writers int
	// Workers of the pod loop.
	Workers int
	// Log, or discard.
	Log *slog.Logger
}

// DefaultConfig returns a typical 8-GPU training node.
func DefaultConfig() Config {
	return Config{
		NamePrefix: "sim-node-",
		// A DGX A100-like machine: 8 GPUs, ample cpu and memory, so GPUs
		// are what runs out first, as on real GPU clusters.
		CPU:        "32",
		Memory:     "256Gi",
		Pods:       "110", // the kubelet's default max-pods
		GPUs:       8,
		GPUProduct: "NVIDIA-A100-SXM4-40GB",
		RunPods:    true,
		// Two beats fit in the node lifecycle controller's 40 s grace
		// period. Slower than a kubelet's 10 s on purpose: thousands of
		// simulated nodes would otherwise spend most of the store's writes
		// on heartbeats (a real cluster renews cheap Leases instead).
		HeartbeatInterval: 20 * time.Second,
		// Enough concurrent writes for the store's group commit to batch
		// them well; more only queues.
		Writers: 64,
		Workers: 8,
	}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Count < 0 {
		errs = append(errs, fmt.Errorf("count %d: must not be negative", c.Count))
	}
	if c.NamePrefix == "" {
		errs = append(errs, errors.New("name prefix is required"))
	}
	for name, q := range map[string]string{"cpu": c.CPU, "memory": c.Memory, "pods": c.Pods} {
		if _, err := resource.ParseQuantity(q); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", name, q, err))
		}
	}
	if c.Names != nil && len(c.Names) != c.Count {
		errs = append(errs, fmt.Errorf("names: %d for count %d", len(c.Names), c.Count))
	}
	if c.Offset < 0 || c.Offset+c.Count > MaxCount {
		errs = append(errs, fmt.Errorf("offset %d: the nodes must lie in 0..%d", c.Offset, MaxCount))
	}
	if c.Count > MaxCount {
		errs = append(errs, fmt.Errorf("count %d: at most %d (one /24 of 100.64.0.0/10 each)", c.Count, MaxCount))
	}
	if c.GPUs < 0 {
		errs = append(errs, fmt.Errorf("gpus %d: must not be negative", c.GPUs))
	}
	if c.HeartbeatInterval <= 0 || c.Writers <= 0 || c.Workers <= 0 {
		errs = append(errs, errors.New("heartbeat interval, writers and workers must be positive"))
	}
	return errors.Join(errs...)
}

// Sim is a set of simulated nodes. Build it with New, then Start.
type Sim struct {
	cfg    Config
	c      client.Interface
	log    *slog.Logger
	names  []string
	index  map[string]int  // node name → index, for IPs
	hosts  []string        // per node: its IP (hostIP), one string for its pods
	podIPs []atomic.Uint32 // per node: pod IPs handed out
	// last: per node, the Node as the last status write returned it; the
	// next heartbeat starts from it instead of reading the node again (as
	// kubelet starts from its cache), and reads it only when the write
	// conflicts (someone else changed the node since).
	last []atomic.Pointer[api.Node]

	failedMu sync.Mutex
	failed   map[string]bool // nodes Fail stopped

	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// New checks cfg and returns a Sim that writes through c.
func New(cfg Config, c client.Interface) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("simulated nodes: %w", err)
	}
	lg := cfg.Log
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	s := &Sim{cfg: cfg, c: c, log: lg.With("component", "simnodes"), index: make(map[string]int, cfg.Count), podIPs: make([]atomic.Uint32, cfg.Count),
		last: make([]atomic.Pointer[api.Node], cfg.Count)}
	for i := range cfg.Count {
		name := fmt.Sprintf("%s%05d", cfg.NamePrefix, i+1)
		if cfg.Names != nil {
			name = cfg.Names[i]
		}
		s.names = append(s.names, name)
		s.index[name] = i
		j := cfg.Offset + i + 1
		s.hosts = append(s.hosts, fmt.Sprintf("172.%d.%d.%d", 16+(j>>16)&15, (j>>8)&255, j&255))
	}
	return s, nil
}

// Names of the simulated nodes, in order.
func (s *Sim) Names() []string { return append([]string(nil), s.names...) }

// Start registers the nodes (returning once all are Ready), then runs the
// heartbeats and, with RunPods, the pod loop, until ctx ends or Stop.
func (s *Sim) Start(ctx context.Context) error {
	if err := s.register(ctx); err != nil {
		return err
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.heartbeats(ctx)
	}()
	if s.cfg.RunPods {
		s.startPods(ctx)
	}
	return nil
}

// Stop ends every goroutine and waits for them. Safe twice, and before Start.
func (s *Sim) Stop() {
	s.stopOnce.Do(func() {
		if s.cancel != nil {
			s.cancel()
		}
		s.wg.Wait()
	})
}

// node builds the Node object of one simulated node.
func (s *Sim) node(name string) *api.Node {
	n := &api.Node{ObjectMeta: api.ObjectMeta{Name: name, Labels: map[string]string{
		api.LabelHostname: name,
		api.LabelOS:       "linux",
		api.LabelArch:     "amd64",
		LabelSimulated:    "true",
	}}}
	if s.cfg.Labels != nil {
		for k, v := range s.cfg.Labels(s.index[name]) {
			n.Labels[k] = v
		}
	}
	n.Spec.PodCIDR = s.podCIDR(name)
	n.Spec.PodCIDRs = []string{n.Spec.PodCIDR}
	res := api.ResourceList{
		api.ResourceCPU:    resource.MustParse(s.cfg.CPU),
		api.ResourceMemory: resource.MustParse(s.cfg.Memory),
		api.ResourcePods:   resource.MustParse(s.cfg.Pods),
	}
	if s.cfg.GPUs > 0 {
		res[api.ResourceNvidiaGPU] = *resource.NewQuantity(int64(s.cfg.GPUs), resource.DecimalSI)
		n.Labels[api.LabelGPUProduct] = s.cfg.GPUProduct
		n.Labels[LabelGPUCount] = strconv.Itoa(s.cfg.GPUs)
	}
	n.Status.Capacity, n.Status.Allocatable = res, maps.Clone(res)
	n.Status.Addresses = []api.NodeAddress{{Type: "InternalIP", Address: s.hostIP(name)}, {Type: "Hostname", Address: name}}
	n.Status.NodeInfo = api.NodeSystemInfo{KubeletVersion: "skiff-sim", ContainerRuntimeVersion: "sim://1", OperatingSystem: "linux", Architecture: "amd64", OSImage: "simulated"}
	now := api.Now()
	n.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue, Reason: "KubeletReady",
		Message: "simulated node is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}}
	return n
}

// hostIP: 172.16.0.0/12 numbered by node index.
func (s *Sim) hostIP(name string) string { return s.hosts[s.index[name]] }

// podCIDR: the node's /24 of 100.64.0.0/10, by index.
func (s *Sim) podCIDR(name string) string {
	i := s.cfg.Offset + s.index[name]
	return fmt.Sprintf("100.%d.%d.0/24", 64+i>>8, i&255)
}

// nextPodIP hands out the node's pod IPs in turn (.1 to .254, then again).
func (s *Sim) nextPodIP(name string) string {
	i := s.index[name]
	n := (s.podIPs[i].Add(1)-1)%254 + 1
	i += s.cfg.Offset
	return fmt.Sprintf("100.%d.%d.%d", 64+i>>8, i&255, n)
}

// register creates every node (or takes over one left by an earlier run)
// and writes its status.
func (s *Sim) register(ctx context.Context) error {
	return s.forEach(ctx, func(ctx context.Context, name string) error {
		want := s.node(name)
		cur, err := client.Create(ctx, s.c, want)
		if api.IsAlreadyExists(err) {
			cur, err = client.Get[*api.Node](ctx, s.c, "", name)
		}
		if err != nil {
			return fmt.Errorf("register node %s: %w", name, err)
		}
		next := api.Clone(cur)
		next.Status = want.Status
		out, err := client.UpdateStatus(ctx, s.c, next)
		if err != nil {
			return fmt.Errorf("write status of node %s: %w", name, err)
		}
		s.last[s.index[name]].Store(out)
		return nil
	})
}

// heartbeats renews every node's Ready heartbeat each interval.
func (s *Sim) heartbeats(ctx context.Context) {
	t := time.NewTicker(s.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := s.forEach(ctx, func(ctx context.Context, name string) error {
			if s.Failed(name) {
				return nil // a failed node posts nothing
			}
			return s.heartbeat(ctx, name)
		})
		if err != nil && ctx.Err() == nil {
			s.log.Warn("heartbeat", "err", err)
		}
	}
}

// heartbeat renews one node's Ready condition. It writes over the node as
// the last write returned it (the write's resourceVersion precondition
// fails if the node changed since); it reads the node only when it has
// none or on that conflict.
func (s *Sim) heartbeat(ctx context.Context, name string) error {
	last := &s.last[s.index[name]]
	n := last.Load()
	for attempt := 0; ; attempt++ {
		if n == nil {
			var err error
			if n, err = client.Get[*api.Node](ctx, s.c, "", name); err != nil {
				return err
			}
		}
		next := api.Clone(n)
		now := api.Now()
		ready := false
		for i := range next.Status.Conditions {
			if c := &next.Status.Conditions[i]; c.Type == api.NodeReady {
				ready = true
				if c.Status != api.ConditionTrue {
					c.Status, c.LastTransitionTime, c.Reason, c.Message = api.ConditionTrue, now, "KubeletReady", "simulated node is posting ready status"
				}
				c.LastHeartbeatTime = now
			}
		}
		if !ready {
			next.Status.Conditions = s.node(name).Status.Conditions
		}
		out, err := client.UpdateStatus(ctx, s.c, next)
		if err == nil {
			last.Store(out)
			return nil
		}
		last.Store(nil)
		if !api.IsConflict(err) || attempt == 1 {
			return err
		}
		n = nil // changed since our last write: read it and write again
	}
}

// forEach runs f for every node name with at most Writers at once and
// returns the first error (after all have run).
func (s *Sim) forEach(ctx context.Context, f func(ctx context.Context, name string) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  atomic.Int64
	)
	workers := min(s.cfg.Writers, len(s.names))
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(s.names) || ctx.Err() != nil {
					return
				}
				if err := f(ctx, s.names[i]); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
