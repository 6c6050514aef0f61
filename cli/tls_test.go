package cli

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/pki"
)

// TestJoinPinsTheCA: an agent gets its credentials only from a server
// whose CA matches the pin, with the right join token; a restarted agent
// reuses the ones it kept.
func TestJoinPinsTheCA(t *testing.T) {
	cp, _ := startTestControlPlane(t, t.TempDir())
	other, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lg := slog.New(slog.DiscardHandler)
	tests := []struct {
		name   string
		token  string
		pin    string
		skip   bool
		want   string // "" = joins
		wantIs error
	}{
		{"the right pin", cp.JoinToken(), cp.CA().Hash(), false, "", nil},
		{"another CA's pin", cp.JoinToken(), other.Hash(), false, "does not match", controlplane.ErrCAHash},
		{"no pin", cp.JoinToken(), "", false, "--discovery-token-ca-cert-hash", nil},
		{"no pin, verification skipped", cp.JoinToken(), "", true, "", nil},
		{"a malformed pin", cp.JoinToken(), "sha256:abc", false, "64 hex digits", controlplane.ErrCAHash},
		{"the admin token is not the join token", cp.Token(), cp.CA().Hash(), false, "join token is wrong", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			nc, err := nodeCredentials(t.Context(), nodeJoin{DataDir: dir, Server: cp.URL(), Token: tt.token, CAHash: tt.pin,
				UnsafeSkipCA: tt.skip, Name: "gpu-1", Addresses: []string{"127.0.0.1"}, Log: lg})
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("join: %v, want an error with %q", err, tt.want)
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Fatalf("join: %v, want errors.Is %v", err, tt.wantIs)
				}
				if _, err := pki.LoadNodeCredentials(pki.NodeDir(dir)); !pki.IsNotExist(err) {
					t.Fatalf("a refused join kept credentials: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cert, err := tls.X509KeyPair(nc.ClientCert, nc.ClientKey)
			if err != nil {
				t.Fatal(err)
			}
			x, _ := x509.ParseCertificate(cert.Certificate[0])
			if user, groups := pki.Identity(x); user != "system:node:gpu-1" || len(groups) != 1 || groups[0] != "system:nodes" {
				t.Fatalf("client certificate of %s %v", user, groups)
			}
			// A restart reuses what was kept, even without the server.
			again, err := nodeCredentials(t.Context(), nodeJoin{DataDir: dir, Server: "https://127.0.0.1:1", Token: tt.token, CAHash: tt.pin,
				UnsafeSkipCA: tt.skip, Name: "gpu-1", Addresses: []string{"127.0.0.1"}, Log: lg})
			if err != nil || string(again.ClientCert) != string(nc.ClientCert) {
				t.Fatalf("restart: %v; want the kept credentials", err)
			}
		})
	}
}

// TestNodeCertificateIsTheNodesIdentity: the API server accepts a node's
// client certificate and sees user system:node:NAME in system:nodes
// (kubectl auth whoami, with a kubeconfig holding only the certificate).
func TestNodeCertificateIsTheNodesIdentity(t *testing.T) {
	cp, _ := startTestControlPlane(t, t.TempDir())
	nc, err := cp.IssueNodeCredentials("gpu-7", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	kc := kubectltest.Use(t, cp.URL(), cp.CA().CertPEM(), "unused")
	kc.Kubeconfig = filepath.Join(t.TempDir(), "node.kubeconfig")
	if err := client.WriteKubeconfig(kc.Kubeconfig, client.Config{Server: cp.URL(), CAData: nc.CA, CertData: nc.ClientCert, KeyData: nc.ClientKey}); err != nil {
		t.Fatal(err)
	}
	out := kc.Must(t, "", "auth", "whoami", "-o", "json")
	var review struct {
		Status struct {
			UserInfo struct {
				Username string   `json:"username"`
				Groups   []string `json:"groups"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &review); err != nil {
		t.Fatalf("whoami: %v\n%s", err, out)
	}
	u := review.Status.UserInfo
	if u.Username != "system:node:gpu-7" || !strings.Contains(strings.Join(u.Groups, ","), "system:nodes") {
		t.Fatalf("the node is %q in %v, want system:node:gpu-7 in system:nodes", u.Username, u.Groups)
	}
}

// TestKubectlWithTheWrittenKubeconfig: with only the kubeconfig `skiff
// up` writes (writeKubeconfigs), the real kubectl reaches the server
// over TLS, in a home where ~/.kube/config held another context that
// stays.
func TestKubectlWithTheWrittenKubeconfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("SUDO_USER", "")
	kubeDir := filepath.Join(home, ".kube")
	if err := os.MkdirAll(kubeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	other := "apiVersion: v1\nkind: Config\nclusters: [{name: lab, cluster: {server: \"https://10.9.9.9:6443\"}}]\nusers: [{name: lab, user: {token: x}}]\ncontexts: [{name: lab, context: {cluster: lab, user: lab}}]\ncurrent-context: lab\n"
	if err := os.WriteFile(filepath.Join(kubeDir, "config"), []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	cp, _ := startTestControlPlane(t, dataDir)
	if err := writeKubeconfigs(cp.ClientConfig(), dataDir, true, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(home, ".skiff", "kubeconfig"), filepath.Join(kubeDir, "config"), filepath.Join(dataDir, "kubeconfig")} {
		t.Run(filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p), func(t *testing.T) {
			kc := kubectltest.Use(t, cp.URL(), cp.CA().CertPEM(), "unused")
			kc.Kubeconfig = p
			out := kc.Must(t, "", "--context", "skiff", "get", "namespaces")
			if !strings.Contains(out, "kube-node-lease") {
				t.Fatalf("kubectl get namespaces:\n%s", out)
			}
			kc.Must(t, "", "--context", "skiff", "get", "nodes")
		})
	}
	if out := runCLI(t, "--kubeconfig", filepath.Join(home, ".skiff", "kubeconfig"), "get", "ns"); out.code != 0 || !strings.Contains(out.out, "kube-node-lease") {
		t.Fatalf("skiff get ns with the same kubeconfig: %+v", out)
	}
	if out := runCLI(t, "kubeconfig", "--data-dir", dataDir); out.code != 0 || !strings.Contains(out.out, "certificate-authority-data") || !strings.Contains(out.out, cp.URL()) {
		t.Fatalf("skiff kubeconfig: %+v", out)
	}
	b, _ := os.ReadFile(filepath.Join(kubeDir, "config"))
	if !strings.Contains(string(b), "10.9.9.9") {
		t.Fatalf("the merge dropped the other context:\n%s", b)
	}
}
