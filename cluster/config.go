package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/agent/gpu/dcgm"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/controlplane/controllers"
	"skiff.dev/skiff/controlplane/kueue"
	"skiff.dev/skiff/controlplane/simnodes"
	"skiff.dev/skiff/membership"
	"skiff.dev/skiff/node"
)

// Environment variables a token may come from instead of a file: a token
// never goes on a command line, where `ps` shows it to every user.
const (
	// AdminTokenEnv holds the admin token (`skiff server --join-server`).
	AdminTokenEnv = "SKIFF_TOKEN"
	// JoinTokenEnv holds the join token (`skiff agent`).
	JoinTokenEnv = "SKIFF_JOIN_TOKEN"
)

// Config is what `skiff up` and `skiff server` run: the flags of both.
// Start from DefaultConfig.
type Config struct {
	// DataDir keeps the cluster's state (store, token, CA, pod volumes).
	DataDir string
	// Listen is the API server's address (host:port).
	Listen string
	// Runtime of the local nodes: node.RuntimeAuto, RuntimeContainerd or
	// RuntimeFake.
	Runtime string
	// ContainerdAddress and ContainerdNamespace of the local nodes.
	ContainerdAddress, ContainerdNamespace string
	// RegistryHostsDir of the local nodes (node.Config.RegistryHostsDir).
	RegistryHostsDir string
	// NodeName of the local node ("" = the hostname: DefaultNodeName);
	// with Nodes > 1 the nodes are NodeName-1..N.
	NodeName string
	// NoAgent runs the control plane only (`skiff server --no-agent`).
	NoAgent bool
	// Gossip is the server's gossip member, which agents join through.
	Gossip Gossip
	// Sim are simulated nodes in this process (Sim.Count 0: none).
	Sim simnodes.Config
	// GPUs of the local nodes (node.Config.GPUs), or a comma list with
	// one value per node.
	GPUs string
	// DevicePlugin of the local nodes (node.Config.DevicePlugin:
	// agent.DevicePluginBuiltin or agent.DevicePluginExternal), or a comma
	// list with one value per node.
	DevicePlugin string
	// DRADynamicMIG: the local nodes' node.Config.DRADynamicMIG.
	DRADynamicMIG bool
	// Network is the local nodes' pod network (node.NetworkAuto, ...).
	Network string
	// Nodes is the number of local nodes in this process.
	Nodes int
	// ClusterFile (api/fabric) gives the Nodes nodes their GPUs and
	// NVLink domains; "" none.
	ClusterFile string
	// SchedulerConfig is a scheduler configuration file; "" the defaults.
	SchedulerConfig string
	// Etcd chooses the store: bbolt unless one of ClusterInit,
	// JoinServer and Endpoints is set.
	Etcd controlplane.EtcdConfig
	// AdminToken ("" = the data dir's, created on first start).
	AdminToken string
	// PodSecurityDefault is the Pod Security level of namespaces without
	// pod-security.kubernetes.io labels ("" = the API server's default).
	PodSecurityDefault string
	// Kueue configures the queue manager (nil = its defaults).
	Kueue *kueue.Config
	// DCGMExporterListen is the local nodes' DCGM exporter address
	// (node.Config.DCGMExporterListen); with several nodes, node i
	// listens on the port + i - 1.
	DCGMExporterListen string
	// MetricsAdapterConfig is the custom metrics APIs' rule file
	// (controlplane.Config.MetricsAdapterConfig); "" for the default.
	MetricsAdapterConfig string
	// HPA are the HorizontalPodAutoscaler controller's settings
	// (kube-controller-manager's --horizontal-pod-autoscaler-* flags);
	// nil: controllers.DefaultHPAConfig().
	HPA *controllers.HPAConfig
	// NoKubeconfigMerge: do not merge the skiff context into
	// ~/.kube/config.
	NoKubeconfigMerge bool
	// Log, or discard.
	Log *slog.Logger
	// Out gets what a user reads: where the API is, how to join, what
	// each node has, what to try (default: discard).
	Out io.Writer
}

// Gossip configures the server's gossip member.
type Gossip struct {
	// Port (UDP and TCP) agents join through.
	Port int
	// Advertise is the address agents reach this machine at ("" = the
	// address of the default route).
	Advertise string
	// Off: no gossip; no agent can join, nodes are watched through
	// heartbeats only.
	Off bool
}

