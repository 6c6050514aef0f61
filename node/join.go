package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/membership"
	"skiff.dev/skiff/pki"
)

// Joining a cluster, as `skiff agent` does before Start (moved here from
// cli/agent_cmd.go, issue 25):
//
//  1. Join: become a gossip member through any member of the cluster
//     (membership, encrypted with a key derived from the join token) and
//     wait until a server member advertises an API server.
//  2. Credentials: the TLS bootstrap, as kubeadm's discovery: fetch the
//     cluster CA from that API server, refuse it unless it matches the pin
//     (--discovery-token-ca-cert-hash), then ask, verifying the server
//     against it, for the node's certificates (CN system:node:NAME) with
//     the join token; kept in the data dir and reused while they fit.
//  3. FollowAPIServers: keep the client's API servers equal to those
//     gossip knows alive that prove to be API servers (several servers
//     on embedded etcd). Gossip grants nothing by itself: a server's
//     certificate must be an API server's (pki.VerifyAPIServer).

// JoinConfig is what Join needs.
type JoinConfig struct {
	Name, Join, Token   string
	BindAddr, Advertise string
	Port                int
	Fast                bool // shorter gossip intervals (tests)
	Timeout             time.Duration
	Log                 *slog.Logger
}

// Join joins the cluster through cfg.Join and waits until gossip names an
// API server. It returns the running member and the API URL.
func Join(ctx context.Context, cfg JoinConfig) (*membership.Membership, string, error) {
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

// BootstrapConfig is what Credentials needs.
type BootstrapConfig struct {
	DataDir, Token, CAHash string
	// Servers are the API servers gossip names (GossipServers), tried in
	// order.
	Servers      []string
	UnsafeSkipCA bool
	Name         string
	Addresses    []string
	Log          *slog.Logger
}

// GossipServers are the API servers gossip names, first the one Join
// returned.
func GossipServers(m *membership.Membership, first string) []string {
	out := []string{first}
	for _, s := range m.APIServers() {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Credentials returns the node's certificates and the API server to start
// with. Gossip grants nothing by itself: a member that says it is an API
// server, with a node's certificate of the cluster CA (anyone holding the
// join token can get one), is refused, and the next server tried.
//
// Those kept in the data dir (pki.NodeDir) are used when they still fit
// (its name, its addresses, not near expiry, the pinned CA), with the
// first of j.Servers that proves to be an API server of that CA
// (client.Config.CheckServer; one that cannot be reached now is kept: the
// client keeps trying it). Else new ones come from the first of j.Servers
// that answers as the cluster's API server: the CA fetched, checked
// against the pin, and the server's certificate against the CA
// (controlplane.FetchCA), then the credential request with the join
// token, verified against that CA. New ones are saved for the next start.
func Credentials(ctx context.Context, j BootstrapConfig) (pki.NodeCredentials, string, error) {
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
		var errs []error
		for _, s := range j.Servers {
			cerr := client.Config{CAData: kept.CA}.CheckServer(ctx, s)
			if cerr == nil || !client.IsNotAPIServer(cerr) {
				return kept, s, nil
			}
			j.Log.Warn("not an API server of this cluster; trying the next", "server", s, "err", cerr)
			errs = append(errs, cerr)
		}
		return pki.NodeCredentials{}, "", fmt.Errorf("no API server gossip names proves to be one: %w", errors.Join(errs...))
	}
	if !pki.IsNotExist(err) {
		j.Log.Info("asking for new node credentials", "reason", err)
	}
	var errs []error
	for _, s := range j.Servers {
		ca, err := controlplane.FetchCA(ctx, s, j.CAHash, j.UnsafeSkipCA)
		if err != nil {
			if len(j.Servers) > 1 {
				j.Log.Warn("not the cluster's API server; trying the next", "server", s, "err", err)
			}
			errs = append(errs, err)
			continue
		}
		nc, err := controlplane.RequestNodeCredentials(ctx, s, ca, j.Token, j.Name, j.Addresses)
		if err != nil {
			return pki.NodeCredentials{}, "", err
		}
		if err := nc.Save(dir); err != nil {
			return pki.NodeCredentials{}, "", err
		}
		return nc, s, nil
	}
	return pki.NodeCredentials{}, "", errors.Join(errs...)
}

// ServerCheck remembers which API server URLs proved to be API servers
// of the cluster (client.Config.CheckServer): gossip names them, and
// gossip metadata grants nothing by itself. Not safe for concurrent use.
type ServerCheck struct {
	cc  client.Config
	ok  map[string]bool
	log *slog.Logger
}

// NewServerCheck checks servers against cc's CA; cc.Server is known good.
func NewServerCheck(cc client.Config, lg *slog.Logger) *ServerCheck {
	return &ServerCheck{cc: cc, ok: map[string]bool{cc.Server: true}, log: lg}
}

// Filter keeps the servers that prove to be API servers (one TLS
// handshake each, the first time; a refused one is asked again next time).
func (v *ServerCheck) Filter(ctx context.Context, servers []string) []string {
	var out []string
	for _, s := range servers {
		if !v.ok[s] {
			if err := v.cc.CheckServer(ctx, s); err != nil {
				v.log.Warn("gossip names an API server that is not one of this cluster; ignored", "server", s, "err", err)
				continue
			}
			v.ok[s] = true
		}
		out = append(out, s)
	}
	return out
}

// FollowAPIServers keeps the client's list of API servers equal to the
// servers gossip knows alive that prove to be API servers (verified), so
// the client fails over among them (several servers on embedded etcd),
// until ctx ends. It is the member's one reader of Changed. An empty list
// (every server gone) keeps the last one: the client keeps trying it
// until a server comes back.
func FollowAPIServers(ctx context.Context, m *membership.Membership, c *client.Client, verified *ServerCheck, lg *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.Changed():
		}
		servers := verified.Filter(ctx, m.APIServers())
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
