package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/agent/gpu/dcgm"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/membership"
	"skiff.dev/skiff/node"
	"skiff.dev/skiff/pki"
)

// AgentConfig is what `skiff agent` runs: a node that joins a cluster
// through any of its members. Start from DefaultAgentConfig.
type AgentConfig struct {
	// Join is a member of the cluster: HOST or HOST:PORT (gossip).
	Join string
	// Token is the join token (the server's DATA-DIR/join-token).
	Token string
	// CAHash pins the cluster CA (sha256:HEX); UnsafeSkipCA trusts any.
	CAHash       string
	UnsafeSkipCA bool
	// NodeName ("" = the hostname), Runtime, containerd, DataDir, GPUs
	// and Network of the node (node.Config).
	NodeName                               string
	Runtime                                string
	ContainerdAddress, ContainerdNamespace string
	RegistryHostsDir                       string
	DataDir                                string
	GPUs, Network                          string
	// DevicePluginConfig is the ConfigMap of NVIDIA device plugin configs
	// (node.Config.DevicePluginConfig).
	DevicePluginConfig string
	// DevicePlugin is node.Config.DevicePlugin: agent.DevicePluginBuiltin
	// or agent.DevicePluginExternal.
	DevicePlugin string
	// DRADynamicMIG: node.Config.DRADynamicMIG.
	DRADynamicMIG bool
	// GossipPort of this agent's member; Advertise is the address other
	// machines reach this node at ("" = the default route's).
	GossipPort int
	Advertise  string
	// ListenAgent is the address of the agent's logs/exec server.
	ListenAgent string
	// DCGMExporterListen is the node's DCGM exporter address
	// (node.Config.DCGMExporterListen).
	DCGMExporterListen string
	// JoinTimeout bounds the wait for gossip to name the API server.
	JoinTimeout time.Duration
	Log         *slog.Logger
	Out         io.Writer
}

// DefaultAgentConfig returns `skiff agent`'s defaults (DataDir is left to
// the caller: the CLI's is ~/.skiff/agent).
func DefaultAgentConfig() AgentConfig {
	nc := node.DefaultConfig("")
	return AgentConfig{
		Runtime:             nc.Runtime,
		ContainerdAddress:   nc.ContainerdAddress,
		ContainerdNamespace: nc.ContainerdNamespace,
		RegistryHostsDir:    nc.RegistryHostsDir,
		GPUs:                "auto",
		DevicePluginConfig:  api.NVIDIADevicePluginConfigMap,
		DevicePlugin:        agent.DevicePluginBuiltin,
		Network:             nc.Network,
		GossipPort:          membership.DefaultPort,
		ListenAgent:         "0.0.0.0:10250",
		DCGMExporterListen:  fmt.Sprintf(":%d", dcgm.DefaultPort),
		JoinTimeout:         30 * time.Second,
	}
}

// nodeConfig is the node this agent runs (without credentials: they come
// from the join).
func (a *AgentConfig) nodeConfig() node.Config {
	cfg := node.DefaultConfig(a.DataDir)
	if a.NodeName != "" {
		cfg.Name = a.NodeName
	}
	cfg.NodeIP = a.Advertise
	cfg.Runtime, cfg.ContainerdAddress, cfg.ContainerdNamespace = a.Runtime, a.ContainerdAddress, a.ContainerdNamespace
	cfg.RegistryHostsDir = a.RegistryHostsDir
	cfg.GPUs, cfg.Network = a.GPUs, a.Network
	cfg.DevicePluginConfig, cfg.DevicePlugin, cfg.DRADynamicMIG = a.DevicePluginConfig, a.DevicePlugin, a.DRADynamicMIG
	cfg.Listen, cfg.Log = a.ListenAgent, a.Log
	cfg.DCGMExporterListen = a.DCGMExporterListen
	return cfg
}

// Validate reports every problem of the node's configuration at once
// (the token and the pin are the caller's to check: they come from files
// and flags).
func (a *AgentConfig) Validate() error {
	cfg := a.nodeConfig()
	// Credentials come from the join; a placeholder lets Validate check
	// the rest first.
	cfg.Credentials = &pki.NodeCredentials{}
	return cfg.Validate()
}

// Agent joins the cluster (node.Join, node.Credentials) and runs the node
// until ctx ends or the node stops. Call Validate first: bad flags change
// nothing, not even a gossip join.
func Agent(ctx context.Context, a AgentConfig) error {
	lg, out := a.Log, a.Out
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if out == nil {
		out = io.Discard
	}
	cfg := a.nodeConfig()
	m, apiURL, err := node.Join(ctx, node.JoinConfig{
		Name: cfg.Name, Join: a.Join, Token: a.Token,
		Port: a.GossipPort, Advertise: a.Advertise, Timeout: a.JoinTimeout, Log: lg,
	})
	if err != nil {
		return err
	}
	defer m.Stop() // leave: the server sees Left, not a crash
	fmt.Fprintf(out, "joined the cluster through %s (%d members); API server at %s\n", a.Join, len(m.Members()), apiURL)

	nodeIP := cfg.NodeIP
	if nodeIP == "" {
		nodeIP = agent.DefaultConfig().NodeIP
	}
	creds, apiURL, err := node.Credentials(ctx, node.BootstrapConfig{DataDir: a.DataDir, Servers: node.GossipServers(m, apiURL), Token: a.Token, CAHash: a.CAHash,
		UnsafeSkipCA: a.UnsafeSkipCA, Name: cfg.Name, Addresses: []string{nodeIP}, Log: lg})
	if err != nil {
		return err
	}
	cfg.Credentials = &creds
	cc := client.Config{Server: apiURL, CAData: creds.CA, CertData: creds.ClientCert, KeyData: creds.ClientKey,
		UserAgent: client.UserAgent("skiff-agent")}
	verified := node.NewServerCheck(cc, lg)
	cc.Servers = verified.Filter(ctx, m.APIServers())
	c, err := client.New(cc)
	if err != nil {
		return err
	}
	n, err := node.Start(ctx, cfg, c)
	if err != nil {
		return err
	}
	followCtx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	go node.FollowAPIServers(followCtx, m, c, verified, lg)
	info := n.Info()
	if !info.Simulated {
		if err := RecordContainerd(Containerd{Address: a.ContainerdAddress, Namespace: a.ContainerdNamespace}); err != nil {
			lg.Warn("record the node's containerd for skiff image", "err", err)
		}
	}
	for _, s := range []string{info.GPUs, info.RuntimeNote, info.NetworkNote, info.Limits} {
		printNote(out, s)
	}
	fmt.Fprintf(out, "node %s: agent running (%s; logs and exec served on %s)\n", info.Name, info.Runtime, info.Addr)
	select {
	case <-ctx.Done():
	case <-n.Done():
	}
	return n.Stop()
}
