package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/election"
	"skiff.dev/skiff/controlplane/etcd"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/controlplane/store/etcdstore"
	"skiff.dev/skiff/membership"
	"skiff.dev/skiff/pki"
)

// ServersPrefix is the etcd key prefix under which each server records
// its API URL and gossip address (serverRecord).
const ServersPrefix = "/skiff/servers/"

// serverRecord is what a server records under ServersPrefix+name.
type serverRecord struct {
	APIServer string `json:"apiServer"`
	Gossip    string `json:"gossip"`
}

// etcdBackend is the store of a server on etcd: its embedded member (nil
// with an external etcd), a client, and the store over it.
type etcdBackend struct {
	name   string
	member *etcd.Server
	client *clientv3.Client
	store  store.Store
}

// openEtcd starts (or restarts, or joins) the embedded member, or
// connects to the external etcd, and opens the store on it.
func openEtcd(ctx context.Context, cfg Config, name, token string, ca *pki.CA, lg *slog.Logger) (*etcdBackend, error) {
	ec := cfg.Etcd
	b := &etcdBackend{name: name}
	if ec.embedded() {
		dir := filepath.Join(cfg.DataDir, "etcd")
		peer := ec.PeerAdvertise
		if peer == "" {
			peer = ec.PeerListen
		}
		// The member listens on its peer URL and advertises it: the
		// advertised one, so that the others can reach it.
		tlsc, err := etcd.ServerTLS(cfg.DataDir, ca, peer, ec.PeerListen, ec.ClientListen)
		if err != nil {
			return nil, err
		}
		mc := etcd.Config{Name: name, DataDir: dir, PeerURL: peer, ClientURL: ec.ClientListen, TLS: tlsc, Log: lg}
		switch {
		case memberDataExists(dir):
			lg.Info("restarting the etcd member from its data", "dir", dir)
		case ec.ClusterInit:
			mc.InitialCluster = name + "=" + peer
		default:
			jr, err := requestJoinRetry(ctx, ec.JoinServer, token, ca, api.JoinRequest{Name: name, PeerURL: peer}, lg)
			if err != nil {
				return nil, err
			}
			lg.Info("added as an etcd member", "through", ec.JoinServer, "initial-cluster", jr.InitialCluster)
			mc.InitialCluster, mc.ClusterState = jr.InitialCluster, etcd.ClusterStateExisting
		}
		m, err := etcd.StartEmbedded(ctx, mc)
		if err != nil {
			return nil, fmt.Errorf("start etcd member %s: %w", name, err)
		}
		if !m.IsLearner() {
			// A member made when etcd's peer traffic was plain http still
			// advertises its http:// URL: the others would dial it there.
			if changed, err := etcd.UpdatePeerURL(ctx, m.Client(), name, peer); err != nil {
				lg.Warn("update this member's peer URL", "err", err)
			} else if changed {
				lg.Info("this etcd member now advertises its TLS peer URL", "peer", peer)
			}
		}
		if m.IsLearner() {
			// Added as a learner (a join, or a restart of one that stopped
			// before it was promoted): promoted once it has caught up.
			if err := promote(ctx, m, ec.JoinServer, name, token, ca, lg); err != nil {
				m.Stop()
				return nil, err
			}
		}
		b.member, b.client = m, m.Client()
	} else {
		cli, err := clientv3.New(clientv3.Config{Endpoints: ec.Endpoints, DialTimeout: 5 * time.Second, Context: context.WithoutCancel(ctx)})
		if err != nil {
			return nil, fmt.Errorf("connect to etcd %s: %w", strings.Join(ec.Endpoints, ","), err)
		}
		b.client = cli
	}
	// Every server compacts (5 minutes, as kube-apiserver), taking turns
	// through etcdstore.CompactKey.
	st, err := etcdstore.New(ctx, b.client, etcdstore.Options{Logger: lg, CompactInterval: etcdstore.DefaultOptions().CompactInterval})
	if err != nil {
		b.close()
		return nil, fmt.Errorf("open etcd store: %w", err)
	}
	b.store = st
	return b, nil
}

