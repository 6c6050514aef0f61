package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/dashboard"
	"skiff.dev/skiff/node"
	ctrd "skiff.dev/skiff/runtime/containerd"
)

// Version of skiff, printed by `skiff version` and /version.
const Version = "v0.1.0"

// clusterFlags are the flags `up` and `server` share.
type clusterFlags struct {
	dataDir    string
	listen     string
	runtime    string
	containerd string
	nodeName   string
	noAgent    bool
	gossip     gossipFlags
	sim        simFlags
	gpus       string // --gpus: auto, nvml, none, sim:NAME, sim:FILE.yaml
	network    string // --network: auto, none or cni (cli/network.go)
	nodes      int    // --nodes: agents in this process (cli/up_nodes.go)
	fabric     string // --cluster: the cluster file (api/fabric) of the --nodes nodes
	schedCfg   string // --scheduler-config: a scheduler configuration file
	ctrdNS     string // --containerd-namespace
	ha         haFlags
	pprof      pprofFlags // --pprof-listen (cli/pprof.go)
	// --pod-security-default (cli/podsecurity.go)
	podSec podSecurityFlag
	kueue  kueueFlags // --kueue-*: waitForPodsReady of the queue manager
	// --no-kubeconfig-merge: do not merge the skiff context into ~/.kube/config
	noMerge bool
}

// haFlags choose the store of `skiff server`: bbolt (none set), embedded
// etcd (--cluster-init, --join-server) or an external etcd
// (--etcd-endpoints).
type haFlags struct {
	clusterInit   bool
	joinServer    string
	tokenFile     string // --token-file, else $SKIFF_TOKEN
	caHash        string // --discovery-token-ca-cert-hash
	unsafeSkipCA  bool   // --discovery-token-unsafe-skip-ca-verification
	etcdEndpoints string
	peerListen    string
	clientListen  string
	leaseTTL      time.Duration

	flags *pflag.FlagSet // to tell which flags were given
}

func (h *haFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	h.flags = fl
	def := controlplane.DefaultEtcdConfig()
	fl.BoolVar(&h.clusterInit, "cluster-init", false, "store the cluster in an embedded etcd and start its first member (more servers join with --join-server); the default store is bbolt, one server")
	fl.StringVar(&h.joinServer, "join-server", "", "URL of the API server of a server started with --cluster-init (or already joined): this server adds itself as an etcd member through it and serves the same cluster (needs the admin token: --token-file or $"+adminTokenEnv+", and --discovery-token-ca-cert-hash)")
	fl.StringVar(&h.tokenFile, "token-file", "", "file holding the admin token (with --join-server: a copy of the first server's DATA-DIR/token; default $"+adminTokenEnv+", else the data dir's, created on first start); never a token on the command line, where ps shows it")
	fl.StringVar(&h.caHash, "discovery-token-ca-cert-hash", "", "with --join-server: the cluster CA's pin, sha256:HEX, as the first server printed it; the join is refused when the server's CA does not match")
	fl.BoolVar(&h.unsafeSkipCA, "discovery-token-unsafe-skip-ca-verification", false, "with --join-server: trust whatever CA the server presents (no pin); only on a network you trust")
	fl.StringVar(&h.etcdEndpoints, "etcd-endpoints", "", "comma list of the client URLs of an external etcd to store the cluster in (no embedded member)")
	fl.StringVar(&h.peerListen, "etcd-peer-listen", def.PeerListen, "URL the embedded etcd member listens on for its peers (plain http: no cluster CA yet; keep it on a trusted network)")
	fl.StringVar(&h.clientListen, "etcd-client-listen", def.ClientListen, "URL the embedded etcd member serves clients on (this server's own API server; loopback is enough)")
	fl.DurationVar(&h.leaseTTL, "leader-lease-ttl", def.LeaderLeaseTTL, "with etcd: how long a dead leader holds the leadership of the scheduler and controllers before another server takes over")
}

// validate refuses the etcd-only flags without an etcd store: with bbolt
// they would be accepted and mean nothing.
func (h *haFlags) validate() error {
	if h.flags == nil || h.clusterInit || h.joinServer != "" || h.etcdEndpoints != "" {
		return nil
	}
	var errs []error
	for _, name := range []string{"etcd-peer-listen", "etcd-client-listen", "leader-lease-ttl"} {
		if h.flags.Changed(name) {
			errs = append(errs, fmt.Errorf("--%s applies only to an etcd store (--cluster-init, --join-server or --etcd-endpoints); this server stores the cluster in bbolt", name))
		}
	}
	return errors.Join(errs...)
}

// etcdConfig is the store choice of the flags: nil for bbolt.
func (h *haFlags) etcdConfig(advertise string) *controlplane.EtcdConfig {
	if !h.clusterInit && h.joinServer == "" && h.etcdEndpoints == "" {
		return nil
	}
	ec := controlplane.DefaultEtcdConfig()
	ec.ClusterInit, ec.JoinServer = h.clusterInit, h.joinServer
	ec.CACertHash, ec.UnsafeSkipCAVerification = h.caHash, h.unsafeSkipCA
	if h.etcdEndpoints != "" {
		ec.Endpoints = strings.Split(h.etcdEndpoints, ",")
	}
	ec.PeerListen, ec.ClientListen, ec.LeaderLeaseTTL = h.peerListen, h.clientListen, h.leaseTTL
	ec.PeerAdvertise = advertiseURL(h.peerListen, advertise)
	return ec
}

