package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSocketDir(t *testing.T) {
	short := t.TempDir()
	if len(short) > 60 {
		short = "/tmp" // t.TempDir is long for long test names; /tmp is short
	}
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 90))
	tests := []struct {
		name     string
		dataDir  string
		wantHome bool // under the data directory
	}{
		{"short data dir keeps the kubelet's layout", short, true},
		{"deep data dir moves to a short directory", deep, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, err := socketDir(tt.dataDir, "plugins_registry", "gpu.nvidia.com-reg.sock")
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.HasPrefix(dir, tt.dataDir+"/"); got != tt.wantHome {
				t.Fatalf("socketDir(%q) = %q, under the data dir = %v, want %v", tt.dataDir, dir, got, tt.wantHome)
			}
			if n := len(filepath.Join(dir, "gpu.nvidia.com-reg.sock")); n > maxSocketPath {
				t.Fatalf("socket path %d bytes, over the limit", n)
			}
			if !tt.wantHome {
				t.Cleanup(func() { os.RemoveAll(filepath.Dir(dir)) })
				again, err := socketDir(tt.dataDir, "plugins_registry", "gpu.nvidia.com-reg.sock")
				if err != nil || again != dir {
					t.Fatalf("second call = %q, %v; want the same %q (a restarted agent finds its sockets)", again, err, dir)
				}
				st, err := os.Stat(filepath.Dir(dir))
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode().Perm() != 0o700 {
					t.Errorf("short directory mode %v, want 0700", st.Mode().Perm())
				}
			}
		})
	}
}

// A short directory someone else prepared (here: the wrong mode) is
// refused, never used.
func TestSocketDirRefusesAForeignDirectory(t *testing.T) {
	deep := filepath.Join(t.TempDir(), strings.Repeat("e", 90))
	dir, err := socketDir(deep, "x", "s.sock")
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Dir(dir)
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := socketDir(deep, "x", "s.sock"); err == nil || !strings.Contains(err.Error(), "0700") {
		t.Fatalf("socketDir over a 0777 directory: err = %v, want a refusal naming 0700", err)
	}
}

// Close removes the short socket directories once empty, up to and
// including /tmp/skiff-sock-HASH; a socket left there keeps them.
func TestShortSocketDirRemovedWhenEmpty(t *testing.T) {
	deep := filepath.Join(t.TempDir(), strings.Repeat("f", 90))
	var g GPUs
	for _, sub := range []string{"plugins_registry", filepath.Join("plugins", "gpu.nvidia.com")} {
		dir, err := socketDir(deep, sub, "s.sock")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		g.noteSocketDir(deep, dir)
	}
	if len(g.shortDirs) != 2 {
		t.Fatalf("noted %v, want both directories (outside the data dir)", g.shortDirs)
	}
	base := filepath.Dir(g.shortDirs[0])
	t.Cleanup(func() { os.RemoveAll(base) })
	// A socket still in the registry keeps it and the base.
	left := filepath.Join(g.shortDirs[0], "other.sock")
	if err := os.WriteFile(left, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range slices.Backward(g.shortDirs) {
		removeShortSocketDir(d)
	}
	if _, err := os.Stat(left); err != nil {
		t.Fatalf("a socket left in the registry: %v", err)
	}
	if _, err := os.Stat(filepath.Join(base, "plugins")); !os.IsNotExist(err) {
		t.Errorf("the driver's empty directory is still there: %v", err)
	}
	os.Remove(left)
	for _, d := range slices.Backward(g.shortDirs) {
		removeShortSocketDir(d)
	}
	if _, err := os.Stat(base); !os.IsNotExist(err) {
		t.Errorf("%s is still there once empty: %v", base, err)
	}
	var home GPUs
	home.noteSocketDir("/data", "/data/plugins_registry")
	if len(home.shortDirs) != 0 {
		t.Errorf("a directory under the data dir noted: %v", home.shortDirs)
	}
}
