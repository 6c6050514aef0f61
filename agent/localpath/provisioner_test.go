package localpath

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/internal/testwait"
)

type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) Eventf(_ context.Context, _ api.Object, typ, reason, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, typ+" "+reason+" "+fmt.Sprintf(format, args...))
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.list)
}

func claim(name, node string, modes ...string) *api.PersistentVolumeClaim {
	class := api.LocalPathStorageClass
	c := &api.PersistentVolumeClaim{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "ns", Annotations: map[string]string{
		api.AnnotationStorageProvisioner: api.LocalPathProvisioner, api.AnnotationSelectedNode: node}}}
	c.Spec.AccessModes = modes
	c.Spec.StorageClassName = &class
	c.Spec.Resources.Requests = api.ResourceList{api.ResourceStorage: resource.MustParse("2Gi")}
	return c
}

// running starts the provisioner of node-1 over a fake API with objs.
func running(t *testing.T, objs ...api.Object) (*fake.Client, *events, string) {
	t.Helper()
	c := fake.New(append([]api.Object{api.LocalPathClass()}, objs...)...)
	ev := &events{}
	dir := filepath.Join(t.TempDir(), "storage")
	p := New(c, Config{NodeName: "node-1", Dir: dir}, ev)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return c, ev, dir
}

func volume(c *fake.Client, name string) (*api.PersistentVolume, bool) {
	pv, err := client.Get[*api.PersistentVolume](context.Background(), c, "", name)
	return pv, err == nil
}

func TestProvisionAndDelete(t *testing.T) {
	c, ev, dir := running(t, claim("data", "node-1", api.ReadWriteOnce), claim("elsewhere", "node-2", api.ReadWriteOnce))
	ctx := context.Background()
	cl, _ := client.Get[*api.PersistentVolumeClaim](ctx, c, "ns", "data")
	name := "pvc-" + cl.UID
	var pv *api.PersistentVolume
	testwait.For(t, 10*time.Second, "volume "+name, func() bool {
		var ok bool
		pv, ok = volume(c, name)
		return ok
	})
	path := filepath.Join(dir, name+"_ns_data")
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != path || !api.IsLocalPathVolumeOf(pv, "node-1") ||
		pv.Spec.PersistentVolumeReclaimPolicy != api.ReclaimDelete || pv.Spec.StorageClassName != api.LocalPathStorageClass ||
		pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != cl.UID || !slices.Equal(pv.Spec.AccessModes, []string{api.ReadWriteOnce}) {
		t.Fatalf("volume: %+v", pv.Spec)
	}
	if q := pv.Spec.Capacity[api.ResourceStorage]; q.String() != "2Gi" {
		t.Errorf("capacity %s", q.String())
	}
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o777 {
		t.Fatalf("directory %s: %v %v", path, fi, err)
	}
	testwait.For(t, 5*time.Second, "the events", func() bool { return len(ev.all()) >= 2 })
	if got := ev.all(); !strings.HasPrefix(got[0], `Normal Provisioning External provisioner is provisioning volume for claim "ns/data"`) ||
		got[1] != "Normal ProvisioningSucceeded Successfully provisioned volume "+name {
		t.Errorf("events %q", got)
	}
	// Another node's claim is not this node's to make.
	other, _ := client.Get[*api.PersistentVolumeClaim](ctx, c, "ns", "elsewhere")
	if _, ok := volume(c, "pvc-"+other.UID); ok {
		t.Error("made a volume for a claim of node-2")
	}

	// Released with reclaim policy Delete: the directory and the volume go.
	if err := os.WriteFile(filepath.Join(path, "index.html"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	pv.Status.Phase = api.VolumeReleased
	if _, err := c.UpdateStatus(ctx, pv); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "volume "+name+" deleted", func() bool { _, ok := volume(c, name); return !ok })
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("directory after delete: %v", err)
	}
}

// A Released volume whose path is not directly in the storage directory is
// never removed (a volume made by hand with the provisioner's annotation).
func TestDeleteStaysInItsDirectory(t *testing.T) {
	outside := t.TempDir()
	pv := &api.PersistentVolume{ObjectMeta: api.ObjectMeta{Name: "sneaky", Annotations: map[string]string{api.AnnotationProvisionedBy: api.LocalPathProvisioner}}}
	pv.Spec = api.PersistentVolumeSpec{Capacity: api.ResourceList{api.ResourceStorage: resource.MustParse("1Gi")}, AccessModes: []string{api.ReadWriteOnce},
		PersistentVolumeReclaimPolicy: api.ReclaimDelete, HostPath: &api.HostPathVolumeSource{Path: outside}, NodeAffinity: api.LocalPathNodeAffinity("node-1")}
	pv.Status.Phase = api.VolumeReleased
	c, ev, _ := running(t, pv)
	testwait.For(t, 10*time.Second, "the refusal", func() bool {
		return slices.ContainsFunc(ev.all(), func(e string) bool {
			return strings.HasPrefix(e, "Warning VolumeFailedDelete "+outside+" is not in this node's storage directory")
		})
	})
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("directory outside storage removed: %v", err)
	}
	if _, ok := volume(c, "sneaky"); !ok {
		t.Error("volume deleted")
	}
}

func TestProvisionRefusesManyWriters(t *testing.T) {
	c, ev, _ := running(t, claim("shared", "node-1", api.ReadWriteMany))
	testwait.For(t, 10*time.Second, "ProvisioningFailed", func() bool {
		return slices.Contains(ev.all(), `Warning ProvisioningFailed failed to provision volume with StorageClass "local-path": NodePath only supports ReadWriteOnce and ReadWriteOncePod (1.22+) access modes`)
	})
	list, _, _ := c.List(context.Background(), volumeKind, "", api.ListOptions{})
	if len(list) != 0 {
		t.Errorf("volumes made: %d", len(list))
	}
}
