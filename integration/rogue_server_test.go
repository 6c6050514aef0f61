package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/membership"
	"skiff.dev/skiff/pki"
)

// rogueServer is a student's laptop holding only the join token: it got
// a node's credentials from the real server (as any join-token holder
// may), serves HTTPS with the node's serving certificate (signed by the
// cluster CA, valid for its own address) and gossips that it is an API
// server. It counts every HTTP request that reaches it.
type rogueServer struct {
	url  string
	hits atomic.Int64
	// auth counts the requests that carried a credential (a token or a
	// client certificate).
	auth atomic.Int64
}

func startRogueServer(t *testing.T, serverURL, gossipAddr, joinToken, pin string) *rogueServer {
	t.Helper()
	ctx := t.Context()
	ca, err := controlplane.FetchCA(ctx, serverURL, pin, false)
	if err != nil {
		t.Fatal(err)
	}
	const ip = "127.0.0.2" // loopback, not the server's address
	nc, err := controlplane.RequestNodeCredentials(ctx, serverURL, ca, joinToken, "aaa-laptop", []string{ip})
	if err != nil {
		t.Fatalf("the join token holder's node credentials: %v", err)
	}
	cert, err := tls.X509KeyPair(nc.ServingCert, nc.ServingKey)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	r := &rogueServer{url: "https://" + ln.Addr().String()}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			r.hits.Add(1)
			if req.Header.Get("Authorization") != "" || (req.TLS != nil && len(req.TLS.PeerCertificates) > 0) {
				r.auth.Add(1)
			}
			http.Error(w, "a laptop, not an API server", http.StatusTeapot)
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert},
		ErrorLog:  log.New(io.Discard, "", 0), // the refused handshakes
	}
	go srv.ServeTLS(ln, "", "") //nolint:errcheck // stopped by Close
	t.Cleanup(func() { srv.Close() })

	mc := membership.DefaultConfig("aaa-laptop", joinToken) // sorts before the real server
	mc.BindAddr, mc.BindPort, mc.Fast, mc.Log = ip, 0, true, slog.New(slog.DiscardHandler)
	mc.Meta = membership.Meta{Role: membership.RoleServer, APIServer: r.url}
	mc.Join = []string{gossipAddr}
	m, err := membership.Start(mc)
	if err != nil {
		t.Fatalf("the laptop's gossip: %v", err)
	}
	t.Cleanup(m.Stop)
	return r
}

