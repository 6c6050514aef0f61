// Package node starts one node of a skiff cluster: everything a machine
// runs to take pods, as the kubelet, the container runtime, the CNI plugins
// and kube-proxy do together on a Kubernetes node. `skiff up`, `skiff
// server` and `skiff agent` call Start; so do the integration tests.
//
// Start assembles, in this order:
//
//  1. the GPU stack (agent.SetUpGPUs): real or simulated GPUs, their CDI
//     spec, the device manager and the built-in NVIDIA-style device plugin;
//  2. the container runtime: containerd (runtime/containerd) or the
//     simulated one (runtime/fake), chosen by Config.Runtime;
//  3. the pod network: CNI (agent/network, one network namespace and IP
//     per pod) or none (pods share the node's network), chosen by
//     Config.Network;
//  4. the node agent (agent.Agent), which registers the Node and runs the
//     pods bound to it; its Node says which runtime and pod network it has
//     (labels skiff.dev/simulated and skiff.dev/pod-network);
//  5. with a CNI pod network, the routes to other nodes' pod CIDRs and the
//     service proxy (agent/proxy), unless Config.NoServiceProxy;
//  6. the local-path provisioner (agent/localpath): the node's volumes of
//     the default StorageClass, under DataDir/storage.
//
// Start holds the data directory's lock (LockFile) while the node runs
// and records what it makes on the machine (RecordFile): Reset, `skiff
// reset`, works from that record to remove the containers and pod network
// a stopped node left (Ctrl-C keeps them for adoption), and refuses while
// the lock is held.
//
// Stop undoes it all in reverse and is safe twice. A Node owns its
// goroutines: Start launches them, Stop cancels and waits. Info says what
// the node ended up with and, in one line, which labs cannot work on it
// and why (Info.Limits): the CLI prints it, the node never pretends.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/pki"
	"skiff.dev/skiff/runtime"
	ctrd "skiff.dev/skiff/runtime/containerd"
)

// Values of Config.Runtime.
const (
	// RuntimeAuto: containerd when its socket answers, else simulated;
	// Info.RuntimeNote says how to get real containers.
	RuntimeAuto = "auto"
	// RuntimeContainerd insists on real containers.
	RuntimeContainerd = "containerd"
	// RuntimeFake is the simulated runtime: pods are Running without
	// processes.
	RuntimeFake = "fake"
)

// Values of Config.Network.
const (
	// NetworkAuto: cni when it can work (root, the CNI bridge plugin and
	// iptables installed, real containers), else none; Info.NetworkNote
	// says which and why.
	NetworkAuto = "auto"
	// NetworkNone: pods share the node's network namespace and report the
	// node's IP; no service proxy. Two pods declaring one containerPort
	// cannot share a node (the scheduler's NodePorts plugin).
	NetworkNone = api.PodNetworkNone
	// NetworkCNI: every pod gets its own network namespace and an IP from
	// the node's pod CIDR through the CNI plugins; the node routes to other
	// nodes' pod CIDRs and runs the service proxy.
	NetworkCNI = api.PodNetworkCNI
)

