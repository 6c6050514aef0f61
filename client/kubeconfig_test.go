package client_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/pki/pkitest"
)

func TestLoadKubeconfigLookupOrder(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	write := func(name, server string) string {
		p := filepath.Join(dir, name)
		if err := client.WriteKubeconfig(p, client.Config{Server: server, Token: "t"}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flag := write("flag.yaml", "https://flag:7443")
	env := write("env.yaml", "https://env:7443")
	write(filepath.Join(".skiff", "kubeconfig"), "https://home:7443")
	tests := []struct {
		name, flag, env, want string
	}{
		{"flag wins", flag, env, "https://flag:7443"},
		{"then $KUBECONFIG", "", env, "https://env:7443"},
		{"$KUBECONFIG list: the first file that sets the context", "", env + string(os.PathListSeparator) + flag, "https://env:7443"},
		{"then ~/.skiff/kubeconfig", "", "", "https://home:7443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(client.KubeconfigEnv, tt.env)
			got, err := client.LoadKubeconfig(tt.flag)
			if err != nil {
				t.Fatal(err)
			}
			if got.Server != tt.want {
				t.Fatalf("server %q, want %q", got.Server, tt.want)
			}
		})
	}
}

func TestKubeconfigRoundTrip(t *testing.T) {
	ca := pkitest.CA(t)
	node := pkitest.Node(t, ca, "gpu-1")
	tests := []struct {
		name string
		cfg  client.Config
	}{
		{"admin token and CA", client.Config{Server: "https://10.0.0.1:7443", Token: "s3cret", CAData: ca.CertPEM()}},
		{"several servers", client.Config{Server: "https://10.0.0.1:7443", Servers: []string{"https://10.0.0.2:7443", "https://10.0.0.3:7443"}, Token: "s3cret", CAData: ca.CertPEM()}},
		{"a node's certificate", client.Config{Server: "https://10.0.0.1:7443", CAData: ca.CertPEM(), CertData: node.ClientCert, KeyData: node.ClientKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sub", "kubeconfig")
			if err := client.WriteKubeconfig(path, tt.cfg); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(path)
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Fatalf("kubeconfig file: %v %v, want mode 0600", st, err)
			}
			got, err := client.LoadKubeconfig(path)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.cfg) {
				t.Fatalf("LoadKubeconfig = %+v, want %+v", got, tt.cfg)
			}
			// kubectl's own loader reads it too, with skiff's names.
			kc, err := clientcmd.LoadFromFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if kc.CurrentContext != "skiff" || kc.Contexts["skiff"].AuthInfo != "skiff-admin" || kc.Clusters["skiff"].Server != tt.cfg.Server {
				t.Fatalf("kubeconfig as client-go reads it: %+v", kc)
			}
		})
	}
}

func TestMergeKubeconfigKeepsOtherContexts(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".kube", "config")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	existing := `apiVersion: v1
kind: Config
clusters:
- name: kind-lab
  cluster:
    server: https://127.0.0.1:6443
users:
- name: kind-lab
  user:
    token: kind-token
contexts:
- name: kind-lab
  context:
    cluster: kind-lab
    user: kind-lab
    namespace: course
current-context: kind-lab
preferences: {}
`
	if err := os.WriteFile(path, []byte(existing), 0o644); err != nil {
		t.Fatal(err)
	}
	ca := pkitest.CA(t)
	for i, server := range []string{"https://10.0.0.1:7443", "https://10.0.0.9:7443"} { // twice: the second replaces skiff's entries only
		if err := client.MergeKubeconfig(path, client.Config{Server: server, Token: "admin", CAData: ca.CertPEM()}); err != nil {
			t.Fatalf("merge %d: %v", i, err)
		}
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if kc.CurrentContext != "skiff" {
		t.Errorf("current context %q, want skiff (as kind does)", kc.CurrentContext)
	}
	if c := kc.Contexts["kind-lab"]; c == nil || c.Namespace != "course" || kc.AuthInfos["kind-lab"].Token != "kind-token" || kc.Clusters["kind-lab"].Server != "https://127.0.0.1:6443" {
		t.Errorf("the other context changed: %+v", kc)
	}
	if len(kc.Contexts) != 2 || len(kc.Clusters) != 2 || len(kc.AuthInfos) != 2 {
		t.Errorf("contexts %d clusters %d users %d, want 2 each", len(kc.Contexts), len(kc.Clusters), len(kc.AuthInfos))
	}
	if got := kc.Clusters["skiff"].Server; got != "https://10.0.0.9:7443" {
		t.Errorf("skiff server %q, want the second merge's", got)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
}

func TestLoadKubeconfigErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "nope"), "skiff up"},
		{"not yaml", file("bad", "{{{"), "read kubeconfig"},
		{"no context", file("empty", "apiVersion: v1\nkind: Config\n"), "no current context"},
		{"insecure", file("insecure", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://x:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), "insecure-skip-tls-verify: not supported"},
		{"bad servers extension", file("ext", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://x:1", extensions: [{name: skiff.dev/servers, extension: [1, 2]}]}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), "skiff.dev/servers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(client.KubeconfigEnv, "")
			_, err := client.LoadKubeconfig(tt.path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadKubeconfig error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if _, err := client.LoadKubeconfig(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestConfigValidate(t *testing.T) {
	ca := pkitest.CA(t)
	node := pkitest.Node(t, ca, "n")
	tests := []struct {
		name string
		cfg  client.Config
		want string
	}{
		{"no server", client.Config{}, "server: required"},
		{"cert without key", client.Config{Server: "https://x:1", CertData: node.ClientCert}, "both or neither"},
		{"CA that is no PEM", client.Config{Server: "https://x:1", CAData: []byte("nope")}, "no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}

// A token file is read and trimmed (a file written by echo ends in a
// newline, which no header may carry); an inline token wins over a file,
// as in kubectl.
func TestLoadKubeconfigTokenFile(t *testing.T) {
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, user, want string
	}{
		{"file only", "{tokenFile: " + tokFile + "}", "abc"},
		{"inline and file", "{token: inline, tokenFile: " + tokFile + "}", "inline"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, "kc"+strconv.Itoa(i))
			body := "apiVersion: v1\nkind: Config\n" +
				"clusters: [{name: c, cluster: {server: \"https://x:1\"}}]\n" +
				"users: [{name: u, user: " + tt.user + "}]\n" +
				"contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv(client.KubeconfigEnv, "")
			cfg, err := client.LoadKubeconfig(p)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Token != tt.want {
				t.Errorf("token %q, want %q", cfg.Token, tt.want)
			}
		})
	}
}
