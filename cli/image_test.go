package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"skiff.dev/skiff/cluster"
	rtfake "skiff.dev/skiff/runtime/fake"
)

// skiff image finds the containerd the local node runs on: flags first,
// then what `skiff up`/`agent` recorded, then the defaults.
func TestImageRuntimeConfig(t *testing.T) {
	tests := []struct {
		name          string
		recorded      *cluster.Containerd
		args          []string
		wantAddr, wNS string
	}{
		{"defaults", nil, nil, "/run/containerd/containerd.sock", "skiff"},
		{"the node's", &cluster.Containerd{Address: "/run/lab/containerd.sock", Namespace: "lab"}, nil, "/run/lab/containerd.sock", "lab"},
		{"flags win", &cluster.Containerd{Address: "/run/lab/containerd.sock", Namespace: "lab"},
			[]string{"--containerd-namespace", "other", "--containerd-address", "/run/other.sock"}, "/run/other.sock", "other"},
		{"one flag, the rest the node's", &cluster.Containerd{Address: "/run/lab/containerd.sock", Namespace: "lab"},
			[]string{"--containerd-namespace", "other"}, "/run/lab/containerd.sock", "other"},
		{"flags without a node", nil, []string{"--containerd-namespace", "other"}, "/run/containerd/containerd.sock", "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HOME", t.TempDir())
			if tt.recorded != nil {
				if err := cluster.RecordContainerd(*tt.recorded); err != nil {
					t.Fatal(err)
				}
			}
			var out, errb bytes.Buffer
			ic := &imageCmd{r: NewRoot(&out, &errb)}
			cmd := ic.command()
			if err := cmd.PersistentFlags().Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			cfg := ic.runtimeConfig()
			if cfg.Address != tt.wantAddr || cfg.Namespace != tt.wNS {
				t.Errorf("containerd %s namespace %s; want %s namespace %s", cfg.Address, cfg.Namespace, tt.wantAddr, tt.wNS)
			}
			if errb.Len() > 0 {
				t.Errorf("stderr: %s", errb.String())
			}
		})
	}
}

// skiff image self -o FILE writes an archive of this binary (here the
// test binary, cgo like skiff) that imports as skiff.dev/skiff:local, and
// says what it holds.
func TestImageSelfWritesArchive(t *testing.T) {
	file := filepath.Join(t.TempDir(), "skiff.tar")
	var out, errb bytes.Buffer
	if err := Main(context.Background(), []string{"image", "self", "-o", file}, &out, &errb); err != nil {
		t.Fatalf("skiff image self: %v\n%s", err, errb.String())
	}
	if want := "image/" + cluster.SkiffImageName + " written to " + file + " (the skiff binary and the "; !strings.HasPrefix(out.String(), want) ||
		!strings.Contains(out.String(), "libc.so.6") {
		t.Errorf("output %q; want it to start %q and name libc", out.String(), want)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names, err := rtfake.New(rtfake.DefaultConfig()).ImportImage(context.Background(), f)
	if err != nil || !slices.Equal(names, []string{cluster.SkiffImageName}) {
		t.Errorf("import: %q, %v", names, err)
	}
}
