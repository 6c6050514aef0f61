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
//     gossip knows alive (several servers on embedded etcd).

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
	DataDir, Server, Token, CAHash string
	UnsafeSkipCA                   bool
	Name                           string
	Addresses                      []string
	Log                            *slog.Logger
}

// Credentials returns the node's certificates: those kept in its data
// dir (pki.NodeDir) when they still fit (its name, its addresses, not
// near expiry, the pinned CA), else new ones from the server at
// j.Server: the CA fetched and checked against the pin first
// (controlplane.FetchCA), then the credential request with the join
// token, verified against that CA. New ones are saved for the next start.
func Credentials(ctx context.Context, j BootstrapConfig) (pki.NodeCredentials, error) {
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

// FollowAPIServers keeps the client's list of API servers equal to the
// servers gossip knows alive (several with embedded etcd: the client
// fails over among them), until ctx ends. It is the member's one reader
// of Changed. An empty list (every server gone) keeps the last one: the
// client keeps trying it until a server comes back.
func FollowAPIServers(ctx context.Context, m *membership.Membership, c *client.Client, lg *slog.Logger) {
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
