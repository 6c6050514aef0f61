package apiserver

import (
	"strings"
	"testing"

	"skiff.dev/skiff/internal/kubectltest"
)

// The real kubectl with the storage kinds: the Kubernetes docs' hostPath
// PersistentVolume and its claim apply unchanged; get pv,pvc,sc print
// Kubernetes' columns (the default class marked "(default)", a fresh
// volume Pending until the controller makes it Available); describe pvc
// reads; an unsupported volume source is refused with its path.
func TestKubectlStorage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	const docs = `apiVersion: v1
kind: PersistentVolume
metadata:
  name: task-pv-volume
  labels:
    type: local
spec:
  storageClassName: manual
  capacity:
    storage: 10Gi
  accessModes:
    - ReadWriteOnce
  hostPath:
    path: "/mnt/data"
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: task-pv-claim
spec:
  storageClassName: manual
  accessModes:
    - ReadWriteOnce
  resources:
    requests:
      storage: 3Gi
`
	out := c.Must(t, docs, "apply", "-f", "-")
	for _, want := range []string{"persistentvolume/task-pv-volume created", "persistentvolumeclaim/task-pv-claim created"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply: %s, want %q", out, want)
		}
	}
	if out := c.Must(t, docs, "apply", "-f", "-"); strings.Count(out, "unchanged") != 2 {
		t.Errorf("second apply: %s", out)
	}
	lines := func(out string) []string { return strings.Split(strings.TrimSpace(out), "\n") }
	fields := func(l string) string { return strings.Join(strings.Fields(l), " ") }

	sc := lines(c.Must(t, "", "get", "sc"))
	if got, want := fields(sc[0]), "NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE"; got != want {
		t.Errorf("get sc header %q, want %q", got, want)
	}
	if len(sc) != 2 || !strings.HasPrefix(fields(sc[1]), "local-path (default) rancher.io/local-path Delete WaitForFirstConsumer false ") {
		t.Errorf("get sc: %q", sc)
	}
	pv := lines(c.Must(t, "", "get", "pv"))
	if got, want := fields(pv[0]), "NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE"; got != want {
		t.Errorf("get pv header %q, want %q", got, want)
	}
	if len(pv) != 2 || !strings.HasPrefix(fields(pv[1]), "task-pv-volume 10Gi RWO Retain Pending manual <unset> ") {
		t.Errorf("get pv: %q", pv)
	}
	pvc := lines(c.Must(t, "", "get", "pvc"))
	if got, want := fields(pvc[0]), "NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE"; got != want {
		t.Errorf("get pvc header %q, want %q", got, want)
	}
	if len(pvc) != 2 || !strings.HasPrefix(fields(pvc[1]), "task-pv-claim Pending manual <unset> ") {
		t.Errorf("get pvc: %q", pvc)
	}
	if out := c.Must(t, "", "describe", "pvc", "task-pv-claim"); !strings.Contains(out, "StorageClass:") || !strings.Contains(out, "manual") {
		t.Errorf("describe pvc: %s", out)
	}
	bad := c.Run(t, strings.Replace(docs, `hostPath:
    path: "/mnt/data"`, `nfs: {server: nfs.example.com, path: /}`, 1), "apply", "-f", "-")
	if bad.Err == nil || !strings.Contains(bad.Stderr, "spec.nfs") {
		t.Errorf("nfs volume: err %v, stderr %s", bad.Err, bad.Stderr)
	}
	if out := c.Must(t, "", "api-resources", "--api-group=storage.k8s.io"); !strings.Contains(out, "storageclasses") || !strings.Contains(out, " sc ") {
		t.Errorf("api-resources: %s", out)
	}
}