// Config of a node. Start from DefaultConfig.
type Config struct {
	// Name of the Node object; must be unique in the cluster.
	Name string
	// NodeIP other nodes and the API server reach it at ("" = the address
	// of the default route).
	NodeIP string
	// DataDir holds the node's state: pod volumes, container logs, the
	// device plugin directory, simulated GPUs' CDI spec, CNI state.
	DataDir string
	// Runtime is RuntimeAuto, RuntimeContainerd or RuntimeFake.
	Runtime string
	// ContainerdAddress and ContainerdNamespace of the containerd runtime.
	ContainerdAddress, ContainerdNamespace string
	// RegistryHostsDir: containerd's registry hosts directory (mirrors;
	// runtime/containerd Config.RegistryHostsDir).
	RegistryHostsDir string
	// UseRuntime, when set, is the runtime pods run on instead of one
	// Runtime chooses (tests, embedders): the Node does not close it, and
	// treats it as real (not simulated) unless RuntimeSimulated.
	UseRuntime       runtime.Runtime
	RuntimeSimulated bool
	// GPUs is the --gpus value: auto, auto-sim, nvml, none, sim:NAME,
	// sim:FILE.yaml (agent/gpu.Open); "none" still runs the device
	// manager, for external device plugins. "" runs no GPU stack at all
	// (tests that give the agent their own devices through TuneAgent).
	GPUs string
	// DevicePluginConfig is the ConfigMap of NVIDIA device plugin configs
	// (sharing, MIG strategy): NAME in kube-system, or NAMESPACE/NAME; ""
	// is kube-system/nvidia-device-plugin-config.
	DevicePluginConfig string
	// DevicePlugin is agent.DevicePluginBuiltin ("" too: the agent runs
	// skiff's GPU device plugin) or agent.DevicePluginExternal (it runs
	// none: a device plugin pod, registering through the hostPath
	// /var/lib/kubelet/device-plugins, gives the node its nvidia.com/gpu).
	DevicePlugin string
	// DRADynamicMIG: the gpu.nvidia.com DRA driver publishes MIG-capable
	// GPUs as partitionable devices and creates MIG devices for claims
	// (gpudriver.Config.DynamicMIG; simulated GPUs only).
	DRADynamicMIG bool
	// Network is NetworkAuto, NetworkNone or NetworkCNI.
	Network string
	// Bridge is the CNI bridge of this node's pods (skiff0); nodes sharing
	// a machine need one each.
	Bridge string
	// NoServiceProxy: another node in this process already runs the
	// machine's routes and service proxy (their rules do not depend on the
	// node), so this one does not.
	NoServiceProxy bool
	// NetNS, when set, is the network namespace the node's network lives
	// in instead of this process's; nil on a real node. Tests use it to
	// run several nodes as "hosts" in one process.
	NetNS *NetNS
	// Listen is the address of the agent's logs/exec server, which the
	// API server calls ("" runs none). Credentials are the node's
	// certificates (pki.NodeCredentials: from `skiff agent`'s join, or
	// issued directly by the CA for the nodes inside `skiff up`): the
	// agent serves TLS with the serving certificate and lets in only the
	// API server's client certificate. Required with Listen.
	Listen      string
	Credentials *pki.NodeCredentials
	// DCGMExporterListen is the address of the node's DCGM-exporter-
	// compatible endpoint (agent/gpu/dcgm): ":9400" as dcgm-exporter's,
	// "" none; only a node with GPUs serves one.
	DCGMExporterListen string
	// Metrics for the agent's loop, or nil.
	Metrics client.LoopMetrics
	// Log, or discard.
	Log *slog.Logger
	// Labels are extra labels of the Node (the cluster file's NVLink
	// domain: api/fabric).
	Labels map[string]string
	// TuneAgent, when set, adjusts the agent's config last (tests:
	// shorter heartbeats and backoffs).
	TuneAgent func(*agent.Config)
}

// NetNS is a network namespace a node's network lives in (Config.NetNS):
// the CNI plugins, ip route and iptables commands of the pod network,
// routes and service proxy run behind Wrap, and the agent's server socket
// is opened through Do, so it listens inside the namespace.
type NetNS struct {
	// Wrap is the command prefix that runs a command inside the
	// namespace: {"ip", "netns", "exec", NAME}.
	Wrap []string
	// Do runs f on a thread inside the namespace; sockets f opens stay
	// there.
	Do func(f func() error) error
	// PodPrefix starts the names of the pods' network namespaces ("" =
	// agent/network's skiff-), so that a test can tell its own apart.
	PodPrefix string
}

