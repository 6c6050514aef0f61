package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"skiff.dev/skiff/controlplane/store"
	st "skiff.dev/skiff/controlplane/store/storetest"
)

// filledStore writes a closed store of n pods at DIR/state.db and a
// snapshot of it, and returns both paths.
func filledStore(t *testing.T, n int) (path, snapshot string) {
	t.Helper()
	dir := t.TempDir()
	path = filepath.Join(dir, store.StateFile)
	s, err := store.Open(path, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		st.MustCreate(t, s, bigPod(fmt.Sprintf("p-%d", i), 2000))
	}
	var buf bytes.Buffer
	if err := s.Snapshot(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	snapshot = filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(snapshot, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, snapshot
}

func TestOpenRefusesDamagedFiles(t *testing.T) {
	const pods = 300
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"emptied", func(t *testing.T, path string) { truncate(t, path, 0) }},
		{"cut to one page", func(t *testing.T, path string) { truncate(t, path, 4096) }},
		{"cut in half", func(t *testing.T, path string) { truncate(t, path, dbSize(t, path)/2) }},
		{"cut by one page", func(t *testing.T, path string) { truncate(t, path, dbSize(t, path)-4096) }},
		{"meta pages overwritten", func(t *testing.T, path string) { overwrite(t, path, 0, 2*4096) }},
		{"data pages overwritten", func(t *testing.T, path string) { overwrite(t, path, 2*4096, size(t, path)-2*4096) }},
		{"not a database", func(t *testing.T, path string) {
			if err := os.WriteFile(path, bytes.Repeat([]byte("not a database\n"), 1000), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"another program's bbolt file", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("key")); return err }); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, snapshot := filledStore(t, pods)
			tt.damage(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			s, err := store.Open(path, testOptions())
			if err == nil {
				s.Close()
				t.Fatal("a damaged store opened")
			}
			var de *store.DamagedError
			if !errors.As(err, &de) || !errors.Is(err, store.ErrDamaged) {
				t.Fatalf("open: %v; want a DamagedError", err)
			}
			msg := err.Error()
			for _, want := range []string{path, "skiff snapshot restore FILE --data-dir " + filepath.Dir(path), "move " + path + " aside"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the error does not say %q: %s", want, msg)
				}
			}
			t.Logf("the error: %v", err)
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Fatalf("the failed open changed the file (%d bytes, then %d)", len(before), len(after))
			}

			// The recovery the message gives: restore the snapshot.
			r, err := store.RestoreBolt(snapshot, filepath.Dir(path), time.Now())
			if err != nil {
				t.Fatalf("restore over the damaged store: %v", err)
			}
			if kept, err := os.ReadFile(r.Backup); err != nil || !bytes.Equal(kept, before) {
				t.Fatalf("the damaged file was not kept at %q: %v", r.Backup, err)
			}
			s = reopen(t, path, testOptions())
			items, _, err := s.List(context.Background(), st.PodKind, "")
			if err != nil || len(items) != pods || s.Revision() != pods {
				t.Fatalf("after restore: %d pods at revision %d, %v; want %d", len(items), s.Revision(), err, pods)
			}
		})
	}
}

// TestOpenCreatedNeverWritten: a bbolt file with no bucket at all is a
// store created by a server that stopped at once; it opens.
func TestOpenCreatedNeverWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), store.StateFile)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := reopen(t, path, testOptions())
	st.MustCreate(t, s, st.NewPod("default", "web"))
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// dbSize is the database's size in path's file (bbolt grows files ahead
// of their use, so the file may be longer).
func dbSize(t *testing.T, path string) int64 {
	t.Helper()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func truncate(t *testing.T, path string, n int64) {
	t.Helper()
	if err := os.Truncate(path, n); err != nil {
		t.Fatal(err)
	}
}

// overwrite writes n bytes of 0xA5 at off.
func overwrite(t *testing.T, path string, off, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, int(n)), off); err != nil {
		t.Fatal(err)
	}
}

// TestOpenInUse: a second server on the same file is told that the first
// holds it (not that the file is damaged), and the file stays usable.
func TestOpenInUse(t *testing.T) {
	s, path := openStore(t, testOptions())
	st.MustCreate(t, s, st.NewPod("default", "web"))
	_, err := store.Open(path, testOptions())
	if !errors.Is(err, store.ErrInUse) || errors.Is(err, store.ErrDamaged) {
		t.Fatalf("second open: %v; want ErrInUse", err)
	}
	if _, err := s.Get(context.Background(), st.PodKind, "default", "web"); err != nil {
		t.Fatal(err)
	}
}
