package store_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
	st "skiff.dev/skiff/controlplane/store/storetest"
)

// Tests of the store on a bad disk: full (a small tmpfs), and files
// damaged or cut short (recovery_test.go).

// smallDisk mounts a tmpfs of size bytes on a new temporary directory,
// unmounted by t.Cleanup; it skips the test when not root.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the full-disk test mounts a small tmpfs: run it as root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file in dir until the disk is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			return path
		}
	}
}

// bigPod is a pod with an annotation of n random letters: a write that
// needs new pages of the file, which a full disk cannot give (compressed,
// n letters of 52 keep about three quarters of their size).
func bigPod(name string, n int) *api.Pod {
	rnd := rand.New(rand.NewPCG(uint64(n), 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[rnd.IntN(52)]
	}
	p := st.NewPod("default", name)
	p.Annotations = map[string]string{"example.com/blob": string(b)}
	return p
}

func TestFullDisk(t *testing.T) {
	ctx := context.Background()
	dir := smallDisk(t, "8m")
	path := filepath.Join(dir, store.StateFile)
	opts := store.DefaultOptions() // fsync on: the disk's answers are the real ones
	s := reopen(t, path, opts)
	kept := st.MustCreate(t, s, st.NewPod("default", "kept"))
	w, err := s.Watch(ctx, st.PodKind, "default", s.Revision())
	if err != nil {
		t.Fatal(err)
	}
	filler := fill(t, dir)
	rev := s.Revision()

	// A write that needs space fails, clearly, and stores nothing.
	_, err = s.Create(ctx, bigPod("big", 1<<20))
	if !errors.Is(err, store.ErrNoSpace) {
		t.Fatalf("create on a full disk: %v, want ErrNoSpace", err)
	}
	var se *api.StatusError
	if !errors.As(err, &se) || se.Status.Code != 500 || !strings.Contains(se.Error(), "no space left on device") || !strings.Contains(se.Error(), path) {
		t.Fatalf("create on a full disk: %v; want a 500 naming %s and the missing space", err, path)
	}
	t.Logf("the error: %v", err)
	if _, err := s.Get(ctx, st.PodKind, "default", "big"); !api.IsNotFound(err) {
		t.Fatalf("get the failed object: %v, want NotFound", err)
	}
	if got := s.Revision(); got != rev {
		t.Fatalf("revision %d after the failed write, want %d", got, rev)
	}

	// Reads keep working.
	if _, err := s.Get(ctx, st.PodKind, "default", "kept"); err != nil {
		t.Fatalf("get on a full disk: %v", err)
	}
	if items, lrev, err := s.List(ctx, st.PodKind, "default"); err != nil || len(items) != 1 || lrev != rev {
		t.Fatalf("list on a full disk: %d items at %d, %v; want 1 at %d", len(items), lrev, err, rev)
	}
	w2, err := s.Watch(ctx, st.PodKind, "default", rev)
	if err != nil {
		t.Fatalf("watch on a full disk: %v", err)
	}

	// Space returns: writes go on without a restart, watchers see them.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	made := st.MustCreate(t, s, bigPod("big", 1<<20))
	st.ExpectNext(t, w, api.Added, "big")
	st.ExpectNext(t, w2, api.Added, "big")
	if st.Rev(t, made) != rev+1 {
		t.Fatalf("revision %s after the disk came back, want %d", st.RV(made), rev+1)
	}
	if _, err := s.Delete(ctx, st.PodKind, "default", "kept", nil); err != nil {
		t.Fatal(err)
	}
	_ = kept

	// The file is whole: it reopens and checks.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := store.Inspect(path)
	if err != nil {
		t.Fatalf("inspect after the full disk: %v", err)
	}
	if info.Revision != rev+2 || info.Total() != 1 {
		t.Fatalf("inspect: revision %d, %d objects; want %d, 1", info.Revision, info.Total(), rev+2)
	}
}

// TestFullDiskGrow: the disk grows back (a remount with more space) rather
// than a file going away; many writers fail together, then succeed.
func TestFullDiskGrow(t *testing.T) {
	ctx := context.Background()
	dir := smallDisk(t, "4m")
	path := filepath.Join(dir, store.StateFile)
	s := reopen(t, path, store.DefaultOptions())
	fill(t, dir)
	rev := s.Revision()
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			_, err := s.Create(ctx, bigPod("p"+string(rune('a'+i)), 256<<10))
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; !errors.Is(err, store.ErrNoSpace) {
			t.Fatalf("create on a full disk: %v, want ErrNoSpace", err)
		}
	}
	if got := s.Revision(); got != rev {
		t.Fatalf("revision %d, want %d", got, rev)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_REMOUNT, "size=16m"); err != nil {
		t.Fatalf("grow the tmpfs: %v", err)
	}
	for i := range 8 {
		st.MustCreate(t, s, bigPod("p"+string(rune('a'+i)), 256<<10))
	}
	if got := s.Revision(); got != rev+8 {
		t.Fatalf("revision %d, want %d", got, rev+8)
	}
}
