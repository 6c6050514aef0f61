package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/cluster"
)

// clusterFlags are the flags `up` and `server` share: they fill a
// cluster.Config, which package cluster runs.
type clusterFlags struct {
	cfg       cluster.Config
	etcdURLs  string          // --etcd-endpoints, comma list
	tokenFile string          // --token-file, else $SKIFF_TOKEN
	pprof     pprofFlags      // --pprof-listen (cli/pprof.go)
	memLimit  memoryLimitFlag // --memory-limit (cli/memlimit.go)
	podSec    podSecurityFlag // --pod-security-default (cli/podsecurity.go)
	kueue     kueueFlags      // --kueue-*: waitForPodsReady of the queue manager
	haFlags   *pflag.FlagSet  // `server`'s, to tell which etcd flags were given
}

func (f *clusterFlags) registerHA(cmd *cobra.Command) {
	fl := cmd.Flags()
	f.haFlags = fl
	e := &f.cfg.Etcd
	fl.BoolVar(&e.ClusterInit, "cluster-init", false, "store the cluster in an embedded etcd and start its first member (more servers join with --join-server); the default store is bbolt, one server")
	fl.StringVar(&e.JoinServer, "join-server", "", "URL of the API server of a server started with --cluster-init (or already joined): this server adds itself as an etcd member through it and serves the same cluster (needs the admin token: --token-file or $"+cluster.AdminTokenEnv+", and --discovery-token-ca-cert-hash)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the admin token (with --join-server: a copy of the first server's DATA-DIR/token; default $"+cluster.AdminTokenEnv+", else the data dir's, created on first start); never a token on the command line, where ps shows it")
	fl.StringVar(&e.CACertHash, "discovery-token-ca-cert-hash", "", "with --join-server: the cluster CA's pin, sha256:HEX, as the first server printed it; the join is refused when the server's CA does not match")
	fl.BoolVar(&e.UnsafeSkipCAVerification, "discovery-token-unsafe-skip-ca-verification", false, "with --join-server: trust whatever CA the server presents (no pin); only on a network you trust")
	fl.StringVar(&f.etcdURLs, "etcd-endpoints", "", "comma list of the client URLs of an external etcd to store the cluster in (no embedded member)")
	fl.StringVar(&e.PeerListen, "etcd-peer-listen", e.PeerListen, "URL the embedded etcd member listens on for its peers (https: TLS with the cluster CA, only servers' certificates accepted)")
	fl.StringVar(&e.ClientListen, "etcd-client-listen", e.ClientListen, "URL the embedded etcd member serves clients on (this server's own API server; loopback is enough)")
	fl.DurationVar(&e.LeaderLeaseTTL, "leader-lease-ttl", e.LeaderLeaseTTL, "with etcd: how long a dead leader holds the leadership of the scheduler and controllers before another server takes over")
}

// validateHA refuses the etcd-only flags without an etcd store: with
// bbolt they would be accepted and mean nothing.
func (f *clusterFlags) validateHA() error {
	e := f.cfg.Etcd
	if f.haFlags == nil || e.ClusterInit || e.JoinServer != "" || f.etcdURLs != "" {
		return nil
	}
	var errs []error
	for _, name := range []string{"etcd-peer-listen", "etcd-client-listen", "leader-lease-ttl"} {
		if f.haFlags.Changed(name) {
			errs = append(errs, fmt.Errorf("--%s applies only to an etcd store (--cluster-init, --join-server or --etcd-endpoints); this server stores the cluster in bbolt", name))
		}
	}
	return errors.Join(errs...)
}

