package apiserver

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"skiff.dev/skiff/controlplane/store"
)

func TestSnapshotEndpoint(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name, method, token string
		wantCode            int
	}{
		{"no token", http.MethodGet, "", http.StatusUnauthorized},
		{"wrong token", http.MethodGet, "nope", http.StatusUnauthorized},
		{"POST", http.MethodPost, testToken, http.StatusMethodNotAllowed},
		{"GET", http.MethodGet, testToken, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, e.ts.URL+SnapshotPath, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.wantCode {
				t.Fatalf("code %d (%s); want %d", resp.StatusCode, body, tc.wantCode)
			}
			if tc.wantCode != http.StatusOK {
				return
			}
			if got := resp.Trailer.Get(SnapshotStatusTrailer); got != "ok" {
				t.Errorf("trailer %s = %q; want ok", SnapshotStatusTrailer, got)
			}
			// The body is a whole store holding what the server holds.
			p := filepath.Join(t.TempDir(), "snap.db")
			if err := os.WriteFile(p, body, 0o600); err != nil {
				t.Fatal(err)
			}
			info, err := store.Inspect(p)
			if err != nil {
				t.Fatalf("the snapshot does not check: %v", err)
			}
			if info.Revision != e.st.Revision() || info.Total() == 0 {
				t.Errorf("snapshot at revision %d with %d objects; the store is at %d", info.Revision, info.Total(), e.st.Revision())
			}
		})
	}
}

// A store that cannot take snapshots answers 501, saying so.
func TestSnapshotEndpointWithoutSnapshotter(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	plain := struct{ store.Store }{st} // only the Store methods
	cfg := DefaultConfig()
	cfg.Token = testToken
	srv, err := New(cfg, NewRegistry(plain, slog.New(slog.DiscardHandler)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	req, _ := http.NewRequest(http.MethodGet, ts.URL+SnapshotPath, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("code %d (%s); want 501", resp.StatusCode, body)
	}
}
