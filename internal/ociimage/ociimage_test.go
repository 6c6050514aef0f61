package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// The archive is an OCI layout whose index names the image and whose one
// layer holds the files, links and directories with their modes.
func TestArchive(t *testing.T) {
	im := Image{
		Names: []string{"nginx:alpine"}, Cmd: []string{"sh"},
		Dirs:     []string{"tmp"},
		Files:    []File{{Path: "/usr/local/bin/tool", Data: []byte("#!/bin/sh\n"), Mode: 0o755}},
		Symlinks: map[string]string{"/bin/sh": "busybox"},
	}
	arch, err := im.Archive()
	if err != nil {
		t.Fatal(err)
	}
	blobs := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(arch))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		blobs[h.Name] = b
	}
	var idx ocispec.Index
	if err := json.Unmarshal(blobs["index.json"], &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("index.json: %v %+v", err, idx)
	}
	if n := idx.Manifests[0].Annotations["io.containerd.image.name"]; n != "docker.io/library/nginx:alpine" {
		t.Errorf("image name %q, want the normalised docker.io/library/nginx:alpine", n)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(blobs["blobs/sha256/"+idx.Manifests[0].Digest.Encoded()], &m); err != nil || len(m.Layers) != 1 {
		t.Fatalf("manifest: %v %+v", err, m)
	}
	layer := blobs["blobs/sha256/"+m.Layers[0].Digest.Encoded()]
	if d := digest.FromBytes(layer); d != m.Layers[0].Digest || int64(len(layer)) != m.Layers[0].Size {
		t.Errorf("layer blob: digest %s and %d bytes; its descriptor says %s and %d", d, len(layer), m.Layers[0].Digest, m.Layers[0].Size)
	}
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	rawTar, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	// The config's diff ID is the digest of the uncompressed layer: what
	// containerd checks when it unpacks it.
	var config ocispec.Image
	if err := json.Unmarshal(blobs["blobs/sha256/"+m.Config.Digest.Encoded()], &config); err != nil {
		t.Fatal(err)
	}
	if d := digest.FromBytes(rawTar); len(config.RootFS.DiffIDs) != 1 || config.RootFS.DiffIDs[0] != d {
		t.Errorf("diff IDs %v; want the uncompressed layer's digest %s", config.RootFS.DiffIDs, d)
	}
	got := map[string]string{}
	lr := tar.NewReader(bytes.NewReader(rawTar))
	for {
		h, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = string(rune(h.Typeflag)) + " " + strings.TrimPrefix(h.FileInfo().Mode().String(), "-") + " " + h.Linkname
	}
	for name, want := range map[string]string{
		"tmp/":               "5 dtrwxrwxrwx ",
		"usr/":               "5 drwxr-xr-x ",
		"usr/local/bin/":     "5 drwxr-xr-x ",
		"usr/local/bin/tool": "0 rwxr-xr-x ",
		"bin/sh":             "2 Lrwxrwxrwx busybox",
	} {
		if got[name] != want {
			t.Errorf("layer entry %s: %q, want %q", name, got[name], want)
		}
	}
	again, _ := im.Archive()
	if !bytes.Equal(arch, again) {
		t.Error("the same image made two different archives")
	}
	im.Files = append(im.Files, File{Path: "/bin/sh", Mode: 0o755})
	if _, err := im.Archive(); err == nil || !strings.Contains(err.Error(), "/bin/sh is given twice") {
		t.Errorf("a path both file and link: %v; want refused", err)
	}
}
