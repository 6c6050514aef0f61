package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/apiserver"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/pki/pkitest"
)

// newHTTPCluster is a real API server over HTTP (default Pod Security:
// baseline) and a CLI config file for it.
func newHTTPCluster(t *testing.T) (config string) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "skiff.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := apiserver.NewRegistry(st, logger)
	if err := reg.EnsureDefaults(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := apiserver.DefaultConfig()
	cfg.Token = "t"
	srv, err := apiserver.New(cfg, reg, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	// TLS: a kubeconfig's token is sent over https only, as kubectl does.
	ts, caPEM := pkitest.StartAPIServer(t, srv.Handler())
	config = filepath.Join(t.TempDir(), "config")
	if err := client.WriteKubeconfig(config, client.Config{Server: ts.URL, Token: "t", CAData: caPEM}); err != nil {
		t.Fatal(err)
	}
	return config
}

const hostPathDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: root
spec:
  selector:
    matchLabels: {app: root}
  template:
    metadata:
      labels: {app: root}
    spec:
      containers:
      - name: sh
        image: busybox
        volumeMounts: [{name: root, mountPath: /host}]
      volumes:
      - name: root
        hostPath: {path: /}
`

const hostPathPodYAML = `apiVersion: v1
kind: Pod
metadata:
  name: root
spec:
  containers:
  - name: sh
    image: busybox
    volumeMounts: [{name: root, mountPath: /host}]
  volumes:
  - name: root
    hostPath: {path: /}
`

// What a student sees, word for word as kubectl shows it on a cluster
// whose namespaces enforce baseline.
func TestCLIPodSecurity(t *testing.T) {
	config := newHTTPCluster(t)
	dir := t.TempDir()
	podFile, depFile := filepath.Join(dir, "pod.yaml"), filepath.Join(dir, "deployment.yaml")
	for f, data := range map[string]string{podFile: hostPathPodYAML, depFile: hostPathDeployment} {
		if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	skiff := func(args ...string) result { return runCLI(t, append([]string{"--kubeconfig", config}, args...)...) }

	res := skiff("apply", "-f", depFile)
	if res.code != 0 || res.out != "deployment.apps/root created\n" {
		t.Fatalf("apply deployment: %+v", res)
	}
	if want := "Warning: would violate PodSecurity \"baseline:latest\": hostPath volumes (volume \"root\")\n"; res.err != want {
		t.Errorf("stderr = %q, want %q", res.err, want)
	}

	res = skiff("apply", "-f", podFile)
	// kubectl: Error from server (Forbidden): error when creating "pod.yaml": pods "root" is forbidden: ...
	// skiff apply names the document instead; the server's words are the same.
	const refused = `pods "root" is forbidden: violates PodSecurity "baseline:latest": hostPath volumes (volume "root")` + "\n"
	if res.code != 1 || !strings.HasPrefix(res.err, "Error from server (Forbidden): ") || !strings.HasSuffix(res.err, `"`+podFile+`": `+refused) {
		t.Errorf("apply pod: code %d stderr %q\nwant code 1, Error from server (Forbidden): ... %q", res.code, res.err, refused)
	}

	// The teacher lifts the namespace.
	res = skiff("label", "ns", "default", "pod-security.kubernetes.io/enforce=privileged")
	if res.code != 0 {
		t.Fatalf("label: %+v", res)
	}
	res = skiff("apply", "-f", podFile)
	if res.code != 0 || res.out != "pod/root created\n" {
		t.Fatalf("apply pod after lifting: %+v", res)
	}
	if want := "Warning: would violate PodSecurity \"baseline:latest\": hostPath volumes (volume \"root\")\n"; res.err != want {
		t.Errorf("stderr = %q, want %q (warn stays at the default)", res.err, want)
	}
}
