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

	"skiff.dev/skiff/agent/membership"
	"skiff.dev/skiff/controlplane/etcd"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/controlplane/store/etcdstore"
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
func openEtcd(ctx context.Context, cfg Config, name, token string, lg *slog.Logger) (*etcdBackend, error) {
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
		mc := etcd.Config{Name: name, DataDir: dir, PeerURL: peer, ClientURL: ec.ClientListen, Log: lg}
		switch {
		case memberDataExists(dir):
			lg.Info("restarting the etcd member from its data", "dir", dir)
		case ec.ClusterInit:
			mc.InitialCluster = name + "=" + peer
		default:
			jr, err := requestJoinRetry(ctx, ec.JoinServer, token, JoinRequest{Name: name, PeerURL: peer}, lg)
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

// skiffHandler serves JoinPath and LeaderPath (behind the API token).
func (cp *ControlPlane) skiffHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+JoinPath, cp.serveJoin)
	mux.HandleFunc("GET "+LeaderPath, cp.serveLeader)
	return mux
}

func (cp *ControlPlane) serveJoin(w http.ResponseWriter, r *http.Request) {
	if cp.etcd.member == nil {
		http.Error(w, "this server uses an external etcd: start the new server with the same --etcd-endpoints", http.StatusBadRequest)
		return
	}
	var req JoinRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		http.Error(w, fmt.Sprintf("decode join request: %v", err), http.StatusBadRequest)
		return
	}
	var errs []string
	if req.Name == "" {
		errs = append(errs, "name: required")
	}
	if _, err := parseHTTPURL(req.PeerURL); err != nil {
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
		if errors.Is(err, rpctypes.ErrUnhealthy) {
			// etcd adds a member only once every member has been
			// connected for a few seconds (the last one added, too):
			// the joining server tries again.
			code = http.StatusServiceUnavailable
		}
		http.Error(w, err.Error(), code)
		return
	}
	cp.log.Info("added etcd member", "name", req.Name, "peer", req.PeerURL)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(JoinResponse{InitialCluster: initial})
}

func (cp *ControlPlane) serveLeader(w http.ResponseWriter, r *http.Request) {
	li, _, err := currentLeader(r.Context(), cp.etcd.client)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(LeaderStatus{Leader: li, Self: cp.elector.self, Leading: cp.elector.Leading()})
}
