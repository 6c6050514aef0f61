// Package testenv gives integration tests what they need from the machine
// without a registry or network: OCI images built from files on the machine
// (Debian's busybox-static), and the containerd address to test against.
//
// # Images
//
// Image builds a one-layer OCI image layout archive in Go: oci-layout,
// index.json and blobs (a gzip'd tar layer, an image config with
// Entrypoint/Cmd/Env, a manifest). Busybox is /bin/busybox with a symlink per
// applet, so sh, sleep, cat, env, wget, httpd, nc, head, tr... all work. The
// same image can be tagged with any names: Busybox("nginx:alpine") makes
// course YAML that names nginx run unchanged, with busybox httpd standing in
// (NginxStandIn serves "Welcome to nginx!" on port 80 like the real one).
// Names are normalised ("nginx:alpine" is docker.io/library/nginx:alpine) and
// written as io.containerd.image.name annotations, which containerd's import
// and runtime/fake both read.
package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	_ "crypto/sha256" // registers sha256 for go-digest
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
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

// BusyboxPath is where Debian's busybox-static installs its binary.
const BusyboxPath = "/bin/busybox"

// Image describes a test image.
type Image struct {
	Names      []string
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	// Files are extra regular files, by absolute path in the image.
	Files map[string]string
	// Executables are extra executable files (mode 0755), by absolute
	// path in the image: scripts standing in for programs busybox lacks.
	Executables map[string]string
	// Busybox is the static busybox binary to install (BusyboxPath if empty).
	Busybox string
	// Stub puts a placeholder file in place of busybox, for runtimes that
	// run no processes (runtime/fake) on machines without busybox-static.
	Stub bool
}

// Busybox is a busybox image named names (docker.io/library/busybox:latest
// when none), whose default command is sh, like the real one.
func Busybox(names ...string) Image {
	if len(names) == 0 {
		names = []string{"docker.io/library/busybox:latest"}
	}
	return Image{
		Names: names,
		Cmd:   []string{"sh"},
		Env:   []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	}
}

// NginxStandIn is a busybox image named nginx (docker.io/library/nginx:latest
// and nginx:alpine unless names are given) that serves
// /usr/share/nginx/html on port 80 with busybox httpd.
func NginxStandIn(names ...string) Image {
	if len(names) == 0 {
		names = []string{"docker.io/library/nginx:latest", "docker.io/library/nginx:alpine"}
	}
	img := Busybox(names...)
	img.Cmd = []string{"httpd", "-f", "-v", "-p", "80", "-h", "/usr/share/nginx/html"}
	img.Files = map[string]string{
		"/usr/share/nginx/html/index.html": "<!DOCTYPE html>\n<html><body><h1>Welcome to nginx!</h1>" +
			"<p>(busybox httpd standing in for nginx in skiff's tests)</p></body></html>\n",
	}
	return img
}

// CUDAStandIn is a busybox image named like NVIDIA's CUDA base image
// (docker.io/nvidia/cuda:12.4.0-base-ubuntu22.04 unless names are given)
// with a /bin/bash that runs busybox sh, for course YAML whose command is
// /bin/bash -c (busybox has no bash applet). nvidia-smi itself comes into
// the container with the GPU, from the CDI spec, as on a real node.
func CUDAStandIn(names ...string) Image {
	if len(names) == 0 {
		names = []string{"docker.io/nvidia/cuda:12.4.0-base-ubuntu22.04"}
	}
	img := Busybox(names...)
	img.Executables = map[string]string{"/bin/bash": bashStandIn}
	return img
}

// bashStandIn runs its arguments with busybox sh. As a container's PID 1
// it stops on SIGTERM (a shell as PID 1 ignores it, so the pod would sit
// out its whole grace period on every delete), so tests need not wait.
const bashStandIn = `#!/bin/sh
# bash stand-in: busybox sh, stopping on SIGTERM
trap 'kill -TERM $child 2>/dev/null; exit 143' TERM
/bin/sh "$@" &
child=$!
wait $child
`

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

	created := time.Unix(0, 0).UTC()
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
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: created}); err != nil {
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
// of the uncompressed tar).
func (im Image) layer() ([]byte, digest.Digest, error) {
	bb := im.Busybox
	if bb == "" {
		bb = BusyboxPath
	}
	bin := []byte("#!/bin/false\nstub: this image runs no processes\n")
	applets := []string{"sh", "sleep", "echo", "cat", "env"}
	if !im.Stub {
		var err error
		if bin, err = os.ReadFile(bb); err != nil {
			return nil, "", fmt.Errorf("read busybox (apt-get install busybox-static): %w", err)
		}
		out, err := exec.Command(bb, "--list").Output()
		if err != nil {
			return nil, "", fmt.Errorf("%s --list: %w", bb, err)
		}
		applets = strings.Fields(string(out))
	}

	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	mtime := time.Unix(0, 0).UTC()
	dirs := []string{"bin", "dev", "etc", "proc", "root", "sys", "tmp", "usr", "usr/bin", "usr/sbin", "usr/local", "usr/local/bin", "var", "var/www", "home"}
	for f := range im.Executables {
		for d := path.Dir(strings.TrimPrefix(f, "/")); d != "." && d != "/"; d = path.Dir(d) {
			dirs = append(dirs, d)
		}
	}
	for f := range im.Files {
		for d := path.Dir(strings.TrimPrefix(f, "/")); d != "." && d != "/"; d = path.Dir(d) {
			dirs = append(dirs, d)
		}
	}
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	for _, d := range dirs {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: mtime}); err != nil {
			return nil, "", err
		}
	}
	if err := writeFile(tw, "bin/busybox", bin, 0o755); err != nil {
		return nil, "", err
	}
	for _, a := range applets {
		if a == "busybox" {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, ModTime: mtime}); err != nil {
			return nil, "", err
		}
	}
	etc := map[string]string{
		"etc/passwd":   "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n",
		"etc/group":    "root:x:0:\nnogroup:x:65534:\n",
		"etc/hostname": "busybox\n",
	}
	for _, name := range slices.Sorted(maps.Keys(etc)) {
		if err := writeFile(tw, name, []byte(etc[name]), 0o644); err != nil {
			return nil, "", err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(im.Files)) {
		if err := writeFile(tw, strings.TrimPrefix(name, "/"), []byte(im.Files[name]), 0o644); err != nil {
			return nil, "", err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(im.Executables)) {
		if err := writeFile(tw, strings.TrimPrefix(name, "/"), []byte(im.Executables[name]), 0o755); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	diffID := digest.FromBytes(raw.Bytes())
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return gz.Bytes(), diffID, nil
}

func writeFile(tw *tar.Writer, name string, data []byte, mode int64) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0).UTC()}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
