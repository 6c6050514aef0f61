package apiserver

import (
	"context"
	"io"
	"net/http"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
)

var _ Snapshotter = (*store.Bolt)(nil)

// SnapshotPath serves a consistent copy of the whole store to GET, with
// the cluster token (`skiff snapshot save FILE`). It is skiff's own path:
// a Kubernetes cluster is backed up beside kube-apiserver, with
// `etcdctl snapshot save` against etcd.
const SnapshotPath = "/skiff/v1/snapshot"

// SnapshotStatusTrailer is the HTTP trailer that ends a snapshot
// response: "ok" when the whole copy was sent, else the error that cut it
// short. A copy without it is incomplete.
const SnapshotStatusTrailer = "Skiff-Snapshot-Status"

// Snapshotter is a store that can copy itself while it serves; the server
// offers SnapshotPath when its registry's store is one (store.Bolt is;
// the etcd store is).
//
// Snapshot writes a consistent point-in-time copy of the whole store to w:
// no write is half in it, and writes go on while it streams. It blocks
// until the copy is written, w fails or ctx ends, and is safe to call
// concurrently with anything. The copy is a file `skiff snapshot restore`
// accepts: the bbolt file of store.Bolt, or an etcd snapshot.
type Snapshotter interface {
	Snapshot(ctx context.Context, w io.Writer) error
}

// serveSnapshot answers SnapshotPath and reports whether the path was it.
// The caller has authenticated the request.
func (s *Server) serveSnapshot(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != SnapshotPath {
		return false
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, api.NewStatusError(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowd,
			"the server does not allow this method on the requested resource: "+SnapshotPath+" takes GET"))
		return true
	}
	sn, ok := s.reg.store.(Snapshotter)
	if !ok {
		writeError(w, api.NewStatusError(http.StatusNotImplemented, "", "this server's store cannot take snapshots"))
		return true
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="skiff-snapshot.db"`)
	w.Header().Set("Trailer", SnapshotStatusTrailer)
	w.WriteHeader(http.StatusOK)
	status := "ok"
	if err := sn.Snapshot(r.Context(), w); err != nil {
		s.log.Warn("snapshot cut short", "remote", r.RemoteAddr, "err", err)
		status = err.Error()
	} else {
		s.log.Info("snapshot sent", "remote", r.RemoteAddr)
	}
	w.Header().Set(SnapshotStatusTrailer, status)
	return true
}
