package cluster

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	rtfake "skiff.dev/skiff/runtime/fake"
)

func TestParseLdd(t *testing.T) {
	out := `	linux-vdso.so.1 (0x00007ffd4a3f2000)
	libresolv.so.2 => /lib/x86_64-linux-gnu/libresolv.so.2 (0x00007f1e8d9e8000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f1e8d807000)
	/lib64/ld-linux-x86-64.so.2 (0x00007f1e8da0a000)
`
	got, err := parseLdd(out)
	want := []string{"/lib/x86_64-linux-gnu/libresolv.so.2", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("parseLdd = %q, %v; want %q (the vDSO has no file)", got, err, want)
	}
	if _, err := parseLdd("\tlibnvidia-ml.so.1 => not found\n"); err == nil || !strings.Contains(err.Error(), "libnvidia-ml.so.1 not found") {
		t.Errorf("a library ldd did not find: %v; want an error naming it", err)
	}
}

// The image of a binary holds it on $PATH and every library ldd lists, at
// the path ldd names, and imports under its name. (ldd is Debian's
// libc-bin, an essential package: no skip.)
func TestSelfImage(t *testing.T) {
	exe, err := os.Executable() // this test binary: cgo, like skiff
	if err != nil {
		t.Fatal(err)
	}
	img, libs, err := SelfImage(exe, SkiffImageName)
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) == 0 {
		t.Fatalf("no shared libraries for %s, a cgo binary", exe)
	}
	paths := map[string]int{}
	for i, f := range img.Files {
		paths[f.Path] = i
	}
	if i, ok := paths[SkiffImagePath]; !ok || img.Files[i].Mode != 0o755 || len(img.Files[i].Data) == 0 {
		t.Errorf("the binary is not at %s, executable", SkiffImagePath)
	}
	for _, l := range libs {
		want, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		if i, ok := paths[l]; !ok || !bytes.Equal(img.Files[i].Data, want) {
			t.Errorf("library %s missing from the image, or not its contents", l)
		}
	}
	if !slices.ContainsFunc(img.Env, func(e string) bool { return strings.HasPrefix(e, "LD_LIBRARY_PATH=/") }) {
		t.Errorf("env %q: no LD_LIBRARY_PATH", img.Env)
	}
	arch, err := img.Archive()
	if err != nil {
		t.Fatal(err)
	}
	names, err := rtfake.New(rtfake.DefaultConfig()).ImportImage(context.Background(), bytes.NewReader(arch))
	if err != nil || !slices.Equal(names, []string{"skiff.dev/skiff:local"}) {
		t.Errorf("import: %q, %v; want skiff.dev/skiff:local", names, err)
	}
}