// DefaultConfig is a node named after the host, its state in dataDir.
func DefaultConfig(dataDir string) Config {
	ac := agent.DefaultConfig()
	cc := ctrd.DefaultConfig()
	return Config{
		Name:    ac.NodeName,
		DataDir: dataDir,
		// Real containers where the machine has containerd, a working
		// simulated node everywhere else (laptops, no root).
		Runtime:             RuntimeAuto,
		ContainerdAddress:   cc.Address,
		ContainerdNamespace: cc.Namespace,
		RegistryHostsDir:    cc.RegistryHostsDir,
		// Real GPUs when the driver loads; none otherwise (a lab machine
		// never pretends to have GPUs unless asked).
		GPUs:    "auto",
		Network: NetworkAuto,
		Bridge:  "skiff0",
	}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("node name is required"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is required"))
	}
	switch c.Runtime {
	case RuntimeAuto, RuntimeContainerd, RuntimeFake:
	default:
		if c.UseRuntime == nil {
			errs = append(errs, fmt.Errorf("runtime %q: want %s, %s or %s", c.Runtime, RuntimeAuto, RuntimeContainerd, RuntimeFake))
		}
	}
	switch c.Network {
	case NetworkAuto, NetworkNone, NetworkCNI:
	default:
		errs = append(errs, fmt.Errorf("network %q: want %s, %s or %s", c.Network, NetworkAuto, NetworkCNI, NetworkNone))
	}
	if c.Listen != "" && c.Credentials == nil {
		errs = append(errs, errors.New("node credentials (certificates of the cluster CA) are required to serve logs and exec"))
	}
	if c.NetNS != nil && (len(c.NetNS.Wrap) == 0 || c.NetNS.Do == nil) {
		errs = append(errs, errors.New("netns: both Wrap and Do are required"))
	}
	if err := agent.ValidateDevicePlugin(c.DevicePlugin); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Info is what a started node has, for the CLI to print.
type Info struct {
	// Name of the Node.
	Name string
	// GPUs is the GPU stack's message ("GPUs: 8x ..."; may span lines).
	GPUs string
	// Simulated: pods run on the simulated runtime, without processes.
	Simulated bool
	// Runtime is "containerd" or "simulated runtime, no processes".
	Runtime string
	// RuntimeNote says why the runtime is simulated and how to get real
	// containers; "" when there is nothing to say.
	RuntimeNote string
	// PodNetwork is NetworkCNI or NetworkNone.
	PodNetwork string
	// NetworkNote says, for NetworkAuto, what was chosen and why.
	NetworkNote string
	// Limits is one line naming the labs that cannot work on this node
	// and why; "" when every lab can.
	Limits string
	// Addr is the agent server's address ("" without one).
	Addr string
}

// Node is a started node. Build it with Start.
type Node struct {
	info  Info
	c     client.Interface
	agent *agent.Agent
	gpus  *agent.GPUs
	rt    runtime.Runtime
	ownRT bool

	cancel   context.CancelFunc
	done     chan struct{}
	err      error // the agent's, set before done closes
	netWait  func()
	provWait func()
	unlock   func() // the data dir's lock

	stopOnce sync.Once
}

// Start assembles the node (see the package doc) against the API through
// c and starts its agent. It returns once the agent is running; WaitReady
// waits for the Node to turn Ready. The node runs until Stop or until ctx
// ends; Done closes when its agent has ended, by itself or not.
func Start(ctx context.Context, cfg Config, c client.Interface) (_ *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("node config: %w", err)
	}
	lg := cfg.Log
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("node %s: create data dir: %w", cfg.Name, err)
	}
	unlock, err := lockDataDir(cfg.DataDir) // record.go: skiff reset refuses while held
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", cfg.Name, err)
	}
	n := &Node{c: c, done: make(chan struct{}), netWait: func() {}, provWait: func() {}, unlock: unlock}
	n.info.Name = cfg.Name
	// Undo what was built when a later step fails.
	defer func() {
		if err != nil {
			n.closeParts()
		}
	}()

	if cfg.GPUs != "" {
		n.gpus, err = agent.SetUpGPUs(ctx, agent.GPUConfig{Spec: cfg.GPUs, DevicePluginConfig: cfg.DevicePluginConfig, DevicePlugin: cfg.DevicePlugin, DynamicMIG: cfg.DRADynamicMIG, NodeName: cfg.Name, DataDir: cfg.DataDir, Client: c, Labels: cfg.Labels, Log: lg})
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", cfg.Name, err)
		}
		n.info.GPUs = n.gpus.Message
	}

	if cfg.UseRuntime != nil {
		n.rt, n.info.Simulated = cfg.UseRuntime, cfg.RuntimeSimulated
	} else {
		var cdiDirs []string
		if n.gpus != nil && n.gpus.CDISpecDir != "" {
			cdiDirs = []string{n.gpus.CDISpecDir}
		}
		n.rt, n.info.Simulated, n.info.RuntimeNote, err = openRuntime(ctx, cfg, cdiDirs, lg)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", cfg.Name, err)
		}
		n.ownRT = true
	}
	n.info.Runtime = "containerd"
	if n.info.Simulated {
		n.info.Runtime = "simulated runtime, no processes"
	}

	pn, mode, why, err := podNetwork(cfg, c, n.info.Simulated)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", cfg.Name, err)
	}
	n.info.PodNetwork, n.info.NetworkNote = mode, why
	if err := writeRecord(cfg.DataDir, recordOf(cfg, n.info.Simulated, mode)); err != nil { // record.go
		return nil, fmt.Errorf("node %s: %w", cfg.Name, err)
	}
	n.info.Limits = limits(n.info.Simulated, mode)

	acfg := agent.DefaultConfig()
	acfg.NodeName, acfg.DataDir, acfg.Simulated = cfg.Name, cfg.DataDir, n.info.Simulated
	if cfg.NodeIP != "" {
		acfg.NodeIP = cfg.NodeIP
	}
	acfg.Log, acfg.Metrics = lg, cfg.Metrics
	acfg.Listen = cfg.Listen
	acfg.DCGMExporterListen = cfg.DCGMExporterListen
	if cfg.Credentials != nil {
		if acfg.TLS, err = cfg.Credentials.AgentServerTLS(); err != nil {
			return nil, fmt.Errorf("node %s: %w", cfg.Name, err)
		}
	}
	acfg.Network = pn
	acfg.Labels = cfg.Labels
	n.gpus.Configure(&acfg)
	if cfg.TuneAgent != nil {
		cfg.TuneAgent(&acfg)
	}
	n.agent, err = agent.New(acfg, c, n.rt)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", cfg.Name, err)
	}
	listen := n.agent.Listen
	if cfg.NetNS != nil {
		listen = func() error { return cfg.NetNS.Do(n.agent.Listen) }
	}
	if err := listen(); err != nil {
		return nil, fmt.Errorf("node %s: %w", cfg.Name, err)
	}
	n.info.Addr = n.agent.Addr()

	runCtx, cancel := context.WithCancel(ctx)
	n.cancel = cancel
	if pn != nil && !cfg.NoServiceProxy {
		n.netWait = startNodeNetwork(runCtx, c, cfg.Name, cfg.NetNS, lg)
	}
	n.provWait = startProvisioner(runCtx, c, cfg, lg) // storage.go
	go func() {
		defer close(n.done)
		n.err = n.agent.Run(runCtx)
		if n.err != nil && runCtx.Err() == nil {
			lg.Error("node agent stopped", "node", cfg.Name, "err", n.err)
		}
	}()
	return n, nil
}

