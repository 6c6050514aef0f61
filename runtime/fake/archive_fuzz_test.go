package fake_test

import (
	"archive/tar"
	"bytes"
	"context"
	"slices"
	"testing"

	"skiff.dev/skiff/internal/testenv"
	"skiff.dev/skiff/runtime"
	"skiff.dev/skiff/runtime/fake"
)

// tarOf is a tar archive of name, content pairs.
func tarOf(f *testing.F, files ...string) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i := 0; i+1 < len(files); i += 2 {
		if err := tw.WriteHeader(&tar.Header{Name: files[i], Mode: 0o644, Size: int64(len(files[i+1])), Typeflag: tar.TypeReg}); err != nil {
			f.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[i+1])); err != nil {
			f.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		f.Fatal(err)
	}
	return b.Bytes()
}

// FuzzImportArchive imports any bytes as `skiff image import` does into the
// simulated runtime: an archive is refused with an error or brings in at
// least one image, each named by a normalized reference that the runtime
// then lists; importing it again brings in the same names.
func FuzzImportArchive(f *testing.F) {
	for _, img := range []testenv.Image{testenv.Busybox(), testenv.NginxStandIn(), testenv.CUDAStandIn()} {
		img.Stub = true
		data, err := img.Archive()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(tarOf(f, "manifest.json", `[{"Config":"c.json","RepoTags":["busybox:1.36","bad ref!"]}]`, "c.json", `{"config":{"Cmd":["sh"]}}`))
	f.Add(tarOf(f, "index.json", `{"manifests":[{"digest":"sha256:00","size":-5,"annotations":{"org.opencontainers.image.ref.name":"latest"}}]}`))
	f.Add(tarOf(f, "./index.json", `{"manifests":[{"digest":"x","annotations":{"io.containerd.image.name":"docker.io/library/x:1"}}]}`, "blobs/x", `{"layers":[{"size":9223372036854775807},{"size":1}]}`))
	f.Add(tarOf(f, "manifest.json", `{}`))
	f.Add(tarOf(f, "other", "x"))
	f.Add([]byte("not a tar"))
	f.Add([]byte{})
	r := fake.New(fake.Config{})
	f.Cleanup(func() { r.Close() })
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 256<<10 {
			t.Skip("input too large")
		}
		ctx := context.Background()
		names, err := r.ImportImage(ctx, bytes.NewReader(data))
		if err != nil {
			return
		}
		if len(names) == 0 {
			t.Fatal("an import without error brought in no image")
		}
		list, err := r.ListImages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			norm, err := runtime.NormalizeImageRef(n)
			if err != nil || norm != n {
				t.Fatalf("image named %q, normalized %q (%v)", n, norm, err)
			}
			if !slices.ContainsFunc(list, func(i runtime.ImageInfo) bool { return i.Name == n }) {
				t.Fatalf("imported %q, not listed", n)
			}
		}
		again, err := r.ImportImage(ctx, bytes.NewReader(data))
		if err != nil || !slices.Equal(names, again) {
			t.Fatalf("imported %q, then %q (%v)", names, again, err)
		}
	})
}