func (f *clusterFlags) register(cmd *cobra.Command, withNoAgent bool) {
	home, _ := os.UserHomeDir()
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", filepath.Join(home, ".skiff", "data"), "where the cluster keeps its state (bbolt store, token, pod volumes)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:7443", "API server address (host:port); 0.0.0.0:7443 to let other machines in")
	fl.StringVar(&f.runtime, "runtime", "auto", "container runtime of the local node: auto (containerd when reachable, else simulated), containerd, or fake (simulated, no processes)")
	fl.StringVar(&f.containerd, "containerd-address", ctrd.DefaultConfig().Address, "containerd socket")
	fl.StringVar(&f.nodeName, "node-name", "", "name of the local node (default: the hostname)")
	if withNoAgent {
		fl.BoolVar(&f.noAgent, "no-agent", false, "run the control plane only, without a local node")
		f.ha.register(cmd)
	}
	f.gossip.register(cmd)
	f.sim.register(cmd)
	f.podSec.register(cmd)
	f.kueue.register(cmd)
	f.pprof.register(cmd)
	fl.StringVar(&f.network, "network", networkAuto, networkFlagHelp)
	// `up` is the one-machine teaching cluster: without a GPU it simulates
	// a DGX A100 so every lab works. `server` nodes are real machines of a
	// lab: they never pretend to have GPUs unless asked.
	defGPUs := "auto-sim"
	if withNoAgent {
		defGPUs = "auto"
	}
	fl.StringVar(&f.gpus, "gpus", defGPUs, "GPUs of the local node: auto (real when the NVIDIA driver loads, else none), auto-sim (real when the driver loads, else a simulated DGX A100), nvml, none, sim:dgxa100|dgxh100|dgxh200|dgxb200|rtx4090x4, or sim:FILE.yaml; with --nodes, a comma list with one value per node (one value applies to all)")
	fl.StringVar(&f.fabric, "cluster", "", "cluster file (skiff.dev/v1alpha1 Cluster) of the --nodes nodes: their GPUs and NVLink domains, as node labels (nvidia.com/gpu.clique, skiff.dev/nvlink-domain); see examples/homework/task3/cluster-4x-a100.yaml")
	fl.StringVar(&f.schedCfg, "scheduler-config", "", "scheduler configuration file: a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1, as kube-scheduler --config: profiles, plugins, pluginConfig); changes apply while running; see examples/homework/task3/")
	fl.IntVar(&f.nodes, "nodes", 1, "run N nodes in this process, named NAME-1..NAME-N (NAME: --node-name or the hostname), each with its own data dir and GPUs; they share containerd")
	fl.StringVar(&f.ctrdNS, "containerd-namespace", ctrd.DefaultConfig().Namespace, "containerd namespace of skiff's images and containers")
	fl.BoolVar(&f.noMerge, "no-kubeconfig-merge", false, "do not merge the skiff context into ~/.kube/config (the kubeconfig is still written to ~/.skiff/kubeconfig and DATA-DIR/kubeconfig)")
}

// validate reports every bad flag value at once, before anything starts.
// (--gpus values are checked when their node starts: a profile file may
// only fail when read.)
func (f *clusterFlags) validate() error {
	var errs []error
	switch f.runtime {
	case "auto", "containerd", "fake":
	default:
		errs = append(errs, fmt.Errorf("--runtime %q: want auto, containerd or fake", f.runtime))
	}
	switch f.network {
	case "", networkAuto, networkNone, networkCNI:
	default:
		errs = append(errs, fmt.Errorf("--network %q: want %s, %s or %s", f.network, networkAuto, networkCNI, networkNone))
	}
	if f.nodes < 1 {
		errs = append(errs, fmt.Errorf("--nodes %d: want at least 1", f.nodes))
	} else if _, err := nodeGPUSpecs(f.gpus, f.nodes); err != nil {
		errs = append(errs, err)
	}
	if err := f.podSec.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := f.kueue.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := f.pprof.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := f.ha.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
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
	if err := u.validate(); err != nil {
		return err // bad flags change nothing
	}
	start := time.Now()
	// The local node speaks through the server's gossip member.
	cp, err := u.startControlPlane(ctx, u.r, u.baseName())
	if err != nil {
		return err
	}
	defer cp.Stop()
	return u.runNodes(ctx, u.r, cp, start)
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
	if err := s.validate(); err != nil {
		return err
	}
	start := time.Now()
	member := s.baseName()
	if s.noAgent {
		member = "skiff-server-" + member
	}
	cp, err := s.startControlPlane(ctx, s.r, member)
	if err != nil {
		return err
	}
	defer cp.Stop()
	if g := cp.Gossip(); g != nil {
		fmt.Fprintf(s.r.Stdout, "Join other machines with (copy %s to each first, readable by root only; or set $%s):\n  %s\n",
			cp.JoinTokenPath(), joinTokenEnv, joinCommand(g, s.gossip.advertise, cp.JoinTokenPath(), cp.CA().Hash()))
		if cp.EmbeddedEtcd() {
			fmt.Fprintf(s.r.Stdout, "Add servers (embedded etcd, leader election) with (copy %s, the admin token, first; or set $%s):\n  skiff server --join-server %s --token-file %s --discovery-token-ca-cert-hash %s\n",
				filepath.Join(s.dataDir, "token"), adminTokenEnv, cp.AdvertisedURL(), filepath.Join(s.dataDir, "token"), cp.CA().Hash())
		}
		if host, _, err := net.SplitHostPort(s.listen); err == nil && (host == "localhost" || net.ParseIP(host).IsLoopback()) {
			fmt.Fprintln(s.r.Stdout, "(the API server listens on loopback: agents on other machines need --listen 0.0.0.0:7443)")
		}
	}
	if s.noAgent {
		stopSim, err := s.sim.start(ctx, cp.Local(), s.r.Stdout, s.r.Logger())
		if err != nil {
			return err
		}
		defer stopSim()
		<-ctx.Done()
		fmt.Fprintln(s.r.Stdout, "shutting down")
		return cp.Stop()
	}
	return s.runNodes(ctx, s.r, cp, start)
}