// Info is what the node has (runtime, pod network, GPUs) and what it
// cannot do.
func (n *Node) Info() Info { return n.info }

// GPUs is the node's GPU stack (agent.SetUpGPUs): its Source, device
// manager, plugin, DRA driver and Meter; nil when the node has none.
func (n *Node) GPUs() *agent.GPUs { return n.gpus }

// Name is the Node's name.
func (n *Node) Name() string { return n.info.Name }

// Runtime is the container runtime the node's pods run on.
func (n *Node) Runtime() runtime.Runtime { return n.rt }

// Done closes when the node's agent has ended; Err then says why.
func (n *Node) Done() <-chan struct{} { return n.done }

// Err is the error the agent ended with (nil after Stop, or before Done).
func (n *Node) Err() error {
	select {
	case <-n.done:
		return n.err
	default:
		return nil
	}
}

// WaitReady waits until the Node's Ready condition is True, at most
// timeout; it fails at once if the agent ends first.
func (n *Node) WaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	go func() {
		select {
		case <-n.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := waitNodeReady(ctx, n.c, n.info.Name)
	if err != nil {
		if aerr := n.Err(); aerr != nil {
			return fmt.Errorf("node %s: agent: %w", n.info.Name, aerr)
		}
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("node %s did not turn Ready within %v", n.info.Name, timeout)
		}
	}
	return err
}

// Stop stops the agent, the routes and service proxy (which remove what
// they installed), then closes the runtime (unless it was given in
// Config.UseRuntime) and the GPU stack. Running containers stay: a
// restarted node adopts them. It returns the error the agent ended with.
// Safe twice.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() {
		n.cancel()
		<-n.done
		n.closeParts()
	})
	return n.Err()
}

func (n *Node) closeParts() {
	n.netWait()
	n.provWait()
	if n.rt != nil && n.ownRT {
		n.rt.Close()
	}
	n.gpus.Close() // nil-safe
	n.unlock()
}

// limits is Info.Limits: which labs cannot work, and why, in one line.
func limits(simulated bool, podNetwork string) string {
	switch {
	case simulated:
		return "labs that will not work here: lab 1's page on localhost:30080 and anything that reads a process's output (simulated pods run no processes); scheduling, GPUs and every API step work"
	case podNetwork == NetworkNone:
		return "labs that will not work here: lab 1's page on localhost:30080 and Services (no pod network, no service proxy), and only one pod per node may declare a containerPort (pods share the node's ports: lab 1's other nginx replicas stay Pending)"
	}
	return ""
}
