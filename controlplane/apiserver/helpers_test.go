package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/clienttest"
	"skiff.dev/skiff/controlplane/store"
)

const testToken = "test-token"

// env is one API server over a real (unsynced) bbolt store.
//
// Tests that type the real kubectl (internal/kubectltest) run in parallel
// (t.Parallel): each has an env of its own, and most of their time is
// kubectl's processes starting and its retries waiting, which overlap.
type env struct {
	t     testing.TB
	st    *store.Bolt
	reg   *Registry
	srv   *Server
	ts    *httptest.Server
	local *Local
}

func newEnv(t testing.TB) *env { return newEnvWith(t, store.Options{NoSync: true}) }

// defaultsDB is the file of a store that holds what EnsureDefaults
// writes (the system namespaces, the storage class, the default RBAC
// roles and bindings), made once per test binary. Every env starts from
// a copy of it: EnsureDefaults on a fresh store is some 50 creates
// through admission (a fifth of a second under the race detector, paid
// by each of the hundred-odd envs); on the copy it only reads and finds
// everything there, which is what a server restarted on its data does.
var defaultsDB = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "skiff-apiserver-defaults-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "skiff.db")
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		return nil, err
	}
	err = NewRegistry(st, slog.New(slog.DiscardHandler)).EnsureDefaults(context.Background())
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return os.ReadFile(path)
})

// defaultsStore opens a bbolt store in a temporary directory that starts
// as a copy of defaultsDB; it is closed when the test ends.
func defaultsStore(t testing.TB, opts store.Options) *store.Bolt {
	t.Helper()
	db, err := defaultsDB()
	if err != nil {
		t.Fatalf("store with the defaults: %v", err)
	}
	path := filepath.Join(t.TempDir(), "skiff.db")
	if err := os.WriteFile(path, db, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newEnvWith(t testing.TB, opts store.Options) *env {
	t.Helper()
	st := defaultsStore(t, opts)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := NewRegistry(st, logger)
	if err := reg.EnsureDefaults(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Token = testToken
	srv, err := New(cfg, reg, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop) // after ts.Close, before the store closes
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &env{t: t, st: st, reg: reg, srv: srv, ts: ts, local: srv.Local()}
}

// do sends a request with the token; body is a string, []byte, nil or a
// value encoded as JSON.
func (e *env) do(method, path string, body any, header ...string) (int, []byte) {
	e.t.Helper()
	return e.doToken(testToken, method, path, body, header...)
}

func (e *env) doToken(token, method, path string, body any, header ...string) (int, []byte) {
	e.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// must sends a request and fails the test unless the code is want.
func (e *env) must(want int, method, path string, body any, header ...string) []byte {
	e.t.Helper()
	code, b := e.do(method, path, body, header...)
	if code != want {
		e.t.Fatalf("%s %s: got %d, want %d: %s", method, path, code, want, b)
	}
	return b
}

// status decodes a Status body and checks code and reason.
func status(t testing.TB, b []byte, code int, reason api.StatusReason) api.Status {
	t.Helper()
	var st api.Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("not a Status: %v: %s", err, b)
	}
	if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != "Failure" || int(st.Code) != code || st.Reason != reason {
		t.Fatalf("status: got kind=%q code=%d reason=%q status=%q, want Status %d %s: %s", st.Kind, st.Code, st.Reason, st.Status, code, reason, b)
	}
	return st
}

func decode[T any](t testing.TB, b []byte) *T {
	t.Helper()
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %T: %v: %s", v, err, b)
	}
	return v
}

func pod(name string, labels map[string]string) *api.Pod {
	return &api.Pod{
		TypeMeta:   api.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec:       api.PodSpec{Containers: []api.Container{{Name: "c", Image: "busybox:1.36"}}},
	}
}

func configMap(ns, name string) *api.ConfigMap {
	return &api.ConfigMap{
		TypeMeta:   api.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: ns},
		Data:       map[string]string{"k": "v"},
	}
}

// deployment is clienttest's fixture with its type meta, as an HTTP body needs.
func deployment(name string, replicas int32) *api.Deployment {
	d := clienttest.Deployment(name, replicas)
	d.TypeMeta = api.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	return d
}

// watch opens an HTTP watch and reads it line by line; header is
// name, value pairs.
func (e *env) watch(path string, header ...string) *httpWatch {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.ts.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		cancel()
		e.t.Fatalf("watch %s: %d %s", path, resp.StatusCode, b)
	}
	w := &httpWatch{t: e.t, cancel: cancel, events: make(chan api.WatchEvent, 100), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer close(w.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			var ev api.WatchEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				w.t.Errorf("bad watch line %q: %v", sc.Text(), err)
				return
			}
			w.events <- ev
		}
	}()
	e.t.Cleanup(w.stop)
	return w
}

type httpWatch struct {
	t      testing.TB
	cancel context.CancelFunc
	events chan api.WatchEvent
	done   chan struct{}
}

func (w *httpWatch) stop() { w.cancel(); <-w.done }

// next returns the next event, failing after a deadline.
func (w *httpWatch) next() api.WatchEvent {
	w.t.Helper()
	select {
	case ev, ok := <-w.events:
		if !ok {
			w.t.Fatal("watch stream ended")
		}
		return ev
	case <-time.After(5 * time.Second):
		w.t.Fatal("no watch event within 5s")
	}
	return api.WatchEvent{}
}

// expect reads the next event and checks its type and object name.
func (w *httpWatch) expect(typ api.WatchEventType, name string) api.WatchEvent {
	w.t.Helper()
	ev := w.next()
	var m struct {
		Metadata api.ObjectMeta `json:"metadata"`
	}
	_ = json.Unmarshal(ev.Object, &m)
	if ev.Type != typ || m.Metadata.Name != name {
		w.t.Fatalf("watch event: got %s %q, want %s %q: %s", ev.Type, m.Metadata.Name, typ, name, ev.Object)
	}
	return ev
}

// ended waits for the stream to end.
func (w *httpWatch) ended() {
	w.t.Helper()
	select {
	case <-w.done:
	case <-time.After(5 * time.Second):
		w.t.Fatal("watch stream did not end within 5s")
	}
}

func httptestBody(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }

// tlsServer is a Server served as for real: Run, with TLS, on a loopback
// port (the connection timeouts and TLS live in http.Server, which
// env's httptest server does not use).
type tlsServer struct {
	*Server
	// base is "https://ADDR".
	base     string
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
	stopErr  error
}

// startTLSServer runs a Server over e's registry (nil: a new env's) with
// testToken and testServerTLS on 127.0.0.1 and a ShutdownTimeout of a
// second, its config then changed by mutate (nil: none), until stop or
// the end of the test.
func startTLSServer(t *testing.T, e *env, mutate func(*Config)) *tlsServer {
	t.Helper()
	if e == nil {
		e = newEnv(t)
	}
	cfg := DefaultConfig()
	cfg.Token, cfg.Listen, cfg.TLS = testToken, "127.0.0.1:0", testServerTLS(t)
	cfg.ShutdownTimeout = time.Second
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg, e.reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &tlsServer{Server: srv, base: "https://" + srv.Addr(), cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// stop cancels Run and waits for it: its error, or one when it has not
// returned within five seconds. Safe twice (the second call answers the
// first's error).
func (s *tlsServer) stop() error {
	s.stopOnce.Do(func() {
		s.cancel()
		select {
		case err := <-s.done:
			if err != nil {
				s.stopErr = fmt.Errorf("run: %w", err)
			}
		case <-time.After(5 * time.Second):
			s.stopErr = errors.New("run did not return within 5s of its context's end")
		}
	})
	return s.stopErr
}
