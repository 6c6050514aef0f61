package controlplane

import (
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/apiserver"
	"skiff.dev/skiff/controlplane/store"
)

func TestEnsureClusterInfo(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "skiff.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := apiserver.NewRegistry(st, nil)
	ctx := t.Context()
	if err := reg.EnsureDefaults(ctx); err != nil {
		t.Fatal(err)
	}
	cmKind := api.MustKindOf(&api.ConfigMap{})
	read := func() *api.ConfigMap {
		t.Helper()
		o, err := reg.Get(ctx, cmKind, api.NamespacePublic, api.ClusterInfoConfigMap)
		if err != nil {
			t.Fatal(err)
		}
		return o.(*api.ConfigMap)
	}
	check := func(cm *api.ConfigMap, server string) {
		t.Helper()
		kc, err := clientcmd.Load([]byte(cm.Data[api.ClusterInfoKubeconfigKey]))
		if err != nil {
			t.Fatalf("cluster-info kubeconfig: %v", err)
		}
		cl := kc.Clusters[""]
		if cl == nil || cl.Server != server || string(cl.CertificateAuthorityData) != "CA PEM" {
			t.Fatalf("cluster-info cluster %+v, want server %s and the CA", cl, server)
		}
		if len(kc.AuthInfos) != 0 || len(kc.Contexts) != 0 || len(kc.Clusters) != 1 {
			t.Errorf("cluster-info holds more than the cluster: %+v", kc)
		}
	}

	if err := ensureClusterInfo(ctx, reg, "https://10.0.0.1:7443", []byte("CA PEM")); err != nil {
		t.Fatal(err)
	}
	first := read()
	check(first, "https://10.0.0.1:7443")

	// Again, same address: nothing written.
	if err := ensureClusterInfo(ctx, reg, "https://10.0.0.1:7443", []byte("CA PEM")); err != nil {
		t.Fatal(err)
	}
	if again := read(); again.ResourceVersion != first.ResourceVersion {
		t.Errorf("rewritten without a change: resourceVersion %s → %s", first.ResourceVersion, again.ResourceVersion)
	}

	// Another address: rewritten, other keys (kubeadm's jws-kubeconfig-*) kept.
	next := api.Clone(first)
	next.Data["jws-kubeconfig-abcdef"] = "sig"
	if _, err := reg.Update(ctx, cmKind, next); err != nil {
		t.Fatal(err)
	}
	if err := ensureClusterInfo(ctx, reg, "https://10.0.0.2:7443", []byte("CA PEM")); err != nil {
		t.Fatal(err)
	}
	moved := read()
	check(moved, "https://10.0.0.2:7443")
	if moved.Data["jws-kubeconfig-abcdef"] != "sig" {
		t.Errorf("other keys lost: %v", moved.Data)
	}
}
