package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"skiff.dev/skiff/internal/ociimage"
)

// SkiffImageName is the image `skiff image self` makes by default: the
// one examples/workloads/skiff-device-plugin-daemonset.yaml runs. Its
// tag is not latest, so pods pull it only when absent (IfNotPresent).
const SkiffImageName = "skiff.dev/skiff:local"

// SkiffImagePath is where the skiff binary is in the image (on $PATH).
const SkiffImagePath = "/usr/local/bin/skiff"

// SelfImage is an image of the skiff binary exe, named name: the binary
// at SkiffImagePath and, because skiff uses cgo (go-nvml), the shared
// libraries it loads, at the paths `ldd exe` names (glibc and its
// loader), with LD_LIBRARY_PATH their directories, so it runs in a
// container with nothing else. A static binary gets none. libs are the
// libraries' paths. The NVIDIA driver's libnvidia-ml.so.1 is not among
// them (go-nvml opens it at run time, when present): in the image skiff
// has simulated GPUs only, unless the runtime puts the driver's files in
// (CDI, nvidia-container-toolkit), as NVIDIA's images rely on.
func SelfImage(exe, name string) (img ociimage.Image, libs []string, err error) {
	bin, err := os.ReadFile(exe)
	if err != nil {
		return img, nil, fmt.Errorf("read the skiff binary: %w", err)
	}
	libs, err = sharedLibraries(exe)
	if err != nil {
		return img, nil, err
	}
	img = ociimage.Image{
		Names:      []string{name},
		Entrypoint: []string{"skiff"},
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Dirs:       []string{"dev", "etc", "proc", "sys", "tmp", "root"},
		Files:      []ociimage.File{{Path: SkiffImagePath, Data: bin, Mode: 0o755}},
	}
	var dirs []string
	for _, l := range libs {
		b, err := os.ReadFile(l) // through symlinks: the file's contents at the path ldd names
		if err != nil {
			return img, nil, fmt.Errorf("read shared library %s of %s: %w", l, exe, err)
		}
		img.Files = append(img.Files, ociimage.File{Path: l, Data: b, Mode: 0o755})
		if d := filepath.Dir(l); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) > 0 {
		img.Env = append(img.Env, "LD_LIBRARY_PATH="+strings.Join(dirs, ":"))
	}
	return img, libs, nil
}

// sharedLibraries are the shared libraries exe loads, as `ldd` lists
// them; none for a static binary.
func sharedLibraries(exe string) ([]string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("ldd", exe)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	all := stdout.String() + stderr.String()
	if strings.Contains(all, "not a dynamic executable") || strings.Contains(all, "statically linked") {
		return nil, nil
	}
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, errors.New("ldd not found (Debian: libc-bin): it lists the shared libraries the image needs")
		}
		return nil, fmt.Errorf("ldd %s: %w: %s", exe, err, strings.TrimSpace(all))
	}
	return parseLdd(stdout.String())
}

// parseLdd reads ldd's lines: "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6
// (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)" (the loader), and
// "linux-vdso.so.1 (0x...)" (the kernel's, no file). A library ldd did not
// find is an error.
func parseLdd(out string) ([]string, error) {
	var libs []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		p := line
		if name, target, ok := strings.Cut(line, "=>"); ok {
			target = strings.TrimSpace(target)
			if strings.HasPrefix(target, "not found") {
				return nil, fmt.Errorf("shared library %s not found (ldd)", strings.TrimSpace(name))
			}
			p = target
		}
		if f := strings.Fields(p); len(f) > 0 && strings.HasPrefix(f[0], "/") && !slices.Contains(libs, f[0]) {
			libs = append(libs, f[0])
		}
	}
	return libs, nil
}

// ImportSelfImage makes the image of this skiff binary (SelfImage of
// os.Executable) and imports it into containerd c; it returns the names
// imported and the shared libraries it carries.
func ImportSelfImage(ctx context.Context, c Containerd, name string) (names, libs []string, err error) {
	img, libs, err := selfImage(name)
	if err != nil {
		return nil, nil, err
	}
	rt, err := OpenImages(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	defer rt.Close()
	// The archive streams into the import, not held whole beside the
	// layer (the binary's size again).
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(img.WriteArchive(pw)) }()
	names, err = rt.ImportImage(ctx, pr)
	pr.CloseWithError(errors.New("import ended")) // a writer still going stops
	if err != nil {
		return nil, nil, fmt.Errorf("import %s: %w", name, err)
	}
	return names, libs, nil
}

// WriteSelfImage writes the image of this skiff binary to file, an OCI
// archive for `skiff image import` on other machines.
func WriteSelfImage(file, name string) (libs []string, err error) {
	img, libs, err := selfImage(name)
	if err != nil {
		return nil, err
	}
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := img.WriteArchive(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", file, err)
	}
	return libs, f.Close()
}

func selfImage(name string) (ociimage.Image, []string, error) {
	exe, err := os.Executable()
	if err != nil {
		return ociimage.Image{}, nil, fmt.Errorf("find the skiff binary: %w", err)
	}
	return SelfImage(exe, name)
}