func (f *clusterFlags) register(cmd *cobra.Command, server bool) {
	home, _ := os.UserHomeDir()
	f.cfg = cluster.DefaultConfig()
	c := &f.cfg
	fl := cmd.Flags()
	fl.StringVar(&c.DataDir, "data-dir", filepath.Join(home, ".skiff", "data"), "where the cluster keeps its state (bbolt store, token, pod volumes)")
	fl.StringVar(&c.Listen, "listen", c.Listen, "API server address (host:port); 0.0.0.0:7443 to let other machines in")
	fl.StringVar(&c.Runtime, "runtime", c.Runtime, "container runtime of the local node: auto (containerd when reachable, else simulated), containerd, or fake (simulated, no processes)")
	fl.StringVar(&c.ContainerdAddress, "containerd-address", c.ContainerdAddress, "containerd socket")
	fl.StringVar(&c.NodeName, "node-name", "", "name of the local node (default: the hostname)")
	if server {
		fl.BoolVar(&c.NoAgent, "no-agent", false, "run the control plane only, without a local node")
		f.registerHA(cmd)
	}
	fl.IntVar(&c.Gossip.Port, "gossip-port", c.Gossip.Port, "gossip port (UDP and TCP) agents join through")
	fl.StringVar(&c.Gossip.Advertise, "advertise-address", "", "address agents reach this machine at (default: the address of the default route)")
	fl.BoolVar(&c.Gossip.Off, "no-gossip", false, "do not start gossip: no agent can join, nodes are watched through heartbeats only")
	fl.IntVar(&c.Sim.Count, "sim-nodes", 0, "also run N simulated nodes in this process (Ready, capacity below, pods marked Running without containers)")
	fl.StringVar(&c.Sim.CPU, "sim-node-cpu", c.Sim.CPU, "cpu capacity of each simulated node")
	fl.StringVar(&c.Sim.Memory, "sim-node-memory", c.Sim.Memory, "memory capacity of each simulated node")
	fl.IntVar(&c.Sim.GPUs, "sim-node-gpus", c.Sim.GPUs, "nvidia.com/gpu capacity of each simulated node")
	fl.StringVar(&c.Sim.GPUProduct, "sim-gpu-product", c.Sim.GPUProduct, "nvidia.com/gpu.product label of the simulated nodes")
	f.podSec.register(cmd)
	f.kueue.register(cmd)
	f.pprof.register(cmd)
	f.memLimit.register(cmd)
	fl.StringVar(&c.Network, "network", c.Network, networkFlagHelp)
	// `up` is the one-machine teaching cluster: without a GPU it simulates
	// a DGX A100 so every lab works. `server` nodes are real machines of a
	// lab: they never pretend to have GPUs unless asked.
	defGPUs := "auto-sim"
	if server {
		defGPUs = "auto"
	}
	fl.StringVar(&c.GPUs, "gpus", defGPUs, "GPUs of the local node: auto (real when the NVIDIA driver loads, else none), auto-sim (real when the driver loads, else a simulated DGX A100), nvml, none, sim:dgxa100|dgxh100|dgxh200|dgxb200|rtx4090x4, or sim:FILE.yaml; with --nodes, a comma list with one value per node (one value applies to all)")
	fl.StringVar(&c.DevicePlugin, "device-plugin", c.DevicePlugin, "GPU device plugin of this node: builtin (the agent runs skiff's) or external (none: a device plugin pod, e.g. examples/workloads/skiff-device-plugin-daemonset.yaml, registers through the hostPath /var/lib/kubelet/device-plugins and gives the node its nvidia.com/gpu); with --nodes, a comma list with one value per node")
	fl.BoolVar(&c.DRADynamicMIG, "dra-dynamic-mig", false, "the gpu.nvidia.com DRA driver publishes each MIG-capable GPU as partitionable devices (a counter set, one device per MIG placement, for DeviceClass mig.nvidia.com) and creates the MIG device when a claim is prepared, as NVIDIA's driver with featureGates.DynamicMIG=true; simulated GPUs only")
	fl.StringVar(&c.ClusterFile, "cluster", "", "cluster file (skiff.dev/v1alpha1 Cluster) of the --nodes nodes: their GPUs and NVLink domains, as node labels (nvidia.com/gpu.clique, skiff.dev/nvlink-domain); see examples/homework/task3/cluster-4x-a100.yaml")
	fl.StringVar(&c.SchedulerConfig, "scheduler-config", "", "scheduler configuration file: a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1, as kube-scheduler --config: profiles, plugins, pluginConfig); changes apply while running; see examples/homework/task3/")
	fl.StringVar(&c.DCGMExporterListen, "dcgm-exporter-listen", c.DCGMExporterListen, "address of the GPU nodes' DCGM-exporter-compatible metrics (Prometheus text at /metrics, dcgm-exporter's series and labels); with --nodes N node i takes the port + i - 1; \"\" for none")
	fl.StringVar(&c.MetricsAdapterConfig, "metrics-adapter-config", "", "rule file of the custom and external metrics APIs, in prometheus-adapter's --config format (rules, externalRules; seriesQuery one series, metricsQuery sum|avg|max|min(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)); \"\" for the built-in dcgm-exporter rules")
	fl.DurationVar(&c.HPA.SyncPeriod, "horizontal-pod-autoscaler-sync-period", c.HPA.SyncPeriod, "how often each HorizontalPodAutoscaler is synced (kube-controller-manager's flag)")
	fl.DurationVar(&c.HPA.DownscaleStabilization, "horizontal-pod-autoscaler-downscale-stabilization", c.HPA.DownscaleStabilization, "an autoscaler scales down to the highest recommendation of this window, unless its behavior sets its own (kube-controller-manager's flag)")
	fl.Float64Var(&c.HPA.Tolerance, "horizontal-pod-autoscaler-tolerance", c.HPA.Tolerance, "an autoscaler does not scale while metric/target is within 1±this (kube-controller-manager's flag)")
	fl.IntVar(&c.Nodes, "nodes", 1, "run N nodes in this process, named NAME-1..NAME-N (NAME: --node-name or the hostname), each with its own data dir and GPUs; they share containerd")
	fl.StringVar(&c.ContainerdNamespace, "containerd-namespace", c.ContainerdNamespace, "containerd namespace of skiff's images and containers")
	fl.StringVar(&c.RegistryHostsDir, "registry-hosts-dir", c.RegistryHostsDir, "containerd's registry hosts directory (as its CRI plugin's registry config_path): DIR/HOST/hosts.toml names mirrors of HOST, e.g. a lab room's local registry for registry.k8s.io")
	fl.BoolVar(&c.NoKubeconfigMerge, "no-kubeconfig-merge", false, "do not merge the skiff context into ~/.kube/config (the kubeconfig is still written to ~/.skiff/kubeconfig and DATA-DIR/kubeconfig)")
}

