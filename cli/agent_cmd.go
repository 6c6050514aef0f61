package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/membership"
	"skiff.dev/skiff/node"
	"skiff.dev/skiff/pki"
	ctrd "skiff.dev/skiff/runtime/containerd"
)

// agentCmd runs a node agent that joins an existing cluster.
type agentCmd struct {
	r            *Root
	join         string
	tokenFile    string
	caHash       string
	unsafeSkipCA bool
	nodeName     string
	runtime      string
	containerd   string
	dataDir      string
	gossipPort   int
	advertise    string
	listenAgent  string
	joinTimeout  time.Duration
	gpus         string
	network      string
	ctrdNS       string
}

func newAgentCmd(r *Root) *cobra.Command {
	a := &agentCmd{r: r}
	cmd := &cobra.Command{
		Use:   "agent --join HOST[:PORT] --token-file FILE --discovery-token-ca-cert-hash sha256:HEX",
		Short: "Run a node agent that joins a cluster through any of its members",
		Long: `Run a node agent (the kubelet of a skiff cluster) on this machine and join the
cluster that HOST belongs to. HOST is any member: the server, or another agent;
PORT is its gossip port (default 7946). The agent learns the API server's
address from gossip, registers this machine as a Node and runs the pods the
scheduler binds to it.

The join token is the server's DATA-DIR/join-token: copy the file here and
pass --token-file, or set $` + joinTokenEnv + ` (never the token on the command
line, where ps shows it). Gossip is encrypted with a key derived from it: with
a wrong token the join fails.

The CA pin (--discovery-token-ca-cert-hash, as kubeadm's) is what ` + "`skiff server`" + `
printed: the agent fetches the cluster CA from the API server, refuses to go on
when its hash differs (someone else answered), then asks, verifying the server
against that CA, for its certificates (CN system:node:NAME) and keeps them in
its data dir (pki/); a restarted agent reuses them.`,
		Example: `  skiff agent --join 10.0.0.1 --token-file ./join-token --discovery-token-ca-cert-hash sha256:8f4e...`,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return a.Run(cmd.Context()) },
	}
	home, _ := os.UserHomeDir()
	fl := cmd.Flags()
	fl.StringVar(&a.join, "join", "", "a member of the cluster to join: HOST or HOST:PORT (required)")
	fl.StringVar(&a.tokenFile, "token-file", "", "file holding the join token (a copy of the server's DATA-DIR/join-token); default $"+joinTokenEnv)
	fl.StringVar(&a.caHash, "discovery-token-ca-cert-hash", "", "the cluster CA's pin, sha256:HEX, as `skiff server` printed it (required unless --discovery-token-unsafe-skip-ca-verification)")
	fl.BoolVar(&a.unsafeSkipCA, "discovery-token-unsafe-skip-ca-verification", false, "trust whatever CA the API server presents (no pin); only on a network you trust")
	fl.StringVar(&a.nodeName, "node-name", "", "name of this node (default: the hostname)")
	fl.StringVar(&a.runtime, "runtime", "auto", "container runtime: auto (containerd when reachable, else simulated), containerd, or fake (simulated, no processes)")
	fl.StringVar(&a.containerd, "containerd-address", ctrd.DefaultConfig().Address, "containerd socket")
	fl.StringVar(&a.dataDir, "data-dir", filepath.Join(home, ".skiff", "agent"), "where the agent keeps pod volumes and container logs")
	fl.IntVar(&a.gossipPort, "gossip-port", membership.DefaultPort, "gossip port of this agent (UDP and TCP)")
	fl.StringVar(&a.advertise, "advertise-address", "", "address other machines reach this node at (default: the address of the default route)")
	fl.StringVar(&a.listenAgent, "listen-agent", "0.0.0.0:10250", "address of the agent's logs/exec server (host:port), which the API server calls")
	fl.DurationVar(&a.joinTimeout, "join-timeout", 30*time.Second, "how long to wait for gossip to name the API server")
	fl.StringVar(&a.gpus, "gpus", "auto", "GPUs of this node: auto (real when the NVIDIA driver loads, else none), nvml, none, sim:dgxa100|dgxh100|dgxh200|dgxb200|rtx4090x4, or sim:FILE.yaml")
	fl.StringVar(&a.network, "network", networkAuto, networkFlagHelp)
	fl.StringVar(&a.ctrdNS, "containerd-namespace", ctrd.DefaultConfig().Namespace, "containerd namespace of skiff's images and containers")
	_ = cmd.MarkFlagRequired("join")
	return cmd
}

// joinConfig is what joinCluster needs.
type joinConfig struct {
	Name, Join, Token   string
	BindAddr, Advertise string
	Port                int
	Fast                bool // shorter gossip intervals (tests)
	Timeout             time.Duration
	Log                 *slog.Logger
}

