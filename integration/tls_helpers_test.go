package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/pki"
)

// nodeCredentials issues the certificates of node name reached at ip
// straight from cp's CA, as `skiff up` does for its own nodes.
func nodeCredentials(t testing.TB, cp *controlplane.ControlPlane, name, ip string) *pki.NodeCredentials {
	t.Helper()
	nc, err := cp.IssueNodeCredentials(name, []string{ip})
	if err != nil {
		t.Fatal(err)
	}
	return &nc
}

// serverCA reads the cluster CA a `skiff server` process wrote into its
// data dir ("" with an error while it has not yet).
func serverCA(dataDir string) ([]byte, error) {
	return os.ReadFile(filepath.Join(dataDir, "pki", pki.CACertFile))
}

// joinArgs are the flags a process joins the server in dataDir with: the
// token by its file (never on the command line) and the CA's pin.
// tokenFile is "join-token" for agents, "token" (the admin token) for
// servers (--join-server).
func joinArgs(t testing.TB, dataDir, tokenFile string) []string {
	t.Helper()
	b, err := serverCA(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.FromPEM(b)
	if err != nil {
		t.Fatal(err)
	}
	return []string{"--token-file", filepath.Join(dataDir, tokenFile), "--discovery-token-ca-cert-hash", ca.Hash()}
}

// copyClusterSecrets gives the server data dir to the CA and join token
// of the one in from (servers on one external etcd share them, as
// kubeadm's control-plane nodes share /etc/kubernetes/pki).
func copyClusterSecrets(t testing.TB, from, to string) {
	t.Helper()
	for _, f := range []string{filepath.Join("pki", pki.CACertFile), filepath.Join("pki", pki.CAKeyFile), controlplane.JoinTokenFile, "token"} {
		b, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(to, f)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// applyFile creates every object of a YAML file (an example) with c.
func applyFile(t testing.TB, c client.Interface, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range api.DecodeStream(data) {
		if d.Err != nil {
			t.Fatalf("%s: %v", path, d.Err)
		}
		if _, err := c.Create(context.Background(), d.Object); err != nil {
			t.Fatalf("%s: create %s %s: %v", path, d.Kind.Kind, d.Object.GetObjectMeta().Name, err)
		}
	}
}
