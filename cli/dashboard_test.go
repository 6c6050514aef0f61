package cli

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/apiserver"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/dashboard"
	"skiff.dev/skiff/pki/pkitest"
)

// dashboardCluster is a real API server with the dashboard, over TLS, and
// a client of it with the admin token.
func dashboardCluster(t *testing.T) (*client.Client, *httptest.Server) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "skiff.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logger := slog.New(slog.DiscardHandler)
	reg := apiserver.NewRegistry(st, logger)
	if err := reg.EnsureDefaults(context.Background()); err != nil {
		t.Fatal(err)
	}
	dash, err := dashboard.New(dashboard.Config{Client: apiserver.NewLocal(reg)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := apiserver.DefaultConfig()
	cfg.Token = "t"
	cfg.Dashboard = dash
	srv, err := apiserver.New(cfg, reg, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	ts, caPEM := pkitest.StartAPIServer(t, srv.Handler())
	c, err := client.New(client.Config{Server: ts.URL, Token: "t", CAData: caPEM})
	if err != nil {
		t.Fatal(err)
	}
	return c, ts
}

// `skiff dashboard` prints a one-time URL on the API server that lands
// on the view its arguments name; `--no-browser` opens nothing.
func TestDashboardCommand(t *testing.T) {
	c, ts := dashboardCluster(t)
	noRedirect := *ts.Client()
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, tc := range []struct {
		name     string
		args     []string
		location string
		errText  string
	}{
		{"cluster", []string{"dashboard", "--no-browser"}, "/dashboard/", ""},
		{"a pod's chain", []string{"dashboard", "pod/gpu-test", "-n", "gpu-demo", "--no-browser"}, "/dashboard/#/chain/gpu-demo/gpu-test", ""},
		{"pod NAME", []string{"dashboard", "pod", "web", "--no-browser"}, "/dashboard/#/chain/default/web", ""},
		{"a node's sequence", []string{"dashboard", "node/lab-1", "--no-browser"}, "/dashboard/#/sequence/lab-1", ""},
		{"loops", []string{"dashboard", "loops", "--no-browser"}, "/dashboard/#/loops", ""},
		{"an autoscaler's plot", []string{"dashboard", "hpa/php-apache", "-n", "web", "--no-browser"}, "/dashboard/#/hpa/web/php-apache", ""},
		{"a deployment is no view", []string{"dashboard", "deploy/web", "--no-browser"}, "", "dashboard takes pod/NAME, node/NAME, hpa/NAME, loops or nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, c, "", tc.args...)
			if tc.errText != "" {
				if res.code == 0 || !strings.Contains(res.err, tc.errText) {
					t.Fatalf("exit %d, stderr %q: want an error %q", res.code, res.err, tc.errText)
				}
				return
			}
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.err)
			}
			url := strings.TrimSpace(res.out)
			if !strings.HasPrefix(url, ts.URL+dashboard.LoginPath+"?code=") {
				t.Fatalf("printed %q, want a login URL on %s", res.out, ts.URL)
			}
			for range 2 { // the second time the code is spent
				resp, err := noRedirect.Get(url)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusSeeOther {
					if got := resp.Header.Get("Location"); got != tc.location {
						t.Errorf("lands on %q, want %q", got, tc.location)
					}
					continue
				}
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("GET the URL: %s", resp.Status)
				}
			}
		})
	}
}

// `skiff trace pod NAME -o html` writes the chain view with the trace in it.
func TestTraceHTML(t *testing.T) {
	c, _ := dashboardCluster(t)
	pod := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := c.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	res := run(t, c, "", "trace", "pod", "web", "-o", "html")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.err)
	}
	wantContains(t, res.out, "<!doctype html>", `id="skiff-chain"`, `"component":"apiserver"`, `"resourceVersion":"`, "function renderChain")
	if res := run(t, c, "", "trace", "pod", "nope", "-o", "html"); res.code == 0 || !strings.Contains(res.err, "not found") {
		t.Errorf("a missing pod: exit %d, stderr %q", res.code, res.err)
	}
}