// joinCluster joins the cluster through cfg.Join and waits until gossip
// names an API server. It returns the running member and the API URL.
func joinCluster(ctx context.Context, cfg joinConfig) (*membership.Membership, string, error) {
	mc := membership.DefaultConfig(cfg.Name, cfg.Token)
	if cfg.BindAddr != "" {
		mc.BindAddr = cfg.BindAddr
	}
	mc.BindPort, mc.AdvertiseAddr, mc.Fast, mc.Log = cfg.Port, cfg.Advertise, cfg.Fast, cfg.Log
	mc.Meta = membership.Meta{Role: membership.RoleAgent, Node: cfg.Name}
	mc.Join = []string{cfg.Join}
	m, err := membership.Start(mc)
	if errors.Is(err, membership.ErrWrongToken) {
		return nil, "", fmt.Errorf("cannot join %s: the cluster token is wrong (gossip messages could not be decrypted)", cfg.Join)
	}
	if nt := (*membership.NameTakenError)(nil); errors.As(err, &nt) {
		return nil, "", fmt.Errorf("cannot join %s: node name %q is already taken in the cluster by %s; choose another with --node-name", cfg.Join, nt.Name, nt.Addr)
	}
	if err != nil {
		return nil, "", fmt.Errorf("cannot join %s: %w", cfg.Join, err)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	timer := time.NewTimer(cfg.Timeout)
	defer timer.Stop()
	for {
		if url, ok := m.APIServer(); ok {
			return m, url, nil
		}
		select {
		case <-m.Changed():
		case <-timer.C:
			m.Stop()
			return nil, "", fmt.Errorf("joined the cluster through %s, but no server member advertised an API server within %v (is `skiff server` running with gossip?)", cfg.Join, cfg.Timeout)
		case <-ctx.Done():
			m.Stop()
			return nil, "", ctx.Err()
		}
	}
}

// Run joins the cluster and runs the node until ctx ends.
func (a *agentCmd) Run(ctx context.Context) error {
	lg := a.r.Logger()
	cfg := node.DefaultConfig(a.dataDir)
	if a.nodeName != "" {
		cfg.Name = a.nodeName
	}
	cfg.NodeIP = a.advertise
	cfg.Runtime, cfg.ContainerdAddress, cfg.ContainerdNamespace = a.runtime, a.containerd, a.ctrdNS
	cfg.GPUs, cfg.Network = a.gpus, a.network
	cfg.Listen, cfg.Log = a.listenAgent, lg
	token, err := readTokenFlag(a.tokenFile, joinTokenEnv)
	if err != nil {
		return err
	}
	var errs []error
	if token == "" {
		errs = append(errs, fmt.Errorf("no join token: pass --token-file (a copy of the server's DATA-DIR/join-token) or set $%s", joinTokenEnv))
	}
	if a.caHash == "" && !a.unsafeSkipCA {
		errs = append(errs, errors.New("no --discovery-token-ca-cert-hash: give the sha256:... pin `skiff server` printed (or, on a trusted network only, --discovery-token-unsafe-skip-ca-verification)"))
	}
	// Credentials come from the join; a placeholder lets Validate check
	// the rest first.
	cfg.Credentials = &pki.NodeCredentials{}
	errs = append(errs, cfg.Validate())
	if err := errors.Join(errs...); err != nil {
		return err // bad flags change nothing: not even a gossip join
	}
	m, apiURL, err := joinCluster(ctx, joinConfig{
		Name: cfg.Name, Join: a.join, Token: token,
		Port: a.gossipPort, Advertise: a.advertise, Timeout: a.joinTimeout, Log: lg,
	})
	if err != nil {
		return err
	}
	defer m.Stop() // leave: the server sees Left, not a crash
	fmt.Fprintf(a.r.Stdout, "joined the cluster through %s (%d members); API server at %s\n", a.join, len(m.Members()), apiURL)

	nodeIP := cfg.NodeIP
	if nodeIP == "" {
		nodeIP = agent.DefaultConfig().NodeIP
	}
	creds, err := nodeCredentials(ctx, nodeJoin{DataDir: a.dataDir, Server: apiURL, Token: token, CAHash: a.caHash,
		UnsafeSkipCA: a.unsafeSkipCA, Name: cfg.Name, Addresses: []string{nodeIP}, Log: lg})
	if err != nil {
		return err
	}
	cfg.Credentials = &creds
	c, err := client.New(client.Config{Server: apiURL, Servers: m.APIServers(), CAData: creds.CA, CertData: creds.ClientCert, KeyData: creds.ClientKey})
	if err != nil {
		return err
	}
	n, err := node.Start(ctx, cfg, c)
	if err != nil {
		return err
	}
	followCtx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	go followAPIServers(followCtx, m, c, lg)
	info := n.Info()
	if !info.Simulated {
		if err := saveNodeContainerd(a.containerd, a.ctrdNS); err != nil {
			lg.Warn("record the node's containerd for skiff image", "err", err)
		}
	}
	for _, s := range []string{info.GPUs, info.RuntimeNote, info.NetworkNote, info.Limits} {
		printNote(a.r.Stdout, s)
	}
	fmt.Fprintf(a.r.Stdout, "node %s: agent running (%s; logs and exec served on %s)\n", info.Name, info.Runtime, info.Addr)
	select {
	case <-ctx.Done():
	case <-n.Done():
	}
	return n.Stop()
}

// nodeJoin is what nodeCredentials needs.
type nodeJoin struct {
	DataDir, Server, Token, CAHash string
	UnsafeSkipCA                   bool
	Name                           string
	Addresses                      []string
	Log                            *slog.Logger
}

// nodeCredentials returns the node's certificates: those kept in its data
// dir (pki.NodeDir) when they still fit (its name, its addresses, not
// near expiry, the pinned CA), else new ones from the server at
// j.Server: the CA fetched and checked against the pin first
// (controlplane.FetchCA), then the credential request with the join
// token, verified against that CA. New ones are saved for the next start.
func nodeCredentials(ctx context.Context, j nodeJoin) (pki.NodeCredentials, error) {
	dir := pki.NodeDir(j.DataDir)
	kept, err := pki.LoadNodeCredentials(dir)
	if err == nil {
		err = kept.Check(j.Name, j.Addresses, time.Now())
	}
	if err == nil && j.CAHash != "" {
		var ca *pki.CA
		if ca, err = pki.FromPEM(kept.CA); err == nil {
			err = ca.CheckHash(j.CAHash)
		}
	}
	if err == nil {
		j.Log.Info("using the node credentials kept in the data dir", "dir", dir)
		return kept, nil
	}
	if !pki.IsNotExist(err) {
		j.Log.Info("asking for new node credentials", "reason", err)
	}
	ca, err := controlplane.FetchCA(ctx, j.Server, j.CAHash, j.UnsafeSkipCA)
	if err != nil {
		return pki.NodeCredentials{}, err
	}
	nc, err := controlplane.RequestNodeCredentials(ctx, j.Server, ca, j.Token, j.Name, j.Addresses)
	if err != nil {
		return pki.NodeCredentials{}, err
	}
	if err := nc.Save(dir); err != nil {
		return pki.NodeCredentials{}, err
	}
	return nc, nil
}

// followAPIServers keeps the client's list of API servers equal to the
// servers gossip knows alive (several with embedded etcd: the client
// fails over among them), until ctx ends. It is the member's one reader
// of Changed. An empty list (every server gone) keeps the last one: the
// client keeps trying it until a server comes back.
func followAPIServers(ctx context.Context, m *membership.Membership, c *client.Client, lg *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.Changed():
		}
		servers := m.APIServers()
		if len(servers) == 0 || slices.Equal(sortedCopy(servers), sortedCopy(c.Servers())) {
			continue
		}
		if err := c.SetServers(servers); err != nil {
			lg.Warn("API servers from gossip", "servers", servers, "err", err)
			continue
		}
		lg.Info("API servers from gossip", "servers", servers, "current", c.Server())
	}
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// gossipFlags are the server side's gossip flags (`up`, `server`).
type gossipFlags struct {
	port      int
	advertise string
	off       bool
}

