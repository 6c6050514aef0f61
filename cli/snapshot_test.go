package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/controlplane/etcd/etcdtest"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/internal/testwait"
)

// startTestControlPlane starts a control plane (no scheduler) in dir and
// writes a CLI config for it; it stops at the test's end.
func startTestControlPlane(t testing.TB, dir string) (*controlplane.ControlPlane, string) {
	t.Helper()
	cfg := controlplane.DefaultConfig(dir)
	cfg.API.Listen = "127.0.0.1:0"
	cfg.Scheduler = false
	cfg.Store.NoSync = true
	cp, err := controlplane.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() { cp.Stop() })
	conf := filepath.Join(t.TempDir(), "config")
	if err := client.WriteKubeconfig(conf, cp.ClientConfig()); err != nil {
		t.Fatal(err)
	}
	return cp, conf
}

// runCLI runs a skiff command line with the real server commands.
func runCLI(t testing.TB, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	r := NewRoot(&out, &errb)
	r.AddCommand(r.clusterCommands()...)
	r.Now = func() time.Time { return testNow }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := r.Execute(ctx, args)
	return result{out: out.String(), err: errb.String(), code: ExitCode(err)}
}

// seed creates objects of several kinds and waits for the Deployment's
// ReplicaSet and pods, so that the snapshot holds a settled cluster.
func seed(t *testing.T, c client.Interface) {
	t.Helper()
	ctx := context.Background()
	one := int32(2)
	objs := []api.Object{
		&api.Namespace{ObjectMeta: api.ObjectMeta{Name: "lab", Labels: map[string]string{"course": "gpu"}}},
		&api.ConfigMap{ObjectMeta: api.ObjectMeta{Namespace: "lab", Name: "page"}, Data: map[string]string{"index.html": "<h1>hello</h1>"}},
		&api.Secret{ObjectMeta: api.ObjectMeta{Namespace: "lab", Name: "key"}, Data: map[string][]byte{"token": []byte("s3cret")}},
		&api.PriorityClass{ObjectMeta: api.ObjectMeta{Name: "high"}, Value: 1000, Description: "lab jobs"},
		&api.Service{ObjectMeta: api.ObjectMeta{Namespace: "lab", Name: "web"}, Spec: api.ServiceSpec{
			Selector: map[string]string{"app": "web"}, Ports: []api.ServicePort{{Port: 80}}}},
		&api.Deployment{ObjectMeta: api.ObjectMeta{Namespace: "lab", Name: "web"}, Spec: api.DeploymentSpec{
			Replicas: &one,
			Selector: &api.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: api.PodTemplateSpec{ObjectMeta: api.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: api.PodSpec{Containers: []api.Container{{Name: "web", Image: "nginx:alpine"}}}}}},
	}
	for _, o := range objs {
		if _, err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		rs, _, _ := c.List(ctx, api.MustKindOf(&api.ReplicaSet{}), "lab", api.ListOptions{})
		pods, _, _ := c.List(ctx, api.MustKindOf(&api.Pod{}), "lab", api.ListOptions{})
		d, err := client.Get[*api.Deployment](ctx, c, "lab", "web")
		// The revision annotation is the deployment controller's last write
		// of a new rollout: after it the seeded objects hold still.
		stamped := err == nil && d.Annotations[api.AnnotationRevision] != ""
		// The serviceaccounts controller gives every namespace its default
		// ServiceAccount after the start: a copy taken before it is done
		// misses some.
		nss, _, _ := c.List(ctx, api.MustKindOf(&api.Namespace{}), "", api.ListOptions{})
		sas, _, _ := c.List(ctx, api.MustKindOf(&api.ServiceAccount{}), "", api.ListOptions{})
		defaults := 0
		for _, sa := range sas {
			if sa.GetObjectMeta().Name == "default" {
				defaults++
			}
		}
		return len(rs) == 1 && len(pods) == 2 && stamped && len(nss) > 0 && defaults == len(nss),
			fmt.Sprintf("the deployment's replica set (%d), 2 pods (%d), its revision annotation (%v), a default ServiceAccount in each of %d namespaces (%d)", len(rs), len(pods), stamped, len(nss), defaults)
	})
}

