package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	bolt "go.etcd.io/bbolt"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
	st "skiff.dev/skiff/controlplane/store/storetest"
)

// rewriteValues opens the closed store at path with bbolt itself and
// replaces each object's value by change(value).
func rewriteValues(t *testing.T, path string, change func(bucket string, v []byte) []byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			if string(name) == "_meta" {
				return nil
			}
			kv := map[string][]byte{}
			if err := bk.ForEach(func(k, v []byte) error { kv[string(k)] = change(string(name), v); return nil }); err != nil {
				return err
			}
			for k, v := range kv {
				if err := bk.Put([]byte(k), v); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Pods are stored compressed, smaller than their JSON; a store whose
// values are JSON (as a skiff before compression wrote them) or S2
// without the dictionary (as a skiff before values-v1.dict wrote them)
// reads the same objects, and a write compresses the object it writes.
func TestStoredValuesCompressedAndJSONStillRead(t *testing.T) {
	ctx := context.Background()
	s, path := openStore(t, testOptions())
	rnd := rand.New(rand.NewPCG(10, 3))
	for i := range 40 {
		p := st.NewPod("default", fmt.Sprintf("p-%02d", i))
		p.Labels = map[string]string{"app": "web", "n": fmt.Sprint(rnd.IntN(1000))}
		p.Annotations = map[string]string{"note": strings.Repeat("lab room ", 20+rnd.IntN(300))} // compressible
		st.MustCreate(t, s, p)
	}
	st.MustCreate(t, s, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: "team-a"}})
	want, _, err := s.List(ctx, st.PodKind, "")
	if err != nil {
		t.Fatal(err)
	}
	nsKind := api.MustKindOf(&api.Namespace{})
	wantNS, err := s.Get(ctx, nsKind, "", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	compressed, jsonBytes, storedBytes, n := 0, 0, 0, 0
	rewriteValues(t, path, func(bucket string, v []byte) []byte {
		if bucket != "pods" {
			return v
		}
		if v[0] == '{' {
			t.Errorf("a pod stored as JSON: %.60s", v)
			return v
		}
		raw, err := store.UnpackValue(v)
		if err != nil || v[0] != 1 {
			t.Fatalf("a pod's value is neither JSON nor 1 and S2 with the dictionary (%v): %x", err, v[:8])
		}
		compressed++
		jsonBytes += len(raw)
		storedBytes += len(v)
		if n++; n%2 == 0 {
			return append([]byte{0}, s2.Encode(nil, raw)...) // as a skiff before values-v1.dict stored it
		}
		return raw // as a skiff before compression stored it
	})
	if compressed != len(want) || storedBytes*10 > jsonBytes*7 {
		t.Fatalf("%d of %d pods compressed, %d bytes for %d of JSON; want all, in at most 70 %%", compressed, len(want), storedBytes, jsonBytes)
	}
	t.Logf("%d pods: %d bytes of JSON stored in %d", compressed, jsonBytes, storedBytes)

	s = reopen(t, path, testOptions())
	got, _, err := s.List(ctx, st.PodKind, "")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("list of the JSON values: %v, not what was stored", err)
	}
	for _, p := range want[:5] {
		m := p.GetObjectMeta()
		if g, err := s.Get(ctx, st.PodKind, m.Namespace, m.Name); err != nil || !reflect.DeepEqual(g, p) {
			t.Fatalf("get %s: %v", m.Name, err)
		}
		if g, err := s.GetMeta(ctx, st.PodKind, m.Namespace, m.Name); err != nil || !reflect.DeepEqual(g.GetObjectMeta(), m) {
			t.Fatalf("get meta %s: %v", m.Name, err)
		}
	}
	if g, err := s.Get(ctx, nsKind, "", "team-a"); err != nil || !reflect.DeepEqual(g, wantNS) {
		t.Fatalf("get namespace: %v", err)
	}
	// An update and a delete read the JSON value they replace.
	upd, err := s.GuaranteedUpdate(ctx, st.PodKind, "default", "p-01", func(cur api.Object) (api.Object, error) {
		p := api.Clone(cur.(*api.Pod))
		p.Labels["changed"] = "yes"
		return p, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, st.PodKind, "default", "p-02", nil); err != nil {
		t.Fatal(err)
	}
	if g, err := s.Get(ctx, st.PodKind, "default", "p-01"); err != nil || !reflect.DeepEqual(g, upd) {
		t.Fatalf("get the updated pod: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	updated := 0
	rewriteValues(t, path, func(bucket string, v []byte) []byte {
		if bucket != "pods" {
			return v
		}
		raw, err := store.UnpackValue(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), `"changed":"yes"`) {
			updated++
			if v[0] != 1 {
				t.Errorf("the updated pod was stored with tag %d, not compressed with the dictionary", v[0])
			}
		}
		return v
	})
	if updated != 1 {
		t.Fatalf("%d updated pods stored; want 1", updated)
	}
}

// A damaged compressed value, with or without the dictionary, fails the
// reads of it with an Internal error that says so; the store's other
// objects stay readable.
func TestDamagedCompressedValue(t *testing.T) {
	for _, tag := range []byte{0, 1} {
		t.Run(fmt.Sprintf("tag %d", tag), func(t *testing.T) { damagedCompressedValue(t, tag) })
	}
}

func damagedCompressedValue(t *testing.T, tag byte) {
	ctx := context.Background()
	s, path := openStore(t, testOptions())
	p := st.NewPod("default", "hurt")
	p.Annotations = map[string]string{"note": strings.Repeat("lab room ", 100)}
	st.MustCreate(t, s, p)
	st.MustCreate(t, s, &api.ConfigMap{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "fine"}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rewriteValues(t, path, func(bucket string, v []byte) []byte {
		if bucket == "pods" {
			return append([]byte{tag}, "not S2 at all"...)
		}
		return v
	})
	s = reopen(t, path, testOptions())
	for name, read := range map[string]func() error{
		"get":      func() error { _, err := s.Get(ctx, st.PodKind, "default", "hurt"); return err },
		"get meta": func() error { _, err := s.GetMeta(ctx, st.PodKind, "default", "hurt"); return err },
		"list":     func() error { _, _, err := s.List(ctx, st.PodKind, "default"); return err },
		"delete":   func() error { _, err := s.Delete(ctx, st.PodKind, "default", "hurt", nil); return err },
		"update": func() error {
			_, err := s.Update(ctx, p)
			return err
		},
	} {
		err := read()
		var se *api.StatusError
		if !errors.As(err, &se) || se.Status.Code != 500 || !strings.Contains(err.Error(), "decompress") {
			t.Errorf("%s of the damaged pod: %v; want a 500 that says decompress", name, err)
		}
	}
	if _, err := s.Get(ctx, st.CMKind, "default", "fine"); err != nil {
		t.Fatalf("get another object: %v", err)
	}
}
