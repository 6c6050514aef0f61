// Package testenv gives integration tests what they need from the machine
// without a registry or network: OCI images built from files on the machine
// (Debian's busybox-static), and the containerd address to test against.
//
// # Images
//
// Image builds a one-layer OCI image layout archive in Go (internal/ociimage,
// which `skiff image self` uses for the skiff binary). Busybox is /bin/busybox with a symlink per
// applet, so sh, sleep, cat, env, wget, httpd, nc, head, tr... all work. The
// same image can be tagged with any names: Busybox("nginx:alpine") makes
// course YAML that names nginx run unchanged, with busybox httpd standing in
// (NginxStandIn serves "Welcome to nginx!" on port 80 like the real one).
// Names are normalised ("nginx:alpine" is docker.io/library/nginx:alpine) and
// written as io.containerd.image.name annotations, which containerd's import
// and runtime/fake both read.
package testenv

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"

	"skiff.dev/skiff/internal/ociimage"
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
	oi, err := im.ociImage()
	if err != nil {
		return err
	}
	return oi.WriteArchive(w)
}

// Archive returns the image as an OCI image layout tar.
func (im Image) Archive() ([]byte, error) {
	var b bytes.Buffer
	if err := im.WriteArchive(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ociImage is the image's root filesystem: busybox with a symlink per
// applet, /etc's passwd, group and hostname, the extra files.
func (im Image) ociImage() (ociimage.Image, error) {
	bb := im.Busybox
	if bb == "" {
		bb = BusyboxPath
	}
	bin := []byte("#!/bin/false\nstub: this image runs no processes\n")
	applets := []string{"sh", "sleep", "echo", "cat", "env"}
	if !im.Stub {
		var err error
		if bin, err = os.ReadFile(bb); err != nil {
			return ociimage.Image{}, fmt.Errorf("read busybox (apt-get install busybox-static): %w", err)
		}
		out, err := exec.Command(bb, "--list").Output()
		if err != nil {
			return ociimage.Image{}, fmt.Errorf("%s --list: %w", bb, err)
		}
		applets = strings.Fields(string(out))
	}
	oi := ociimage.Image{
		Names: im.Names, Entrypoint: im.Entrypoint, Cmd: im.Cmd, Env: im.Env, WorkingDir: im.WorkingDir,
		Dirs:     []string{"bin", "dev", "etc", "proc", "root", "sys", "tmp", "usr", "usr/bin", "usr/sbin", "usr/local", "usr/local/bin", "var", "var/www", "home"},
		Files:    []ociimage.File{{Path: "/bin/busybox", Data: bin, Mode: 0o755}},
		Symlinks: map[string]string{},
	}
	etc := map[string]string{
		"/etc/passwd":   "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n",
		"/etc/group":    "root:x:0:\nnogroup:x:65534:\n",
		"/etc/hostname": "busybox\n",
	}
	for _, name := range slices.Sorted(maps.Keys(etc)) {
		oi.Files = append(oi.Files, ociimage.File{Path: name, Data: []byte(etc[name]), Mode: 0o644})
	}
	for _, name := range slices.Sorted(maps.Keys(im.Files)) {
		oi.Files = append(oi.Files, ociimage.File{Path: name, Data: []byte(im.Files[name]), Mode: 0o644})
	}
	for _, name := range slices.Sorted(maps.Keys(im.Executables)) {
		oi.Files = append(oi.Files, ociimage.File{Path: name, Data: []byte(im.Executables[name]), Mode: 0o755})
	}
	files := map[string]bool{}
	for _, f := range oi.Files {
		files[f.Path] = true
	}
	for _, a := range applets {
		// An extra executable of the same name (a /bin/bash stand-in)
		// takes the applet's place.
		if p := "/bin/" + a; a != "busybox" && !files[p] {
			oi.Symlinks[p] = "busybox"
		}
	}
	return oi, nil
}