// promote asks the server at joinServer to make the learner m a voting
// member, asking again while that server answers busy (up to
// joinTimeout), then waits until m knows it votes. A learner serves no
// client requests: the store opens after this.
func promote(ctx context.Context, m *etcd.Server, joinServer, name, token string, ca *pki.CA, lg *slog.Logger) error {
	if joinServer == "" {
		return fmt.Errorf("etcd member %s is a learner (added, never promoted): start this server with --join-server URL --token-file F to have it promoted", name)
	}
	c, err := client.New(client.Config{Server: joinServer, Token: token, CAData: ca.CertPEM()})
	if err != nil {
		return fmt.Errorf("promote etcd member %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	err = busyRetry().Retry(ctx, api.IsServiceUnavailable,
		func(err error) {
			lg.Info("the cluster cannot promote this member yet; asking again", "through", joinServer, "err", err)
		},
		func(ctx context.Context) error {
			resp, err := c.Do(ctx, http.MethodPost, api.MemberPath(name)+"/promote", nil)
			if err == nil {
				resp.Body.Close()
			}
			return err
		})
	if err != nil {
		return fmt.Errorf("promote etcd member %s through %s: %w", name, joinServer, err)
	}
	if err := m.WaitPromoted(ctx); err != nil {
		return err
	}
	lg.Info("promoted to a voting etcd member", "through", joinServer)
	return nil
}

// close closes the store, the client and the member. Safe twice.
func (b *etcdBackend) close() error {
	var errs []error
	if b.store != nil {
		errs = append(errs, b.store.Close())
	}
	if b.member != nil {
		b.member.Stop()
	} else if b.client != nil {
		errs = append(errs, b.client.Close())
	}
	return errors.Join(errs...)
}

// meetServers records this server under ServersPrefix and joins the gossip
// of the others recorded there. None answering is logged, not fatal: they
// may all be down, and they join us when they come back.
func (b *etcdBackend) meetServers(ctx context.Context, name, apiURL string, m *membership.Membership, lg *slog.Logger) error {
	rec, err := json.Marshal(serverRecord{APIServer: apiURL, Gossip: m.LocalAddr()})
	if err != nil {
		return fmt.Errorf("record server: %w", err)
	}
	if _, err := b.client.Put(ctx, ServersPrefix+name, string(rec)); err != nil {
		return fmt.Errorf("record server %s in etcd: %w", name, err)
	}
	resp, err := b.client.Get(ctx, ServersPrefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("read servers from etcd: %w", err)
	}
	var others []string
	for _, kv := range resp.Kvs {
		var r serverRecord
		if string(kv.Key) == ServersPrefix+name || json.Unmarshal(kv.Value, &r) != nil || r.Gossip == "" {
			continue
		}
		others = append(others, r.Gossip)
	}
	if len(others) == 0 {
		return nil
	}
	if n, err := m.Join(others); err != nil {
		lg.Warn("join the other servers' gossip", "servers", others, "err", err)
	} else {
		lg.Info("joined the other servers' gossip", "answered", n, "servers", others)
	}
	return nil
}

// otherServers are the API URLs of the other servers of this cluster
// that gossip knows alive: with etcd those that recorded themselves under
// ServersPrefix (only a server can write to etcd); a gossip member that
// says it is a server is no server by that alone. With bbolt there is no
// other server.
func (cp *ControlPlane) otherServers() []string {
	if cp.etcd == nil || cp.gossip == nil {
		return nil
	}
	alive := cp.gossip.APIServers()
	if len(alive) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cp.etcd.client.Get(ctx, ServersPrefix, clientv3.WithPrefix())
	if err != nil {
		cp.log.Warn("read the servers' records from etcd", "err", err)
		return nil
	}
	recorded := map[string]bool{}
	for _, kv := range resp.Kvs {
		var r serverRecord
		if json.Unmarshal(kv.Value, &r) == nil && r.APIServer != "" {
			recorded[r.APIServer] = true
		}
	}
	var out []string
	for _, u := range alive {
		switch {
		case u == cp.advURL:
		case recorded[u]:
			out = append(out, u)
		default:
			cp.log.Debug("a gossip member advertises an API server no server recorded; ignored", "url", u)
		}
	}
	return out
}

// skiffHandler serves api.JoinPath and api.LeaderPath (behind the API token).
func (cp *ControlPlane) skiffHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+api.JoinPath, cp.serveJoin)
	mux.HandleFunc("POST "+api.JoinPath+"/{name}/promote", cp.servePromote)
	mux.HandleFunc("DELETE "+api.JoinPath+"/{name}", cp.serveRemoveMember)
	mux.HandleFunc("GET "+api.LeaderPath, cp.serveLeader)
	mux.HandleFunc("GET "+SecretsPath, cp.serveSecrets) // bootstrap.go
	return mux
}

