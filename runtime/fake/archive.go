package fake

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"skiff.dev/skiff/runtime"
)

// maxMetadata bounds the files kept from an archive: manifests and configs
// are small, layers (which the fake does not need) are large.
const maxMetadata = 4 << 20

// readArchive reads the image names and configs of an OCI image layout or a
// `docker save` archive. Layers are skipped.
func readArchive(r io.Reader) ([]runtime.ImageInfo, error) {
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read archive: %w", err)
		}
		if h.Typeflag != tar.TypeReg || h.Size > maxMetadata {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("read archive %s: %w", h.Name, err)
		}
		files[path.Clean(strings.TrimPrefix(h.Name, "./"))] = data
	}
	if data, ok := files["index.json"]; ok {
		return readOCI(files, data)
	}
	if data, ok := files["manifest.json"]; ok {
		return readDocker(files, data)
	}
	return nil, errors.New("neither an OCI layout (index.json) nor a docker archive (manifest.json)")
}

func readOCI(files map[string][]byte, indexJSON []byte) ([]runtime.ImageInfo, error) {
	var index ocispec.Index
	if err := json.Unmarshal(indexJSON, &index); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	var out []runtime.ImageInfo
	for _, m := range index.Manifests {
		name := m.Annotations["io.containerd.image.name"]
		if name == "" {
			name = m.Annotations[ocispec.AnnotationRefName]
		}
		norm, err := runtime.NormalizeImageRef(name)
		if name == "" || err != nil || !strings.ContainsAny(name, ":/@") {
			continue // a bare tag names no image
		}
		img := runtime.ImageInfo{Name: norm, Digest: m.Digest.String(), Size: m.Size}
		var manifest ocispec.Manifest
		if err := json.Unmarshal(files[blobPath(m.Digest.String())], &manifest); err == nil {
			var cfg ocispec.Image
			if err := json.Unmarshal(files[blobPath(manifest.Config.Digest.String())], &cfg); err == nil {
				setConfig(&img, cfg)
			}
			for _, l := range manifest.Layers {
				img.Size += l.Size
			}
		}
		out = append(out, img)
	}
	if len(out) == 0 {
		return nil, errors.New("index.json names no image (io.containerd.image.name or a full org.opencontainers.image.ref.name)")
	}
	return out, nil
}

func blobPath(digest string) string {
	alg, hex, _ := strings.Cut(digest, ":")
	return path.Join("blobs", alg, hex)
}

func readDocker(files map[string][]byte, manifestJSON []byte) ([]runtime.ImageInfo, error) {
	var manifests []struct {
		Config   string
		RepoTags []string
	}
	if err := json.Unmarshal(manifestJSON, &manifests); err != nil {
		return nil, fmt.Errorf("manifest.json: %w", err)
	}
	var out []runtime.ImageInfo
	for _, m := range manifests {
		var cfg ocispec.Image
		_ = json.Unmarshal(files[path.Clean(m.Config)], &cfg)
		for _, tag := range m.RepoTags {
			norm, err := runtime.NormalizeImageRef(tag)
			if err != nil {
				continue
			}
			img := runtime.ImageInfo{Name: norm, Digest: "sha256:" + strings.TrimSuffix(path.Base(m.Config), ".json")}
			setConfig(&img, cfg)
			out = append(out, img)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("manifest.json names no image (RepoTags)")
	}
	return out, nil
}

func setConfig(img *runtime.ImageInfo, cfg ocispec.Image) {
	img.Entrypoint = cfg.Config.Entrypoint
	img.Cmd = cfg.Config.Cmd
	img.Env = cfg.Config.Env
	img.WorkingDir = cfg.Config.WorkingDir
	img.User = cfg.Config.User
}
