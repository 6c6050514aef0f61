package node_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/membership"
	"skiff.dev/skiff/node"
	"skiff.dev/skiff/pki"
)

// The join and TLS bootstrap of `skiff agent` (join.go); moved with it
// from cli/agent_cmd_test.go and cli/tls_test.go.

// startServerMember is the gossip member `skiff server` runs, on loopback.
func startServerMember(t *testing.T, token, apiURL string) *membership.Membership {
	t.Helper()
	mc := membership.DefaultConfig("server", token)
	mc.BindAddr, mc.BindPort, mc.Fast = "127.0.0.1", 0, true
	mc.Meta = membership.Meta{Role: membership.RoleServer, APIServer: apiURL}
	m, err := membership.Start(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

func TestJoinClusterLearnsTheAPIServer(t *testing.T) {
	srv := startServerMember(t, "tok", "http://10.0.0.1:7443")
	m, url, err := node.Join(t.Context(), node.JoinConfig{Name: "agent-1", Join: srv.LocalAddr(), Token: "tok",
		BindAddr: "127.0.0.1", Port: 0, Fast: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	defer m.Stop()
	if url != "http://10.0.0.1:7443" {
		t.Errorf("API server %q, want the server's advertised URL", url)
	}
	// A second agent joins through the first, not the server.
	m2, url2, err := node.Join(t.Context(), node.JoinConfig{Name: "agent-2", Join: m.LocalAddr(), Token: "tok",
		BindAddr: "127.0.0.1", Port: 0, Fast: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("join through an agent: %v", err)
	}
	defer m2.Stop()
	if url2 != url {
		t.Errorf("second agent learned %q, want %q", url2, url)
	}
}

func TestJoinClusterWrongToken(t *testing.T) {
	srv := startServerMember(t, "right", "http://10.0.0.1:7443")
	_, _, err := node.Join(t.Context(), node.JoinConfig{Name: "intruder", Join: srv.LocalAddr(), Token: "wrong",
		BindAddr: "127.0.0.1", Port: 0, Fast: true, Timeout: 10 * time.Second})
	want := "cannot join " + srv.LocalAddr() + ": the cluster token is wrong (gossip messages could not be decrypted)"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// A node name the cluster already has: the agent says so and names the
// member that holds it, rather than waiting for an API server it will
// never see.
func TestJoinClusterNameTaken(t *testing.T) {
	srv := startServerMember(t, "tok", "http://10.0.0.1:7443")
	first, _, err := node.Join(t.Context(), node.JoinConfig{Name: "gpu-1", Join: srv.LocalAddr(), Token: "tok",
		BindAddr: "127.0.0.1", Port: 0, Fast: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("first join: %v", err)
	}
	t.Cleanup(first.Stop)
	// The cluster has the name once the server knows it: memberlist's
	// server side of a join merges the joiner's state after answering, so
	// it may see gpu-1 just after first's Join returns.
	testwait.For(t, 10*time.Second, "the server to see gpu-1 alive", func() bool {
		for _, mem := range srv.Members() {
			if mem.Name == "gpu-1" && mem.State == membership.Alive {
				return true
			}
		}
		return false
	})
	tests := []struct{ name, taken, holder string }{
		{"another agent's name", "gpu-1", first.LocalAddr()},
		{"the server member's name (skiff up's node)", "server", srv.LocalAddr()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, err := node.Join(t.Context(), node.JoinConfig{Name: tt.taken, Join: srv.LocalAddr(), Token: "tok",
				BindAddr: "127.0.0.1", Port: 0, Fast: true, Timeout: 10 * time.Second})
			if err == nil {
				m.Stop()
				t.Fatalf("a second %q joined", tt.taken)
			}
			want := "cannot join " + srv.LocalAddr() + ": node name \"" + tt.taken + "\" is already taken in the cluster by " + tt.holder + "; choose another with --node-name"
			if err.Error() != want {
				t.Fatalf("error %q\nwant  %q", err, want)
			}
		})
	}
}

// A cluster whose server advertises no API server: the join times out
// with a message that says what is missing.
func TestJoinClusterNoAPIServer(t *testing.T) {
	mc := membership.DefaultConfig("lonely-agent", "tok")
	mc.BindAddr, mc.BindPort, mc.Fast = "127.0.0.1", 0, true
	mc.Meta = membership.Meta{Role: membership.RoleAgent}
	other, err := membership.Start(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Stop)
	_, _, err = node.Join(t.Context(), node.JoinConfig{Name: "agent-1", Join: other.LocalAddr(), Token: "tok",
		BindAddr: "127.0.0.1", Port: 0, Fast: true, Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no server member advertised an API server") {
		t.Fatalf("error %v", err)
	}
}

// TestJoinPinsTheCA: an agent gets its credentials only from a server
// whose CA matches the pin, with the right join token; a restarted agent
// reuses the ones it kept.
func TestJoinPinsTheCA(t *testing.T) {
	cp := startControlPlane(t)
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
			nc, _, err := node.Credentials(t.Context(), node.BootstrapConfig{DataDir: dir, Servers: []string{cp.URL()}, Token: tt.token, CAHash: tt.pin,
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
			again, _, err := node.Credentials(t.Context(), node.BootstrapConfig{DataDir: dir, Servers: []string{"https://127.0.0.1:1"}, Token: tt.token, CAHash: tt.pin,
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
	cp := startControlPlane(t)
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