func (cp *ControlPlane) serveJoin(w http.ResponseWriter, r *http.Request) {
	if cp.etcd.member == nil {
		http.Error(w, "this server uses an external etcd: start the new server with the same --etcd-endpoints", http.StatusBadRequest)
		return
	}
	var req api.JoinRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		http.Error(w, fmt.Sprintf("decode join request: %v", err), http.StatusBadRequest)
		return
	}
	var errs []string
	if req.Name == "" {
		errs = append(errs, "name: required")
	}
	if err := checkEtcdURL(req.PeerURL); err != nil {
		errs = append(errs, "peerURL: "+err.Error())
	}
	if len(errs) > 0 {
		http.Error(w, strings.Join(errs, "; "), http.StatusBadRequest)
		return
	}
	initial, err := etcd.AddMember(r.Context(), cp.etcd.client, req.Name, req.PeerURL)
	if err != nil {
		cp.log.Warn("add etcd member", "name", req.Name, "peer", req.PeerURL, "err", err)
		code := http.StatusConflict
		if errors.Is(err, rpctypes.ErrUnhealthy) || errors.Is(err, rpctypes.ErrTooManyLearners) {
			// etcd adds a member only once every member has been
			// connected for a few seconds (the last one added, too),
			// and one learner at a time (the last one is promoted once
			// it has caught up): the joining server tries again.
			code = http.StatusServiceUnavailable
		}
		http.Error(w, err.Error(), code)
		return
	}
	cp.log.Info("added etcd member", "name", req.Name, "peer", req.PeerURL)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(api.JoinResponse{InitialCluster: initial})
}

// memberTimeout bounds a promotion or removal the API waits for: etcd's
// checks pass within seconds, or the caller is told to ask again (503).
const memberTimeout = 20 * time.Second

// servePromote promotes the learner the path names, waiting while it
// catches up with the leader.
func (cp *ControlPlane) servePromote(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if cp.etcd.member == nil {
		api.WriteStatus(w, api.NewBadRequest("this server uses an external etcd: it adds and promotes no members"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), memberTimeout)
	defer cancel()
	err := etcd.PromoteMember(ctx, cp.etcd.client, name)
	switch {
	case err == nil:
		cp.log.Info("promoted etcd member", "name", name)
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, etcd.ErrNoMember):
		api.WriteStatus(w, api.NewStatusError(http.StatusNotFound, api.ReasonNotFound, err.Error()))
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, rpctypes.ErrMemberNotEnoughStarted), errors.Is(err, rpctypes.ErrUnhealthy):
		api.WriteStatus(w, api.NewStatusError(http.StatusServiceUnavailable, api.ReasonServiceUnavail, err.Error()))
	default:
		cp.log.Warn("promote etcd member", "name", name, "err", err)
		api.WriteStatus(w, api.NewInternal(err))
	}
}

// serveRemoveMember takes the member the path names out of the etcd
// cluster for good, and its server's record (ServersPrefix) with it. It
// refuses this server's own member: the server would lose its store.
func (cp *ControlPlane) serveRemoveMember(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	switch {
	case cp.etcd.member == nil:
		api.WriteStatus(w, api.NewBadRequest("this server uses an external etcd: its members are its operator's (etcdctl member remove)"))
		return
	case name == cp.etcd.name:
		api.WriteStatus(w, api.NewStatusError(http.StatusConflict, api.ReasonConflict,
			fmt.Sprintf("etcd member %s is the member of the server that answered: ask another server (--kubeconfig with its address)", name)))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), memberTimeout)
	defer cancel()
	err := etcd.RemoveMember(ctx, cp.etcd.client, name)
	switch {
	case err == nil:
	case errors.Is(err, etcd.ErrNoMember):
		api.WriteStatus(w, api.NewStatusError(http.StatusNotFound, api.ReasonNotFound, err.Error()))
		return
	case errors.Is(err, rpctypes.ErrUnhealthy), errors.Is(err, rpctypes.ErrMemberNotEnoughStarted), errors.Is(err, context.DeadlineExceeded):
		// etcd's strict reconfiguration check: the members left must have
		// been connected for a few seconds. The caller asks again.
		api.WriteStatus(w, api.NewStatusError(http.StatusServiceUnavailable, api.ReasonServiceUnavail, err.Error()))
		return
	default:
		cp.log.Warn("remove etcd member", "name", name, "err", err)
		api.WriteStatus(w, api.NewInternal(err))
		return
	}
	cp.log.Info("removed etcd member", "name", name)
	if _, err := cp.etcd.client.Delete(ctx, ServersPrefix+name); err != nil {
		cp.log.Warn("forget the removed server's record", "name", name, "err", err)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (cp *ControlPlane) serveLeader(w http.ResponseWriter, r *http.Request) {
	li, _, err := election.Current(r.Context(), cp.etcd.client)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(api.LeaderStatus{Leader: li, Self: cp.elector.Self(), Leading: cp.elector.Leading()})
}
