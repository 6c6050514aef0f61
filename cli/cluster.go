package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/controlplane/apiserver"
	"skiff.dev/skiff/runtime"
	ctrd "skiff.dev/skiff/runtime/containerd"
	rtfake "skiff.dev/skiff/runtime/fake"
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
	gpus       string   // --gpus: auto, nvml, none, sim:NAME, sim:FILE.yaml
	cdiDirs    []string // extra CDI spec dirs for containerd (simulated GPUs)
	network    string   // --network: auto, none or cni (cli/network.go)
	nodes      int      // --nodes: agents in this process (cli/up_nodes.go)
	ctrdNS     string   // --containerd-namespace
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
	}
	f.gossip.register(cmd)
	f.sim.register(cmd)
	fl.StringVar(&f.network, "network", networkAuto, networkFlagHelp)
	// `up` is the one-machine teaching cluster: without a GPU it simulates
	// a DGX A100 so every lab works. `server` nodes are real machines of a
	// lab: they never pretend to have GPUs unless asked.
	defGPUs := "auto-sim"
	if withNoAgent {
		defGPUs = "auto"
	}
	fl.StringVar(&f.gpus, "gpus", defGPUs, "GPUs of the local node: auto (real when the NVIDIA driver loads, else none), auto-sim (real when the driver loads, else a simulated DGX A100), nvml, none, sim:dgxa100|dgxh100|dgxh200|dgxb200|rtx4090x4, or sim:FILE.yaml; with --nodes, a comma list with one value per node (one value applies to all)")
	fl.IntVar(&f.nodes, "nodes", 1, "run N nodes in this process, named NAME-1..NAME-N (NAME: --node-name or the hostname), each with its own data dir and GPUs; they share containerd")
	fl.StringVar(&f.ctrdNS, "containerd-namespace", ctrd.DefaultConfig().Namespace, "containerd namespace of skiff's images and containers")
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

The CLI config (server address and token) is written to $HOME/.skiff/config and
to the data directory, so other terminals can use skiff get/apply at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return u.Run(cmd.Context()) },
	}
	u.register(cmd, false)
	return cmd
}

// Run starts the cluster and blocks until ctx ends (Ctrl-C).
func (u *upCmd) Run(ctx context.Context) error {
	return runCluster(ctx, u.r, u.clusterFlags, true, false)
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
	return runCluster(ctx, s.r, s.clusterFlags, !s.noAgent, true)
}