// baseName is --node-name or the hostname.
func (f *clusterFlags) baseName() string {
	if f.nodeName != "" {
		return f.nodeName
	}
	return node.DefaultConfig("").Name
}

// startControlPlane starts the control plane (with gossip under the
// member name, unless --no-gossip) and writes the CLI config.
func (f *clusterFlags) startControlPlane(ctx context.Context, r *Root, member string) (*controlplane.ControlPlane, error) {
	if err := f.pprof.start(ctx, r.Logger()); err != nil {
		return nil, err
	}
	cfg := controlplane.DefaultConfig(f.dataDir)
	cfg.API.Listen = f.listen
	cfg.SchedulerConfig = f.schedCfg
	cfg.Kueue = f.kueue.config()
	cfg.API.Version = Version
	f.podSec.apply(&cfg.API)
	cfg.Log = r.Logger()
	tok, err := readTokenFlag(f.ha.tokenFile, adminTokenEnv)
	if err != nil {
		return nil, err
	}
	cfg.API.Token = tok
	cfg.Etcd = f.ha.etcdConfig(f.gossip.advertise)
	dashboard.Attach(&cfg) // the web dashboard under /dashboard/
	if !f.gossip.off {
		cfg.Gossip = &controlplane.GossipConfig{Name: member, Port: f.gossip.port, AdvertiseAddr: f.gossip.advertise,
			APIServer: advertiseURL("https://"+f.listen, f.gossip.advertise)}
	}
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		if errors.Is(err, controlplane.ErrGossip) {
			err = fmt.Errorf("%w (choose another --gossip-port, or --no-gossip)", err)
		}
		return nil, err
	}
	// Write the kubeconfig where skiff looks by default and into the data
	// dir (`skiff kubeconfig` prints it), and merge it into kubectl's.
	cc := cp.ClientConfig()
	if err := writeKubeconfigs(cc, f.dataDir, !f.noMerge, r.Logger()); err != nil {
		cp.Stop()
		return nil, err
	}
	fmt.Fprintf(r.Stdout, "skiff %s: API server at %s (data in %s)\n", Version, cc.Server, f.dataDir)
	if g := cp.Gossip(); g != nil {
		fmt.Fprintf(r.Stdout, "gossip on %s, advertising the API server as %s\n", g.LocalAddr(), cp.AdvertisedURL())
	}
	return cp, nil
}

// runNodes starts the simulated nodes and the local nodes, prints what to
// try, and runs until ctx ends or a node's agent fails.
func (f *clusterFlags) runNodes(ctx context.Context, r *Root, cp *controlplane.ControlPlane, start time.Time) error {
	stopSim, err := f.sim.start(ctx, cp.Local(), r.Stdout, r.Logger())
	if err != nil {
		return err
	}
	defer stopSim()
	nodes, err := startLocalNodes(ctx, r.Stdout, *f, cp, r.Logger(), start)
	if err != nil {
		return err
	}
	defer stopNodes(nodes)
	fmt.Fprintf(r.Stdout, `
Try, in another terminal:
  skiff get nodes -o wide
  skiff apply -f examples/lab1-nginx.yaml
  skiff get configmap,deploy,pods,svc -n gpu-demo
  curl localhost:30080
  skiff apply -f examples/lab2-gpu-pod.yaml; skiff logs -n gpu-demo gpu-test
docs/labs.md walks through every lab; docs/troubleshooting.md helps when one sticks.
Stop with Ctrl-C; the cluster's state stays in %s.
`, f.dataDir)
	err = waitNodes(ctx, nodes)
	fmt.Fprintln(r.Stdout, "shutting down")
	err = errors.Join(err, stopNodes(nodes))
	return errors.Join(err, cp.Stop())
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
	fmt.Fprintf(v.r.Stdout, "Client Version: %s\n", Version)
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
