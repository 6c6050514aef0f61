package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

func TestWriteFile(t *testing.T) {
	old := syscall.Umask(0o077) // the mode is set despite the umask
	t.Cleanup(func() { syscall.Umask(old) })
	tests := []struct {
		name     string
		existing string // "" for none
		data     string
		perm     fs.FileMode
	}{
		{name: "new file", data: "hello\n", perm: 0o644},
		{name: "replaces", existing: "old content that is longer", data: "new", perm: 0o600},
		{name: "empty data", existing: "x", data: "", perm: 0o640},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f.yaml")
			if tt.existing != "" {
				if err := os.WriteFile(path, []byte(tt.existing), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteFile(path, []byte(tt.data), tt.perm); err != nil {
				t.Fatalf("WriteFile: %v", err)
			}
			checkFile(t, path, tt.data, tt.perm)
			checkOnly(t, dir, "f.yaml")
		})
	}
}

func TestWriteFileNoDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "f")
	if err := WriteFile(path, []byte("x"), 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("WriteFile into a missing directory: %v, want fs.ErrNotExist", err)
	}
}

func TestWriteNew(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	if err := WriteNew(path, []byte("first"), 0o600); err != nil {
		t.Fatalf("WriteNew: %v", err)
	}
	err := WriteNew(path, []byte("second"), 0o644)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second WriteNew: %v, want fs.ErrExist", err)
	}
	checkFile(t, path, "first", 0o600)
	checkOnly(t, dir, "token")
}

// Of writers racing to create one file, one wins and the file is whole.
func TestWriteNewRace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = WriteNew(path, []byte{'a' + byte(i)}, 0o600) })
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
			checkFile(t, path, string([]byte{'a' + byte(i)}), 0o600)
		case !errors.Is(err, fs.ErrExist):
			t.Errorf("writer %d: %v", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers won, want 1", won)
	}
	checkOnly(t, dir, "token")
}

func checkFile(t *testing.T, path, data string, perm fs.FileMode) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != data {
		t.Errorf("content %q, want %q", b, data)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != perm {
		t.Errorf("mode %v, want %v", st.Mode().Perm(), perm)
	}
}

// checkOnly fails unless dir holds exactly name: no temporary file is left.
func checkOnly(t *testing.T, dir, name string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != name {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %q, want only %q", names, name)
	}
}