func runCluster(ctx context.Context, r *Root, f clusterFlags, withAgent, printJoin bool) error {
	// Bad flags change nothing: check them before anything starts.
	if err := f.validate(); err != nil {
		return err
	}
	start := time.Now()
	lg := r.Logger()
	cfg := controlplane.DefaultConfig(f.dataDir)
	cfg.API.Listen = f.listen
	cfg.API.Version = Version
	cfg.Log = lg

	// Gossip starts first: the node lifecycle controller reads it, and it
	// needs the cluster token (created on the first start).
	if err := os.MkdirAll(f.dataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	token, err := apiserver.LoadOrCreateToken(f.dataDir)
	if err != nil {
		return err
	}
	cfg.API.Token = token
	nodeName := f.nodeName
	if nodeName == "" {
		nodeName = agent.DefaultConfig().NodeName
	}
	memberName := nodeName // the local node speaks through the server's member
	if !withAgent {
		memberName = "skiff-server-" + nodeName
	}
	gossip, apiURL, err := startServerGossip(f.gossip, memberName, "http://"+f.listen, token, lg)
	if err != nil {
		return err
	}
	if gossip != nil {
		defer gossip.Stop()
		cfg.Members = gossip
	}

	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer cp.Stop()

	// Write the CLI config where `skiff` looks by default, and into the
	// data dir (for --config or SKIFF_CONFIG).
	cc := cp.ClientConfig()
	paths := []string{filepath.Join(f.dataDir, "config")}
	if home, err := os.UserHomeDir(); err == nil {
		paths = append(paths, filepath.Join(home, ".skiff", "config"))
	}
	for _, p := range paths {
		if err := client.SaveConfig(p, cc); err != nil {
			return fmt.Errorf("write CLI config: %w", err)
		}
	}
	// Started with sudo: the student's own `skiff get` runs as themselves,
	// so give them the config too.
	if err := saveForSudoUser(cc); err != nil {
		lg.Warn("write CLI config for the sudo user", "err", err)
	}
	fmt.Fprintf(r.Stdout, "skiff %s: API server at %s (data in %s)\n", Version, cc.Server, f.dataDir)
	if gossip != nil {
		fmt.Fprintf(r.Stdout, "gossip on %s, advertising the API server as %s\n", gossip.LocalAddr(), apiURL)
		if printJoin {
			fmt.Fprintf(r.Stdout, "Join other machines with:\n  %s\n", joinCommand(gossip, f.gossip.advertise, token))
			if host, _, err := net.SplitHostPort(f.listen); err == nil && (host == "localhost" || net.ParseIP(host).IsLoopback()) {
				fmt.Fprintln(r.Stdout, "(the API server listens on loopback: agents on other machines need --listen 0.0.0.0:7443)")
			}
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopSim, err := f.sim.start(ctx, cp.Local(), r.Stdout, lg)
	if err != nil {
		return err
	}
	defer stopSim()
	agentDone := make(chan error, 1)
	if withAgent && f.nodes != 1 {
		stopNodes, nodeErr, err := startLocalNodes(ctx, r.Stdout, f, cp.Local(), cp.Token(), cp.Metrics(), lg, start)
		if err != nil {
			return err
		}
		go func() {
			var err error
			select {
			case err = <-nodeErr:
				<-ctx.Done()
			case <-ctx.Done():
			}
			stopNodes()
			agentDone <- err
		}()
	} else if withAgent {
		gpus, err := agent.SetUpGPUs(ctx, agent.GPUConfig{Spec: f.gpus, NodeName: nodeName, DataDir: f.dataDir, Log: lg})
		if err != nil {
			return err
		}
		defer gpus.Close()
		fmt.Fprintln(r.Stdout, gpus.Message)
		if gpus.CDISpecDir != "" {
			f.cdiDirs = append(f.cdiDirs, gpus.CDISpecDir)
		}
		rt, simulated, why, err := openRuntime(ctx, f, lg)
		if err != nil {
			return err
		}
		defer rt.Close()
		acfg := agent.DefaultConfig()
		if f.nodeName != "" {
			acfg.NodeName = f.nodeName
		}
		acfg.DataDir = f.dataDir
		acfg.Simulated = simulated
		acfg.Log = lg
		acfg.Metrics = cp.Metrics()
		var netWhy string
		if acfg.Network, netWhy, err = f.podNetwork(cp.Local(), acfg.NodeName, simulated); err != nil {
			return err
		}
		if netWhy != "" {
			fmt.Fprintln(r.Stdout, netWhy)
		}
		// Logs and exec for the API server's proxy, on loopback: the API
		// server runs in this process, on this machine.
		acfg.Listen, acfg.Token = "127.0.0.1:0", cp.Token()
		gpus.Configure(&acfg)
		a, err := agent.New(acfg, cp.Local(), rt)
		if err != nil {
			return err
		}
		netCtx, stopNet := context.WithCancel(ctx)
		waitNet := startNodeNetwork(netCtx, acfg.Network, cp.Local(), acfg.NodeName, lg)
		go func() { err := a.Run(ctx); stopNet(); waitNet(); agentDone <- err }()
		if err := waitNodeReady(ctx, cp.Local(), acfg.NodeName, 30*time.Second); err != nil {
			return err
		}
		mode := "containerd"
		if simulated {
			mode = "simulated runtime, no processes"
		}
		fmt.Fprintf(r.Stdout, "node %s is Ready (%s) after %d ms\n", acfg.NodeName, mode, time.Since(start).Milliseconds())
		if why != "" {
			fmt.Fprintln(r.Stdout, why)
		}
	} else {
		close(agentDone)
	}
	fmt.Fprintf(r.Stdout, `
Try, in another terminal:
  skiff get nodes -o wide
  skiff apply -f examples/lab1-nginx.yaml
  skiff get configmap,deploy,pods,svc -n gpu-demo
  curl localhost:30080            (with the cni pod network: the lab 1 page)
  skiff apply -f examples/lab2-gpu-pod.yaml; skiff logs -n gpu-demo gpu-test
docs/labs.md walks through every lab; docs/troubleshooting.md helps when one sticks.
Stop with Ctrl-C; the cluster's state stays in %s.
`, f.dataDir)

	select {
	case <-ctx.Done():
	case err := <-agentDone:
		if err != nil {
			return fmt.Errorf("node agent: %w", err)
		}
		<-ctx.Done()
	}
	fmt.Fprintln(r.Stdout, "shutting down")
	cancel()
	<-agentDone
	return cp.Stop()
}

// openRuntime picks the local node's runtime. With auto, containerd is used
// when its socket answers; otherwise the simulated runtime, and why says
// how to get real containers.
func openRuntime(ctx context.Context, f clusterFlags, lg *slog.Logger) (rt runtime.Runtime, simulated bool, why string, err error) {
	openCtrd := func() (runtime.Runtime, error) {
		cfg := ctrd.DefaultConfig()
		cfg.Address = f.containerd
		if f.ctrdNS != "" {
			cfg.Namespace = f.ctrdNS
		}
		cfg.StateDir = filepath.Join(f.dataDir, "containers")
		cfg.CDISpecDirs = append(append([]string(nil), cfg.CDISpecDirs...), f.cdiDirs...)
		cfg.Logger = lg
		return ctrd.New(ctx, cfg)
	}
	switch f.runtime {
	case "containerd":
		rt, err := openCtrd()
		if err != nil {
			return nil, false, "", fmt.Errorf("containerd at %s: %w", f.containerd, err)
		}
		return rt, false, "", nil
	case "fake":
		return rtfake.New(rtfake.DefaultConfig()), true, "", nil
	case "auto":
		if _, statErr := os.Stat(f.containerd); statErr == nil {
			rt, err := openCtrd()
			if err == nil {
				return rt, false, "", nil
			}
			return rtfake.New(rtfake.DefaultConfig()), true,
				fmt.Sprintf("containerd at %s did not answer (%v): pods are simulated. Run skiff as root, or start containerd, for real containers.", f.containerd, err), nil
		}
		return rtfake.New(rtfake.DefaultConfig()), true,
			fmt.Sprintf("no containerd at %s: pods are simulated. For real containers: sudo apt-get install -y containerd runc && sudo skiff up", f.containerd), nil
	}
	return nil, false, "", fmt.Errorf("--runtime %q: want auto, containerd or fake", f.runtime)
}

// waitNodeReady waits until the node's Ready condition is True.
func waitNodeReady(ctx context.Context, c client.Interface, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	kind := api.MustKindOf(&api.Node{})
	w, err := c.Watch(ctx, kind, "", api.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return fmt.Errorf("watch node %s: %w", name, err)
	}
	defer w.Stop()
	for ev := range w.Events() {
		if n, ok := ev.Object.(*api.Node); ok && nodeReady(n) {
			return nil
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("node %s did not turn Ready within %v", name, timeout)
	}
	if err := w.Err(); err != nil {
		return err
	}
	return errors.New("watch ended before the node turned Ready")
}

func nodeReady(n *api.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == api.NodeReady {
			return c.Status == api.ConditionTrue
		}
	}
	return false
}

// versionCmd prints the client's and, when reachable, the server's version.
type versionCmd struct{ r *Root }

func newVersionCmd(r *Root) *cobra.Command {
	v := &versionCmd{r: r}
	return &cobra.Command{
		Use:   "version",
		Short: "Print the skiff version (and the server's, when one is configured)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return v.Run(cmd.Context()) },
	}
}

// Run prints the versions.
func (v *versionCmd) Run(ctx context.Context) error {
	fmt.Fprintf(v.r.Stdout, "Client Version: %s\n", Version)
	cfg, err := client.LoadConfig(client.ResolveConfigPath(v.r.ConfigPath))
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
	return nil
}

func decodeJSON(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// saveForSudoUser writes the CLI config into the home of the user who ran
// sudo, owned by them.
func saveForSudoUser(cc client.Config) error {
	name := os.Getenv("SUDO_USER")
	if name == "" || name == "root" {
		return nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return err
	}
	dir := filepath.Join(u.HomeDir, ".skiff")
	p := filepath.Join(dir, "config")
	if err := client.SaveConfig(p, cc); err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	_ = os.Chown(dir, uid, gid)
	return os.Chown(p, uid, gid)
}
