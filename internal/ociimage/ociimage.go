// Package ociimage writes a container image as an OCI image layout
// archive (oci-layout, index.json, blobs: one gzip'd tar layer, the image
// config, the manifest) from files, in Go, with no registry and no image
// builder: what `skiff image self` makes of the skiff binary, and what
// the integration tests make of Debian's busybox (internal/testenv). The
// archive imports with `skiff image import`, `ctr images import`, or
// runtime.Runtime.ImportImage.
//
// Names are normalised (nginx:alpine is docker.io/library/nginx:alpine)
// and written as io.containerd.image.name annotations, which containerd's
// import and runtime/fake both read. Everything is dated 1970-01-01, so
// the same files make the same digests.
package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	_ "crypto/sha256" // registers sha256 for go-digest
	"encoding/json"
	"fmt"
	"io"
	"path"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Image is what goes into the archive.
type Image struct {
	// Names of the image (at least one).
	Names []string
	// The image config's Entrypoint, Cmd, Env and WorkingDir.
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	// Dirs are directories to make (mode 0755; tmp 1777), by path in the
	// image; the parents of every file and link are made too.
	Dirs []string
	// Files are regular files, by absolute path in the image.
	Files []File
	// Symlinks map a path in the image to its target.
	Symlinks map[string]string
}

// File is a regular file of the image.
type File struct {
	// Path in the image (absolute).
	Path string
	Data []byte
	// Mode bits (0644, 0755).
	Mode int64
}

// epoch dates everything in the archive.
var epoch = time.Unix(0, 0).UTC()

// WriteArchive writes the image as an OCI image layout tar to w.
func (im Image) WriteArchive(w io.Writer) error {
	names := make([]string, 0, len(im.Names))
	for _, n := range im.Names {
		named, err := reference.ParseNormalizedNamed(n)
		if err != nil {
			return fmt.Errorf("image name %q: %w", n, err)
		}
		names = append(names, reference.TagNameOnly(named).String())
	}
	if len(names) == 0 {
		return fmt.Errorf("image has no name")
	}

	layer, diffID, err := im.layer()
	if err != nil {
		return err
	}
	layerDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: digest.FromBytes(layer), Size: int64(len(layer))}

	created := epoch
	config, err := json.Marshal(ocispec.Image{
		Created:  &created,
		Platform: ocispec.Platform{Architecture: runtime.GOARCH, OS: "linux"},
		Config: ocispec.ImageConfig{
			Entrypoint: im.Entrypoint, Cmd: im.Cmd, Env: im.Env, WorkingDir: im.WorkingDir,
		},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{diffID}},
	})
	if err != nil {
		return err
	}
	configDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(config), Size: int64(len(config))}

	manifest, err := json.Marshal(ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    configDesc,
		Layers:    []ocispec.Descriptor{layerDesc},
	})
	if err != nil {
		return err
	}
	index := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
	for _, n := range names {
		_, tag, _ := strings.Cut(n[strings.LastIndexByte(n, '/'):], ":")
		index.Manifests = append(index.Manifests, ocispec.Descriptor{
			MediaType: ocispec.MediaTypeImageManifest,
			Digest:    digest.FromBytes(manifest),
			Size:      int64(len(manifest)),
			Platform:  &ocispec.Platform{Architecture: runtime.GOARCH, OS: "linux"},
			Annotations: map[string]string{
				"io.containerd.image.name": n,
				ocispec.AnnotationRefName:  tag,
			},
		})
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}
	layout, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})

	tw := tar.NewWriter(w)
	files := []struct {
		name string
		data []byte
	}{
		{ocispec.ImageLayoutFile, layout},
		{"index.json", indexJSON},
		{blob(layerDesc.Digest), layer},
		{blob(configDesc.Digest), config},
		{blob(digest.FromBytes(manifest)), manifest},
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := writeFile(tw, f.name, f.data, 0o644); err != nil {
			return err
		}
	}
	return tw.Close()
}

// Archive returns the image as an OCI image layout tar.
func (im Image) Archive() ([]byte, error) {
	var b bytes.Buffer
	if err := im.WriteArchive(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func blob(d digest.Digest) string { return "blobs/" + d.Algorithm().String() + "/" + d.Encoded() }

// layer returns the gzip'd root filesystem tar and its diff ID (the digest
// of the uncompressed tar): the directories, then the files and links in
// the order of their paths. The tar is compressed and hashed as it is
// written, never held whole: for `skiff image self` (a 110 MB binary) that
// halves the peak memory.
func (im Image) layer() ([]byte, digest.Digest, error) {
	var gz bytes.Buffer
	size := 64 << 10
	for _, f := range im.Files {
		size += len(f.Data) / 2 // what BestSpeed makes of a binary, about
	}
	gz.Grow(size)
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	diff := digest.Canonical.Digester()
	tw := tar.NewWriter(io.MultiWriter(diff.Hash(), zw))
	dirs := slices.Clone(im.Dirs)
	parents := func(p string) {
		for d := path.Dir(strings.TrimPrefix(p, "/")); d != "." && d != "/"; d = path.Dir(d) {
			dirs = append(dirs, d)
		}
	}
	for _, f := range im.Files {
		parents(f.Path)
	}
	for p := range im.Symlinks {
		parents(p)
	}
	for i := range dirs {
		dirs[i] = strings.Trim(dirs[i], "/")
	}
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	for _, d := range dirs {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: epoch}); err != nil {
			return nil, "", err
		}
	}
	type entry struct {
		path string
		file *File
		link string
	}
	var entries []entry
	for i := range im.Files {
		entries = append(entries, entry{path: strings.TrimPrefix(im.Files[i].Path, "/"), file: &im.Files[i]})
	}
	for p, target := range im.Symlinks {
		entries = append(entries, entry{path: strings.TrimPrefix(p, "/"), link: target})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.path, b.path) })
	for i := 1; i < len(entries); i++ {
		if entries[i].path == entries[i-1].path {
			return nil, "", fmt.Errorf("image: /%s is given twice", entries[i].path)
		}
	}
	for _, e := range entries {
		var err error
		if e.file != nil {
			err = writeFile(tw, e.path, e.file.Data, e.file.Mode)
		} else {
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: e.path, Linkname: e.link, Mode: 0o777, ModTime: epoch})
		}
		if err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return gz.Bytes(), diff.Digest(), nil
}

func writeFile(tw *tar.Writer, name string, data []byte, mode int64) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
