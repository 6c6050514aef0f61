// Package kubectltest runs the real kubectl (/usr/bin/kubectl, or
// $KUBECTL) against a skiff API handler in tests: Serve puts the handler
// behind an httptest TLS server (client-go sends a bearer token only over
// TLS) and writes a kubeconfig naming its certificate and the token, as
// the one `skiff up` writes. Tests then type kubectl as a student would.
package kubectltest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Cluster is one served handler and the kubeconfig that reaches it.
type Cluster struct {
	// URL is the https base URL of the server.
	URL string
	// Kubeconfig is the path of the kubeconfig file (context "skiff").
	Kubeconfig string
	// CAPEM is the server certificate's CA, PEM-encoded.
	CAPEM   []byte
	kubectl string
}

// Binary returns the kubectl to run: $KUBECTL, else /usr/bin/kubectl, else
// kubectl on $PATH. Without one the test fails when $CI is set (the CI
// machine image ships /usr/bin/kubectl, and hack/test.sh stops up front
// without it) and is skipped otherwise.
func Binary(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("KUBECTL"), "/usr/bin/kubectl"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p
	}
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatal("CI is set but there is no kubectl: set $KUBECTL or install /usr/bin/kubectl (1.32)")
	}
	t.Skip("no kubectl: set $KUBECTL or install /usr/bin/kubectl")
	return ""
}

// Serve serves h over TLS for the test's lifetime and writes a kubeconfig
// with token as the user's bearer token.
func Serve(t testing.TB, h http.Handler, token string) *Cluster {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	return Use(t, ts.URL, caPEM, token)
}

// Use writes a kubeconfig for a server already running at url (https)
// whose certificate chains to caPEM.
func Use(t testing.TB, url string, caPEM []byte, token string) *Cluster {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: skiff
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: skiff-admin
  user:
    token: %s
contexts:
- name: skiff
  context:
    cluster: skiff
    user: skiff-admin
current-context: skiff
`, url, base64.StdEncoding.EncodeToString(caPEM), token)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return &Cluster{URL: url, Kubeconfig: path, CAPEM: caPEM, kubectl: Binary(t)}
}

// Result is one kubectl run.
type Result struct {
	Stdout, Stderr string
	// Err is the exit error (nil on exit code 0).
	Err error
}

// Run runs kubectl with args (and stdin, if not empty) under a deadline
// of one minute. The kubectl cache goes to a temporary directory, so
// discovery and OpenAPI are fetched afresh in every test.
func (c *Cluster) Run(t testing.TB, stdin string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.kubectl, append([]string{"--kubeconfig", c.Kubeconfig, "--cache-dir", c.cacheDir(t)}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "HOME="+filepath.Dir(c.Kubeconfig))
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return Result{Stdout: out.String(), Stderr: errb.String(), Err: err}
}

// Must runs kubectl and fails the test when it exits non-zero; it returns stdout.
func (c *Cluster) Must(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	r := c.Run(t, stdin, args...)
	if r.Err != nil {
		t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.Err, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

func (c *Cluster) cacheDir(t testing.TB) string {
	d := filepath.Join(filepath.Dir(c.Kubeconfig), "cache")
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}
