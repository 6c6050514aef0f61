package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"skiff.dev/skiff/pki"
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
	// ClientURL is where clients connect, e.g. https://127.0.0.1:2379.
	ClientURL string
	// PeerURL is where the other members connect, e.g. https://10.0.0.1:2380.
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
	// TLS secures both URLs (then both are https://); nil serves them
	// in plain http (only the package's own tests do: skiff's servers
	// always give it, controlplane/etcd_backend.go).
	TLS *TLS
	// Log receives etcd's warnings and errors; nil discards them.
	Log *slog.Logger
}

// TLS is a member's TLS, as kubeadm sets up a stacked etcd: one
// certificate (CertFile, KeyFile; both usages) that the member serves its
// peer and client URLs with and presents as a client (to the other
// members, and its own client to itself); CAFile, the CA every member's
// certificate chains to; and AllowedCN, the common name every member's
// certificate carries (etcd's --peer-cert-allowed-cn, applied to the
// client URL too). A client certificate of the same CA with another name
// (a node's, a user's) is refused on both URLs, and so is a connection
// without one: only the cluster's servers reach etcd.
type TLS struct {
	CertFile, KeyFile, CAFile string
	AllowedCN                 string
}

// info is the TLS as etcd's transport takes it. The client's address is
// not checked against its certificate's SANs: a member may dial from any
// of its machine's addresses; its name (AllowedCN) is what counts.
func (t *TLS) info() transport.TLSInfo {
	return transport.TLSInfo{
		CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.CAFile,
		ClientCertAuth: true, AllowedCNs: []string{t.AllowedCN}, SkipClientSANVerify: true,
	}
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
		pu, err := parseURL(u.value)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", u.field, err))
		case c.TLS != nil && pu.Scheme != "https":
			errs = append(errs, fmt.Errorf("%s %q: want https://HOST:PORT (the member serves TLS)", u.field, u.value))
		case c.TLS == nil && pu.Scheme == "https":
			errs = append(errs, fmt.Errorf("%s %q: https needs the member's TLS certificate", u.field, u.value))
		}
	}
	if t := c.TLS; t != nil && (t.CertFile == "" || t.KeyFile == "" || t.CAFile == "" || t.AllowedCN == "") {
		errs = append(errs, errors.New("tls: certificate, key, CA and allowed common name are all required"))
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
	var clientTLS *tls.Config
	if c.TLS != nil {
		cfg.PeerTLSInfo, cfg.ClientTLSInfo = c.TLS.info(), c.TLS.info()
		ct, err := c.TLS.info().ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("start etcd member %s: client TLS: %w", c.Name, err)
		}
		clientTLS = ct
	}
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(newSlogCore(log.With("component", "etcd", "member", c.Name).Handler(), slog.LevelWarn)))
	timeout := c.StartTimeout
	if timeout == 0 {
		timeout = time.Minute
	}

	t := time.NewTimer(timeout)
	defer t.Stop()
	e, err := startEtcd(ctx, cfg, t.C)
	if err != nil {
		return nil, fmt.Errorf("start etcd member %s: %w", c.Name, err)
	}
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
		TLS:         clientTLS,
		Logger:      zap.New(newSlogCore(log.With("component", "etcd-client").Handler(), slog.LevelWarn)),
	})
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("connect to etcd member %s: %w", c.Name, err)
	}
	return &Server{e: e, cli: cli, closed: make(chan struct{})}, nil
}

// startEtcd is embed.StartEtcd, asked again while a joining member finds
// the cluster not yet knowing it. A new member checks its initial cluster
// against the member list of the first peer that answers, and a member
// that has not applied AddMember's change yet lists one member fewer
// ("member count is unequal"): it applies it within milliseconds, so the
// start is tried again, every 100 ms, until it passes, fails otherwise,
// timeout fires or ctx ends.
func startEtcd(ctx context.Context, cfg *embed.Config, timeout <-chan time.Time) (*embed.Etcd, error) {
	for {
		e, err := embed.StartEtcd(cfg)
		if err == nil || cfg.ClusterState != ClusterStateExisting || !strings.Contains(err.Error(), "member count is unequal") {
			return e, err
		}
		retry := time.NewTimer(100 * time.Millisecond)
		select {
		case <-retry.C:
		case <-timeout:
			retry.Stop()
			return nil, err
		case <-ctx.Done():
			retry.Stop()
			return nil, err
		}
	}
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

// IsLearner reports whether this member is a learner: added by AddMember,
// not promoted yet. A learner replicates the log but does not vote, and
// serves no client requests but the member list (etcd answers "rpc not
// supported for learner").
func (s *Server) IsLearner() bool { return s.e.Server.IsLearner() }

// promotePoll is how often WaitPromoted looks, and PromoteMember asks again.
const promotePoll = 100 * time.Millisecond

// WaitPromoted returns once this member is a voting member (at once when
// it is one), or when ctx ends: after PromoteMember succeeded on another
// member, this one applies the change a moment later.
func (s *Server) WaitPromoted(ctx context.Context) error {
	t := time.NewTicker(promotePoll)
	defer t.Stop()
	for s.IsLearner() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for etcd member %s to be promoted: %w", s.e.Config().Name, ctx.Err())
		case <-s.closed:
			return fmt.Errorf("wait for etcd member %s to be promoted: stopped", s.e.Config().Name)
		case err := <-s.e.Err():
			return fmt.Errorf("wait for etcd member %s to be promoted: %w", s.e.Config().Name, err)
		case <-t.C:
		}
	}
	return nil
}