// validate reports every bad flag value at once, before anything starts.
func (f *clusterFlags) validate() error {
	return errors.Join(f.cfg.Validate(), f.podSec.validate(), f.kueue.validate(), f.pprof.validate(), f.memLimit.validate(), f.validateHA())
}

// config is the cluster.Config of the flags, with the admin token read
// (--token-file or $SKIFF_TOKEN), the profiles served (--pprof-listen) and
// the runtime's soft memory limit set (--memory-limit).
func (f *clusterFlags) config(ctx context.Context, r *Root) (cluster.Config, error) {
	if err := f.validate(); err != nil {
		return cluster.Config{}, err // bad flags change nothing
	}
	if err := f.pprof.start(ctx, r.Logger()); err != nil {
		return cluster.Config{}, err
	}
	if err := f.memLimit.apply(r.Logger()); err != nil {
		return cluster.Config{}, err
	}
	c := f.cfg
	c.PodSecurityDefault = f.podSec.level
	c.Kueue = f.kueue.config()
	c.Log, c.Out = r.Logger(), r.Stdout
	if f.etcdURLs != "" {
		c.Etcd.Endpoints = strings.Split(f.etcdURLs, ",")
	}
	tok, err := readTokenFlag(f.tokenFile, cluster.AdminTokenEnv)
	if err != nil {
		return cluster.Config{}, err
	}
	c.AdminToken = tok
	return c, nil
}

// upCmd runs a whole cluster in one process: control plane plus a node.
type upCmd struct {
	r *Root
	clusterFlags
}

func newUpCmd(r *Root) *cobra.Command {
	u := &upCmd{r: r}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a one-machine cluster: control plane and a local node, in this process",
		Long: `Run a whole cluster on this machine: API server, store, controllers, scheduler
and one node agent. Pods run on containerd when it is reachable, otherwise on a
simulated runtime (no processes) and the node says so.

The API is served over HTTPS with a cluster CA kept in DATA-DIR/pki. A
kubeconfig (server, CA, admin token) is written to $HOME/.skiff/kubeconfig and
DATA-DIR/kubeconfig, and merged as context "skiff" into ~/.kube/config (unless
--no-kubeconfig-merge), so skiff and kubectl in other terminals work at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return u.Run(cmd.Context()) },
	}
	u.register(cmd, false)
	return cmd
}

// Run starts the cluster and blocks until ctx ends (Ctrl-C).
func (u *upCmd) Run(ctx context.Context) error {
	cfg, err := u.config(ctx, u.r)
	if err != nil {
		return err
	}
	return cluster.Up(ctx, cfg)
}

// serverCmd runs the control plane (and, unless --no-agent, a local node).
type serverCmd struct {
	r *Root
	clusterFlags
}

func newServerCmd(r *Root) *cobra.Command {
	s := &serverCmd{r: r}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the control plane (API server, store, controllers, scheduler) and a local node unless --no-agent",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return s.Run(cmd.Context()) },
	}
	s.register(cmd, true)
	return cmd
}

// Run starts the server and blocks until ctx ends.
func (s *serverCmd) Run(ctx context.Context) error {
	cfg, err := s.config(ctx, s.r)
	if err != nil {
		return err
	}
	return cluster.Server(ctx, cfg)
}

// versionCmd prints the client's and, when reachable, the server's version.
type versionCmd struct{ r *Root }

func newVersionCmd(r *Root) *cobra.Command {
	v := &versionCmd{r: r}
	return &cobra.Command{
		Use:   "version",
		Short: "Print the skiff version (and the server's, when one is configured, and which server leads when there are several)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return v.Run(cmd.Context()) },
	}
}

// Run prints the versions.
func (v *versionCmd) Run(ctx context.Context) error {
	fmt.Fprintf(v.r.Stdout, "Client Version: %s\n", api.Version)
	cfg, err := v.r.ClientConfig()
	if err != nil {
		return nil
	}
	c, err := client.New(cfg)
	if err != nil {
		return nil
	}
	resp, err := c.Do(ctx, "GET", "/version", nil)
	if err != nil {
		fmt.Fprintf(v.r.Stdout, "Server Version: unreachable (%v)\n", err)
		return nil
	}
	defer resp.Body.Close()
	var body struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := decodeJSON(resp.Body, &body); err == nil {
		fmt.Fprintf(v.r.Stdout, "Server Version: %s\n", body.GitVersion)
	}
	printLeader(ctx, v.r.Stdout, c) // with several servers (leader.go)
	return nil
}

func decodeJSON(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }
