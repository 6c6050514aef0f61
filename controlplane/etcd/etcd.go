package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Cluster states of Config.ClusterState.
const (
	// ClusterStateNew forms a new cluster of the members in InitialCluster.
	ClusterStateNew = "new"
	// ClusterStateExisting joins a cluster that AddMember announced it to.
	ClusterStateExisting = "existing"
)

// Config is one embedded etcd member.
type Config struct {
	// Name of the member, unique in the cluster (the server's name).
	Name string
	// DataDir holds the member's write-ahead log and database.
	DataDir string
	// ClientURL is where clients connect, e.g. http://127.0.0.1:2379.
	ClientURL string
	// PeerURL is where the other members connect, e.g. http://10.0.0.1:2380.
	PeerURL string
	// InitialCluster is "name=peerURL,..." of every member at start; ""
	// means a cluster of this member alone (Name=PeerURL).
	InitialCluster string
	// ClusterState is "new" (form a cluster) or "existing" (join one);
	// "" means "new".
	ClusterState string
	// StartTimeout bounds the wait for the member to serve; 0 means one
	// minute (a joining member may need to catch up on a snapshot).
	StartTimeout time.Duration
	// Log receives etcd's warnings and errors; nil discards them.
	Log *slog.Logger
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("name: must not be empty"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir: must not be empty"))
	}
	for _, u := range []struct{ field, value string }{{"client url", c.ClientURL}, {"peer url", c.PeerURL}} {
		if _, err := parseURL(u.value); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u.field, err))
		}
	}
	switch c.ClusterState {
	case "", ClusterStateNew, ClusterStateExisting:
	default:
		errs = append(errs, fmt.Errorf("cluster state %q: must be %q or %q", c.ClusterState, ClusterStateNew, ClusterStateExisting))
	}
	if c.ClusterState == ClusterStateExisting && c.InitialCluster == "" {
		errs = append(errs, errors.New("initial cluster: required to join an existing cluster (AddMember returns it)"))
	}
	if c.StartTimeout < 0 {
		errs = append(errs, fmt.Errorf("start timeout %v: must not be negative", c.StartTimeout))
	}
	return errors.Join(errs...)
}

func parseURL(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("must not be empty")
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q: want http://HOST:PORT", s)
	}
	return u, nil
}

// Server is a running embedded member and a client connected to it.
type Server struct {
	e      *embed.Etcd
	cli    *clientv3.Client
	once   sync.Once
	closed chan struct{}
}

// StartEmbedded starts the member and waits until it serves clients, ctx
// ends or StartTimeout passes.
func StartEmbedded(ctx context.Context, c Config) (*Server, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	curl, _ := parseURL(c.ClientURL)
	purl, _ := parseURL(c.PeerURL)
	cfg := embed.NewConfig()
	cfg.Name = c.Name
	cfg.Dir = c.DataDir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*curl}, []url.URL{*curl}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*purl}, []url.URL{*purl}
	cfg.InitialCluster = c.InitialCluster
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = c.Name + "=" + c.PeerURL
	}
	cfg.ClusterState = c.ClusterState
	if cfg.ClusterState == "" {
		cfg.ClusterState = ClusterStateNew
	}
	cfg.InitialClusterToken = "skiff"
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(newSlogCore(log.With("component", "etcd", "member", c.Name).Handler(), slog.LevelWarn)))
	timeout := c.StartTimeout
	if timeout == 0 {
		timeout = time.Minute
	}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd member %s: %w", c.Name, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("start etcd member %s: %w", c.Name, err)
	case <-t.C:
		e.Close()
		return nil, fmt.Errorf("start etcd member %s: not ready after %v (is a quorum of the cluster up?)", c.Name, timeout)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("start etcd member %s: %w", c.Name, ctx.Err())
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{c.ClientURL},
		DialTimeout: 5 * time.Second,
		Logger:      zap.New(newSlogCore(log.With("component", "etcd-client").Handler(), slog.LevelWarn)),
	})
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("connect to etcd member %s: %w", c.Name, err)
	}
	return &Server{e: e, cli: cli, closed: make(chan struct{})}, nil
}

// Client is a client of this member (the cluster through it). Stop closes it.
func (s *Server) Client() *clientv3.Client { return s.cli }

// ReadyNotify is closed when the member serves clients (already so when
// StartEmbedded has returned).
func (s *Server) ReadyNotify() <-chan struct{} { return s.e.Server.ReadyNotify() }

// Err delivers a fatal error of the running member.
func (s *Server) Err() <-chan error { return s.e.Err() }

// Done is closed by Stop.
func (s *Server) Done() <-chan struct{} { return s.closed }

// Stop closes the client and stops the member. Safe twice.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = s.cli.Close()
		s.e.Close()
		close(s.closed)
	})
}

// AddMember announces a new member name at peerURL to the cluster cli talks
// to and returns the InitialCluster the new member must start with
// ("name=peerURL,..." of every member, the new one included), with
// ClusterState "existing". Start the new member soon: until it runs, the
// cluster counts it in its quorum.
func AddMember(ctx context.Context, cli *clientv3.Client, name, peerURL string) (string, error) {
	if _, err := parseURL(peerURL); err != nil {
		return "", fmt.Errorf("add etcd member %s: peer url: %w", name, err)
	}
	list, err := cli.MemberList(ctx)
	if err != nil {
		return "", fmt.Errorf("add etcd member %s: %w", name, err)
	}
	for _, m := range list.Members {
		if m.Name == name {
			return "", fmt.Errorf("add etcd member %s: a member of that name exists (peer %s); remove it first", name, strings.Join(m.PeerURLs, ","))
		}
	}
	resp, err := cli.MemberAdd(ctx, []string{peerURL})
	if err != nil {
		return "", fmt.Errorf("add etcd member %s: %w", name, err)
	}
	var parts []string
	for _, m := range resp.Members {
		n := m.Name
		if m.ID == resp.Member.ID {
			n = name // not started yet: the cluster does not know its name
		}
		if n == "" {
			continue // another member added and not started yet
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, n+"="+u)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ","), nil
}

// RemoveMember takes the member called name out of the cluster cli talks
// to. It fails when there is no such member, and (etcd's strict
// reconfiguration check, "unhealthy cluster") when the removal would leave
// too few members that have been connected for the last five seconds to
// keep a quorum: retry a little later.
func RemoveMember(ctx context.Context, cli *clientv3.Client, name string) error {
	list, err := cli.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("remove etcd member %s: %w", name, err)
	}
	for _, m := range list.Members {
		if m.Name == name {
			if _, err := cli.MemberRemove(ctx, m.ID); err != nil {
				return fmt.Errorf("remove etcd member %s: %w", name, err)
			}
			return nil
		}
	}
	return fmt.Errorf("remove etcd member %s: no member of that name", name)
}