// AddMember announces a new member name at peerURL to the cluster cli talks
// to, as a learner, and returns the InitialCluster the new member must
// start with ("name=peerURL,..." of every member, the new one included),
// with ClusterState "existing". Then start it and promote it
// (PromoteMember) to a voting member.
//
// A learner does not count in the quorum: the cluster keeps its majority
// while the new member starts and catches up, however long that takes
// (etcd's learner design; a member added as a voter is a vote missing from
// the start). etcd takes one learner at a time ("too many learner members
// in cluster", rpctypes.ErrTooManyLearners) and a new member only once this
// member has been connected to a majority for five seconds ("unhealthy
// cluster", rpctypes.ErrUnhealthy): retry both a little later.
//
// Asked again for a member added and never started (same peer URL, no
// name yet: its server died before starting it), it answers as the first
// time instead of adding a second one.
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
		if m.Name == "" && slices.Contains(m.PeerURLs, peerURL) {
			return initialCluster(list.Members, m.ID, name), nil
		}
	}
	resp, err := cli.MemberAddAsLearner(ctx, []string{peerURL})
	if err != nil {
		return "", fmt.Errorf("add etcd member %s: %w", name, err)
	}
	return initialCluster(resp.Members, resp.Member.ID, name), nil
}

// initialCluster is "name=peerURL,..." of members, sorted, where the member
// id (not started yet: the cluster does not know its name) is name.
func initialCluster(members []*etcdserverpb.Member, id uint64, name string) string {
	var parts []string
	for _, m := range members {
		n := m.Name
		if m.ID == id {
			n = name
		}
		if n == "" {
			continue // another member added and not started yet
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, n+"="+u)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// PromoteMember makes the learner called name a voting member of the
// cluster cli talks to. etcd promotes a learner only once it has caught up
// with the leader ("can only promote a learner member which is in sync
// with leader"): PromoteMember asks again until it has, or ctx ends. It
// also waits while the learner has not started (it has no name until it
// runs). A member that already votes is no error: a promotion asked twice
// succeeds twice. Other refusals (rpctypes.ErrMemberNotEnoughStarted: a
// voting member is down, promoting would leave too few started) are
// returned at once.
func PromoteMember(ctx context.Context, cli *clientv3.Client, name string) error {
	t := time.NewTicker(promotePoll)
	defer t.Stop()
	for {
		err := promoteOnce(ctx, cli, name)
		if !errors.Is(err, errNotYet) && !errors.Is(err, rpctypes.ErrMemberLearnerNotReady) {
			if err != nil {
				return fmt.Errorf("promote etcd member %s: %w", name, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("promote etcd member %s: %w (%w)", name, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// errNotYet: the learner to promote has not started.
var errNotYet = errors.New("the learner has not started")

func promoteOnce(ctx context.Context, cli *clientv3.Client, name string) error {
	list, err := cli.MemberList(ctx)
	if err != nil {
		return err
	}
	unstarted := false
	for _, m := range list.Members {
		if m.Name == "" {
			unstarted = true
		}
		if m.Name != name {
			continue
		}
		if !m.IsLearner {
			return nil
		}
		_, err := cli.MemberPromote(ctx, m.ID)
		if errors.Is(err, rpctypes.ErrMemberNotLearner) {
			return nil // promoted meanwhile
		}
		return err
	}
	if unstarted {
		return errNotYet
	}
	return ErrNoMember
}

// ErrNoMember is the error of PromoteMember and RemoveMember for a name
// no member of the cluster has.
var ErrNoMember = errors.New("no member of that name")

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
	return fmt.Errorf("remove etcd member %s: %w", name, ErrNoMember)
}

// UpdatePeerURL makes the member called name advertise peerURL when it
// advertises another (a member made before skiff's etcd spoke TLS has
// http:// in the cluster's member list). It reports whether it changed
// anything.
func UpdatePeerURL(ctx context.Context, cli *clientv3.Client, name, peerURL string) (bool, error) {
	list, err := cli.MemberList(ctx)
	if err != nil {
		return false, fmt.Errorf("update etcd member %s: %w", name, err)
	}
	for _, m := range list.Members {
		if m.Name != name {
			continue
		}
		if slices.Equal(m.PeerURLs, []string{peerURL}) {
			return false, nil
		}
		if _, err := cli.MemberUpdate(ctx, m.ID, []string{peerURL}); err != nil {
			return false, fmt.Errorf("update etcd member %s: %w", name, err)
		}
		return true, nil
	}
	return false, fmt.Errorf("update etcd member %s: %w", name, ErrNoMember)
}

// Files of a server's etcd certificate in DATA-DIR/pki, named as kubeadm
// names its stacked etcd's peer certificate.
const (
	CertFile = "etcd/peer.crt"
	KeyFile  = "etcd/peer.key"
)

// ServerTLS is the TLS of this server's embedded etcd member reached at
// urls (its peer URLs and its client URL): its certificate in
// DATA-DIR/pki (pki.EtcdLeaf, issued by the cluster CA, reissued when
// the hosts change or it nears expiry) and the CA's file. Every server of
// the cluster holds the CA's key and issues its own; nothing but a server
// gets one (pki.EtcdCommonName, which etcd requires of peers and clients).
func ServerTLS(dataDir string, ca *pki.CA, urls ...string) (*TLS, error) {
	var hosts []string
	for _, raw := range urls {
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("etcd certificate: %w", err)
		}
		hosts = append(hosts, u.Hostname())
	}
	dir := filepath.Join(dataDir, "pki")
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	if _, err := ca.LoadOrIssue(certPath, keyPath, pki.EtcdLeaf(hosts...), time.Now()); err != nil {
		return nil, fmt.Errorf("etcd certificate: %w", err)
	}
	return &TLS{CertFile: certPath, KeyFile: keyPath, CAFile: filepath.Join(dir, pki.CACertFile), AllowedCN: pki.EtcdCommonName}, nil
}