func (g *gossipFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&g.port, "gossip-port", membership.DefaultPort, "gossip port (UDP and TCP) agents join through")
	fl.StringVar(&g.advertise, "advertise-address", "", "address agents reach this machine at (default: the address of the default route)")
	fl.BoolVar(&g.off, "no-gossip", false, "do not start gossip: no agent can join, nodes are watched through heartbeats only")
}

// advertiseURL turns https://0.0.0.0:7443 into https://ADDR:7443, with
// ADDR the advertise address or the default route's (http:// too, for
// etcd's peer URLs).
func advertiseURL(apiURL, advertise string) string {
	scheme, hostport, ok := strings.Cut(apiURL, "://")
	if !ok {
		scheme, hostport = "", apiURL
	} else {
		scheme += "://"
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return apiURL
	}
	ip := net.ParseIP(host)
	if host != "" && (ip == nil || !ip.IsUnspecified()) {
		return apiURL
	}
	if advertise == "" {
		advertise = agent.DefaultConfig().NodeIP
	}
	return scheme + net.JoinHostPort(advertise, port)
}

// joinCommand is what `skiff server` prints for the other machines: the
// join token by its file (never itself: ps would show it), the CA's pin.
func joinCommand(m *membership.Membership, advertise, tokenFile, caHash string) string {
	addr := m.LocalAddr()
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if advertise != "" {
			host = advertise
		} else if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			host = agent.DefaultConfig().NodeIP
		}
		if port == strconv.Itoa(membership.DefaultPort) {
			addr = host
		} else {
			addr = net.JoinHostPort(host, port)
		}
	}
	return fmt.Sprintf("skiff agent --join %s --token-file %s --discovery-token-ca-cert-hash %s", addr, tokenFile, caHash)
}
