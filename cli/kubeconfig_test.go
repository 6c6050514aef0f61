package cli

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"skiff.dev/skiff/cluster"
	"skiff.dev/skiff/internal/kubectltest"
)

// TestKubectlWithTheWrittenKubeconfig: with only the kubeconfig `skiff
// up` writes (cluster.WriteKubeconfigs), the real kubectl reaches the server
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
	if err := cluster.WriteKubeconfigs(cp.ClientConfig(), dataDir, true, slog.New(slog.DiscardHandler)); err != nil {
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