// TestNoOnePosesAsTheAPIServer: a process holding only the join token
// obtains node credentials, serves HTTPS with them and gossips itself as
// an API server (sorting first). An agent joining through gossip, the
// CLI (its kubeconfig's server and failover list) and a server joining
// through it refuse it: no request reaches it, none with the admin token
// or a node's certificate, and the cluster keeps working.
func TestNoOnePosesAsTheAPIServer(t *testing.T) {
	t0 := time.Now()
	bin, home := skiffBinary(t), t.TempDir()
	t.Logf("binary built after %v", time.Since(t0))
	dataDir := filepath.Join(t.TempDir(), "server")
	listen, gossipPort := freeLoopbackAddr(t), freePort(t)
	server := startProc(t, bin, home, "server", "--no-agent", "--node-name", "s0", "--data-dir", dataDir, "--listen", listen,
		"--gossip-port", strconv.Itoa(gossipPort), "--advertise-address", "127.0.0.1")
	serverURL := "https://" + listen
	var adminToken string
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		select {
		case <-server.done:
			t.Fatalf("server exited: %v\n%s", server.err, server.out.String())
		default:
		}
		b, err := os.ReadFile(filepath.Join(dataDir, "token"))
		if err != nil {
			return false, err.Error()
		}
		adminToken = strings.TrimSpace(string(b))
		ca, err := serverCA(dataDir)
		if err != nil {
			return false, err.Error()
		}
		c, err := client.New(client.Config{Server: serverURL, Token: adminToken, CAData: ca})
		if err != nil {
			return false, err.Error()
		}
		_, err = client.Get[*api.Namespace](context.Background(), c, "", "default")
		return err == nil, fmt.Sprint(err)
	})
	t.Logf("server up after %v", time.Since(t0))
	caPEM, err := serverCA(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.FromPEM(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	joinToken, err := os.ReadFile(filepath.Join(dataDir, controlplane.JoinTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	gossipAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(gossipPort))
	rogue := startRogueServer(t, serverURL, gossipAddr, strings.TrimSpace(string(joinToken)), ca.Hash())
	start := time.Now()
	t.Cleanup(func() { t.Logf("stopped after %v", time.Since(t0)) })
	defer func() { t.Logf("the rogue's part took %v", time.Since(start)) }()

	// An agent joins through gossip, where the laptop is the first API
	// server named: it refuses it and runs its pods through the real one.
	agentDir := filepath.Join(t.TempDir(), "gpu-0")
	agentProc := startProc(t, bin, home, append(append([]string{"agent", "--join", gossipAddr}, joinArgs(t, dataDir, controlplane.JoinTokenFile)...),
		"--node-name", "gpu-0", "--runtime", "fake", "--gpus", "none", "--network", "none", "--data-dir", agentDir,
		"--gossip-port", strconv.Itoa(freePort(t)), "--advertise-address", "127.0.0.1", "--listen-agent", freeLoopbackAddr(t))...)
	admin, err := client.New(client.Config{Server: serverURL, Token: adminToken, CAData: caPEM})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	pod := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "still-works", Namespace: "default"},
		Spec: api.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": "gpu-0"},
			Containers: []api.Container{{Name: "c", Image: "busybox", Command: []string{"sleep", "3600"}}}}}
	if _, err := client.Create(ctx, admin, pod); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		select {
		case <-agentProc.done:
			t.Fatalf("the agent exited: %v\n%s", agentProc.err, agentProc.out.String())
		default:
		}
		p, err := client.Get[*api.Pod](ctx, admin, "default", "still-works")
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == api.PodRunning, fmt.Sprintf("pod %s on %q", p.Status.Phase, p.Spec.NodeName)
	})
	if out := agentProc.out.String(); !strings.Contains(out, rogue.url) || !strings.Contains(out, "not an API server") {
		t.Errorf("the agent's log does not say it refused %s:\n%s", rogue.url, out)
	}
	// The kubernetes Service's endpoints name the real server only.
	ep, err := client.Get[*api.Endpoints](ctx, admin, "default", "kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	for _, ss := range ep.Subsets {
		for _, a := range ss.Addresses {
			if a.IP != "127.0.0.1" {
				t.Errorf("default/kubernetes lists %s", a.IP)
			}
		}
	}

	// The CLI: a kubeconfig naming the laptop first, the real server in
	// its failover list (skiff.dev/servers), with the admin token; and
	// one with a node's certificate naming the laptop alone.
	kubeconfig := func(name string, cfg client.Config) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), name)
		if err := client.WriteKubeconfig(p, cfg); err != nil {
			t.Fatal(err)
		}
		return p
	}
	runCLI := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	failover := kubeconfig("failover", client.Config{Server: rogue.url, Servers: []string{serverURL}, Token: adminToken, CAData: caPEM})
	if out, err := runCLI("get", "pods", "--kubeconfig", failover); err != nil || !strings.Contains(out, "still-works") {
		t.Errorf("skiff get pods with the laptop first in the failover list: %v\n%s", err, out)
	}
	alone := kubeconfig("alone", client.Config{Server: rogue.url, Token: adminToken, CAData: caPEM})
	if out, err := runCLI("get", "pods", "--kubeconfig", alone); err == nil || !strings.Contains(out, "not an API server") {
		t.Errorf("skiff get pods against the laptop alone: %v, want a refusal naming why\n%s", err, out)
	}
	nodeCreds, err := pki.LoadNodeCredentials(pki.NodeDir(agentDir))
	if err != nil {
		t.Fatal(err)
	}
	asNode := kubeconfig("node", client.Config{Server: rogue.url, CAData: caPEM, CertData: nodeCreds.ClientCert, KeyData: nodeCreds.ClientKey})
	if out, err := runCLI("get", "nodes", "--kubeconfig", asNode); err == nil {
		t.Errorf("skiff get nodes with a node's certificate against the laptop: accepted\n%s", out)
	}

	// A server joining through the laptop (--join-server) refuses it
	// before it sends the admin token.
	out, err := runCLI(append([]string{"server", "--join-server", rogue.url, "--data-dir", filepath.Join(t.TempDir(), "s1"),
		"--listen", freeLoopbackAddr(t), "--no-agent", "--no-gossip", "--node-name", "s1",
		"--etcd-peer-listen", "https://" + freeLoopbackAddr(t), "--etcd-client-listen", "https://" + freeLoopbackAddr(t)},
		joinArgs(t, dataDir, "token")...)...)
	if err == nil || !strings.Contains(out, "not an API server") {
		t.Errorf("skiff server --join-server through the laptop: %v, want a refusal naming why\n%s", err, out)
	}

	if n, a := rogue.hits.Load(), rogue.auth.Load(); n != 0 || a != 0 {
		t.Errorf("%d requests reached the laptop (%d with a credential), want none", n, a)
	}
}