// contents is every object of a cluster but Events, by kind and key, as
// JSON without resourceVersion and status (what a restore must keep; the
// restored cluster's controllers may refresh statuses).
func contents(t *testing.T, c client.Interface) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range api.Kinds {
		if k.Kind == "Event" {
			continue
		}
		objs, _, err := c.List(context.Background(), k, "", api.ListOptions{})
		if err != nil {
			t.Fatalf("list %s: %v", k.GroupResource(), err)
		}
		for _, o := range objs {
			if derivedFromServer(k, o) {
				continue
			}
			var m map[string]any
			b, _ := json.Marshal(o)
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			delete(m, "status")
			delete(m["metadata"].(map[string]any), "resourceVersion")
			b, _ = json.Marshal(m)
			om := o.GetObjectMeta()
			out[k.GroupResource()+" "+om.Namespace+"/"+om.Name] = string(b)
		}
	}
	return out
}

// derivedFromServer: objects the control plane writes from where it runs,
// which a restore into another data dir or port changes: kube-root-ca.crt
// (the data dir's CA), kube-public/cluster-info (the address and CA) and
// default/kubernetes (the API server's address).
func derivedFromServer(k *api.Kind, o api.Object) bool {
	m := o.GetObjectMeta()
	if k.Kind == "ConfigMap" {
		return m.Name == api.RootCAConfigMap || (m.Namespace == api.NamespacePublic && m.Name == api.ClusterInfoConfigMap)
	}
	return m.Namespace == "default" && m.Name == "kubernetes" && (k.Kind == "Service" || k.Kind == "Endpoints" || k.Kind == "EndpointSlice")
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestSnapshotSaveRestore saves a running cluster, restores the file into
// a new data dir and starts a control plane there: every object is back
// with its uid, labels, spec and data.
func TestSnapshotSaveRestore(t *testing.T) {
	src, conf := startTestControlPlane(t, t.TempDir())
	seed(t, src.Local())
	want := contents(t, src.Local())
	for _, k := range []string{"namespaces /lab", "configmaps lab/page", "secrets lab/key", "priorityclasses.scheduling.k8s.io /high",
		"services lab/web", "deployments.apps lab/web"} {
		if _, ok := want[k]; !ok {
			t.Fatalf("the seeded cluster has no %s: %v", k, keys(want))
		}
	}

	file := filepath.Join(t.TempDir(), "backup.db")
	res := runCLI(t, "snapshot", "save", file, "--kubeconfig", conf)
	if res.code != 0 || !strings.Contains(res.out, "Snapshot saved to "+file+": skiff bbolt store") {
		t.Fatalf("save: code %d, out %q, err %q", res.code, res.out, res.err)
	}
	if res := runCLI(t, "snapshot", "save", file, "--kubeconfig", conf); res.code == 0 || !strings.Contains(res.err, "exists") {
		t.Errorf("save over an existing file: code %d, err %q; want a refusal", res.code, res.err)
	}
	if res := runCLI(t, "snapshot", "status", file); res.code != 0 || !strings.Contains(res.out, "deployments.apps") {
		t.Errorf("status: code %d, out %q, err %q", res.code, res.out, res.err)
	}
	src.Stop()

	dir := t.TempDir()
	res = runCLI(t, "snapshot", "restore", file, "--data-dir", dir)
	if res.code != 0 || !strings.Contains(res.out, "Restored "+file) {
		t.Fatalf("restore: code %d, out %q, err %q", res.code, res.out, res.err)
	}
	t.Logf("%s", res.out)
	dst, _ := startTestControlPlane(t, dir)
	got := contents(t, dst.Local())
	if !reflect.DeepEqual(keys(got), keys(want)) {
		t.Fatalf("restored objects:\n%v\nwant:\n%v", keys(got), keys(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s restored as\n%s\nwant\n%s", k, got[k], w)
		}
	}
}

// TestSnapshotRestoreRefuses: a file that is no whole snapshot, or a data
// dir a server holds, is refused with a clear error and the data dir is
// left exactly as it was.
func TestSnapshotRestoreRefuses(t *testing.T) {
	// A good snapshot (of a store with a few objects) to damage.
	srcDir := t.TempDir()
	st, err := store.Open(filepath.Join(srcDir, "state.db"), store.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		if _, err := st.Create(context.Background(), &api.Namespace{ObjectMeta: api.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	var good bytes.Buffer
	if err := st.Snapshot(context.Background(), &good); err != nil {
		t.Fatal(err)
	}
	st.Close()
	files := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(files, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	foreign := filepath.Join(files, "foreign.db") // a bbolt file, not skiff's
	db, err := bolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("things")); return err }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	flipped := bytes.Clone(good.Bytes())
	flipped[len(flipped)/2] ^= 0x01

	cases := []struct {
		name, file, want string
	}{
		{"text file", write("notes.txt", []byte("not a database\n")), "is neither a skiff store nor an etcd snapshot"},
		{"empty file", write("empty.db", nil), "is neither a skiff store nor an etcd snapshot"},
		{"cut short", write("half.db", good.Bytes()[:good.Len()/2]), "damaged or cut short"},
		{"cut at a page", write("pages.db", good.Bytes()[:good.Len()-32-4096]), "damaged or cut short"},
		{"one byte changed", write("flipped.db", flipped), "damaged or cut short: sha256 mismatch"},
		{"foreign bbolt file", foreign, `no _meta bucket`},
		{"missing file", filepath.Join(files, "nope.db"), "no such file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			st, err := store.Open(filepath.Join(dir, "state.db"), store.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			before := dirState(t, dir)
			res := runCLI(t, "snapshot", "restore", tc.file, "--data-dir", dir)
			if res.code == 0 || !strings.Contains(res.err, tc.want) {
				t.Errorf("restore: code %d, err %q; want an error with %q", res.code, res.err, tc.want)
			}
			if after := dirState(t, dir); !reflect.DeepEqual(after, before) {
				t.Errorf("data dir changed:\n%v\nwas\n%v", after, before)
			}
		})
	}

	t.Run("running server", func(t *testing.T) {
		dir := t.TempDir()
		cp, _ := startTestControlPlane(t, dir)
		before := dirNames(t, dir) // the running server may write state.db
		res := runCLI(t, "snapshot", "restore", write("good.db", good.Bytes()), "--data-dir", dir)
		if res.code == 0 || !strings.Contains(res.err, "in use by a running skiff server") {
			t.Errorf("restore under a running server: code %d, err %q", res.code, res.err)
		}
		if after := dirNames(t, dir); !reflect.DeepEqual(after, before) {
			t.Errorf("data dir changed: %v, was %v", after, before)
		}
		if _, err := cp.Local().Get(context.Background(), api.MustKindOf(&api.Namespace{}), "", "default"); err != nil {
			t.Errorf("the server after the refused restore: %v", err)
		}
	})
}

// dirState is every file of dir with the sha256 of its contents.
func dirState(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = sha256.Sum256(b)
	}
	return out
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// startEtcdControlPlane starts a control plane (no scheduler) on an
// embedded etcd member in dir/etcd, as `skiff server --cluster-init`.
func startEtcdControlPlane(t *testing.T, dir, name, peer, clientURL string) (*controlplane.ControlPlane, string) {
	t.Helper()
	cfg := controlplane.DefaultConfig(dir)
	cfg.API.Listen = "127.0.0.1:0"
	cfg.Scheduler = false
	ec := controlplane.DefaultEtcdConfig()
	ec.ClusterInit, ec.Name, ec.PeerListen, ec.ClientListen = true, name, peer, clientURL
	cfg.Etcd = ec
	cp, err := controlplane.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start control plane on etcd: %v", err)
	}
	t.Cleanup(func() { cp.Stop() })
	conf := filepath.Join(t.TempDir(), "config")
	if err := client.WriteKubeconfig(conf, cp.ClientConfig()); err != nil {
		t.Fatal(err)
	}
	return cp, conf
}

// TestSnapshotMigrateToEtcd moves a bbolt cluster onto embedded etcd
// (every object back, uids kept), then saves an etcd snapshot through the
// API and restores it into a new member: every object again. A second
// migration into a store that holds objects is refused.
func TestSnapshotMigrateToEtcd(t *testing.T) {
	boltDir := t.TempDir()
	src, _ := startTestControlPlane(t, boltDir)
	seed(t, src.Local())
	want := contents(t, src.Local())
	src.Stop()

	url := func() string { return "https://" + etcdtest.FreeAddr(t) }
	etcdDir, peer, cl := t.TempDir(), url(), url()
	res := runCLI(t, "snapshot", "migrate", "--from", filepath.Join(boltDir, "state.db"), "--data-dir", etcdDir,
		"--name", "s1", "--etcd-peer-listen", peer, "--etcd-client-listen", cl)
	if res.code != 0 || !strings.Contains(res.out, "Copied ") {
		t.Fatalf("migrate: code %d, out %q, err %q", res.code, res.out, res.err)
	}
	t.Logf("%s", res.out)
	if res := runCLI(t, "snapshot", "migrate", "--from", filepath.Join(boltDir, "state.db"), "--data-dir", etcdDir); res.code == 0 || !strings.Contains(res.err, "exists") {
		t.Errorf("migrate into an existing member: code %d, err %q; want a refusal", res.code, res.err)
	}

	cp, conf := startEtcdControlPlane(t, etcdDir, "s1", peer, cl)
	check := func(what string, got map[string]string) {
		t.Helper()
		if !reflect.DeepEqual(keys(got), keys(want)) {
			t.Fatalf("%s: objects\n%v\nwant\n%v", what, keys(got), keys(want))
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: %s is\n%s\nwant\n%s", what, k, got[k], w)
			}
		}
	}
	check("migrated", contents(t, cp.Local()))
	// An external etcd (plain http here: the server's own member speaks
	// TLS to its servers only) takes one migration, then refuses another.
	ext := etcdtest.Start(t, "external").Client().Endpoints()[0]
	if res := runCLI(t, "snapshot", "migrate", "--from", filepath.Join(boltDir, "state.db"), "--etcd-endpoints", ext); res.code != 0 {
		t.Fatalf("migrate into an external etcd: code %d, err %q", res.code, res.err)
	}
	if res := runCLI(t, "snapshot", "migrate", "--from", filepath.Join(boltDir, "state.db"), "--etcd-endpoints", ext); res.code == 0 || !strings.Contains(res.err, "not empty") {
		t.Errorf("migrate into an etcd with objects: code %d, err %q; want a refusal", res.code, res.err)
	}

	file := filepath.Join(t.TempDir(), "etcd.db")
	if res := runCLI(t, "snapshot", "save", file, "--kubeconfig", conf); res.code != 0 || !strings.Contains(res.out, "etcd snapshot") {
		t.Fatalf("save from etcd: code %d, out %q, err %q", res.code, res.out, res.err)
	}
	cp.Stop()
	newDir, peer2 := t.TempDir(), url()
	res = runCLI(t, "snapshot", "restore", file, "--data-dir", newDir, "--name", "s1", "--etcd-peer-listen", peer2)
	if res.code != 0 {
		t.Fatalf("restore etcd snapshot: code %d, out %q, err %q", res.code, res.out, res.err)
	}
	if res := runCLI(t, "snapshot", "restore", file, "--data-dir", newDir); res.code == 0 || !strings.Contains(res.err, "exists") {
		t.Errorf("restore over an existing member: code %d, err %q; want a refusal", res.code, res.err)
	}
	restored, _ := startEtcdControlPlane(t, newDir, "s1", peer2, url())
	check("restored from the etcd snapshot", contents(t, restored.Local()))
}