// DefaultConfig returns `skiff up`'s defaults (DataDir is left to the
// caller: the CLI's is ~/.skiff/data).
func DefaultConfig() Config {
	nc := node.DefaultConfig("")
	sim := simnodes.DefaultConfig()
	sim.Count = 0
	return Config{
		Listen:              "127.0.0.1:7443",
		Runtime:             nc.Runtime,
		ContainerdAddress:   nc.ContainerdAddress,
		ContainerdNamespace: nc.ContainerdNamespace,
		RegistryHostsDir:    nc.RegistryHostsDir,
		Gossip:              Gossip{Port: membership.DefaultPort},
		Sim:                 sim,
		// `up` is the one-machine teaching cluster: without a GPU it
		// simulates a DGX A100 so every lab works. `server` nodes are
		// real machines of a lab: they never pretend to have GPUs unless
		// asked (the CLI's default there is "auto").
		GPUs:         "auto-sim",
		DevicePlugin: agent.DevicePluginBuiltin,
		Network:      nc.Network,
		Nodes:        1,
		Etcd:         *controlplane.DefaultEtcdConfig(),
		HPA:          ptrTo(controllers.DefaultHPAConfig()),
		// dcgm-exporter's port, on every interface as its DaemonSet's.
		DCGMExporterListen: fmt.Sprintf(":%d", dcgm.DefaultPort),
	}
}

// DefaultNodeName is the name of the local node when Config.NodeName is
// empty: the hostname.
func DefaultNodeName() string { return node.DefaultConfig("").Name }

// baseName is NodeName or the hostname.
func (c *Config) baseName() string {
	if c.NodeName != "" {
		return c.NodeName
	}
	return DefaultNodeName()
}

// Validate reports every bad value at once, before anything starts. (GPU
// values are checked when their node starts: a profile file may only fail
// when read.)
func (c *Config) Validate() error {
	var errs []error
	if h := c.HPA; h != nil {
		if h.SyncPeriod <= 0 {
			errs = append(errs, fmt.Errorf("--horizontal-pod-autoscaler-sync-period %v: want a positive duration", h.SyncPeriod))
		}
		if h.DownscaleStabilization < 0 {
			errs = append(errs, fmt.Errorf("--horizontal-pod-autoscaler-downscale-stabilization %v: want a duration >= 0", h.DownscaleStabilization))
		}
		if h.Tolerance <= 0 || h.Tolerance >= 1 {
			errs = append(errs, fmt.Errorf("--horizontal-pod-autoscaler-tolerance %v: want a fraction between 0 and 1", h.Tolerance))
		}
	}
	switch c.Runtime {
	case node.RuntimeAuto, node.RuntimeContainerd, node.RuntimeFake:
	default:
		errs = append(errs, fmt.Errorf("--runtime %q: want auto, containerd or fake", c.Runtime))
	}
	switch c.Network {
	case "", node.NetworkAuto, node.NetworkNone, node.NetworkCNI:
	default:
		errs = append(errs, fmt.Errorf("--network %q: want %s, %s or %s", c.Network, node.NetworkAuto, node.NetworkCNI, node.NetworkNone))
	}
	if c.Nodes < 1 {
		errs = append(errs, fmt.Errorf("--nodes %d: want at least 1", c.Nodes))
	} else {
		if _, err := nodeGPUSpecs(c.GPUs, c.Nodes); err != nil {
			errs = append(errs, err)
		}
		if _, err := nodeDevicePlugins(c.DevicePlugin, c.Nodes); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// etcdConfig is the store choice: nil for bbolt.
func (c *Config) etcdConfig() *controlplane.EtcdConfig {
	e := c.Etcd
	if !e.ClusterInit && e.JoinServer == "" && len(e.Endpoints) == 0 {
		return nil
	}
	e.PeerAdvertise = advertiseURL(e.PeerListen, c.Gossip.Advertise)
	return &e
}

func (c *Config) out() io.Writer {
	if c.Out == nil {
		return io.Discard
	}
	return c.Out
}

func (c *Config) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

func ptrTo[T any](v T) *T { return &v }
