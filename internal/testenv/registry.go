package testenv

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/distribution/reference"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Registry serves images read-only over the OCI distribution API, as a
// lab room's local mirror does (GET and HEAD of /v2/,
// /v2/NAME/manifests/TAG|DIGEST and /v2/NAME/blobs/DIGEST; NAME without
// the registry's host, so it answers for any registry it mirrors). For
// YAML that names an untagged image (pull policy Always): the node pulls
// it, through its registry hosts directory, from here.
type Registry struct {
	blobs     map[string][]byte // by digest: manifests, configs, layers
	manifests map[string]string // "NAME:TAG" (path form) → manifest digest

	mu    sync.Mutex
	pulls map[string]int // "NAME:REF" of each manifest request, counted
}

// NewRegistry serves images.
func NewRegistry(images ...Image) (*Registry, error) {
	r := &Registry{blobs: map[string][]byte{}, manifests: map[string]string{}, pulls: map[string]int{}}
	for _, im := range images {
		var b bytes.Buffer
		if err := im.WriteArchive(&b); err != nil {
			return nil, err
		}
		files := map[string][]byte{}
		tr := tar.NewReader(&b)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			files[h.Name] = data
		}
		var index ocispec.Index
		if err := json.Unmarshal(files["index.json"], &index); err != nil {
			return nil, fmt.Errorf("registry: index.json: %w", err)
		}
		for name, data := range files {
			if enc, ok := strings.CutPrefix(name, "blobs/sha256/"); ok && enc != "" {
				r.blobs["sha256:"+enc] = data
			}
		}
		for _, m := range index.Manifests {
			named, err := reference.ParseNormalizedNamed(m.Annotations["io.containerd.image.name"])
			if err != nil {
				return nil, fmt.Errorf("registry: %w", err)
			}
			tagged, ok := reference.TagNameOnly(named).(reference.Tagged)
			if !ok {
				return nil, fmt.Errorf("registry: %s has no tag", named)
			}
			r.manifests[reference.Path(named)+":"+tagged.Tag()] = m.Digest.String()
		}
	}
	return r, nil
}

// Pulls is how many times the manifest of NAME (path form, e.g.
// "hpa-example") was asked for, by tag or digest, HEAD or GET: a pull
// resolves the tag (HEAD) and fetches only the blobs its content store
// lacks, so pulling an image it already holds is a HEAD alone, as a
// kubelet's Always pull of a cached image.
func (r *Registry) Pulls(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k, v := range r.pulls {
		if strings.HasPrefix(k, name+":") || strings.HasPrefix(k, name+"@") {
			n += v
		}
	}
	return n
}

// ServeHTTP implements http.Handler.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		http.Error(w, "read-only registry", http.StatusMethodNotAllowed)
		return
	}
	p := strings.TrimPrefix(req.URL.Path, "/v2/")
	if p == req.URL.Path {
		http.NotFound(w, req)
		return
	}
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if p == "" {
		w.WriteHeader(http.StatusOK)
		return
	}
	if name, ref, ok := strings.Cut(p, "/manifests/"); ok {
		dg := ref
		if !strings.HasPrefix(ref, "sha256:") {
			dg = r.manifests[name+":"+ref]
		}
		data, found := r.blobs[dg]
		if !found {
			http.Error(w, `{"errors":[{"code":"MANIFEST_UNKNOWN"}]}`, http.StatusNotFound)
			return
		}
		r.mu.Lock()
		sep := ":"
		if strings.HasPrefix(ref, "sha256:") {
			sep = "@"
		}
		r.pulls[name+sep+ref]++
		r.mu.Unlock()
		r.write(w, req, ocispec.MediaTypeImageManifest, dg, data)
		return
	}
	if _, dg, ok := strings.Cut(p, "/blobs/"); ok {
		data, found := r.blobs[dg]
		if !found {
			http.Error(w, `{"errors":[{"code":"BLOB_UNKNOWN"}]}`, http.StatusNotFound)
			return
		}
		r.write(w, req, "application/octet-stream", dg, data)
		return
	}
	http.NotFound(w, req)
}

func (r *Registry) write(w http.ResponseWriter, req *http.Request, mediaType, dg string, data []byte) {
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Docker-Content-Digest", dg)
	w.Header().Set("Content-Length", fmt.Sprint(len(data)))
	w.WriteHeader(http.StatusOK)
	if req.Method == http.MethodGet {
		_, _ = w.Write(data)
	}
}

// HPAExampleStandIn is a busybox image named like the Kubernetes docs'
// HorizontalPodAutoscaler walkthrough image (registry.k8s.io/hpa-example
// unless names are given): it serves port 80 with busybox httpd, and
// every request to / runs a CGI that burns cpu and answers "OK!", as the
// real one's index.php does (a loop of square roots). Real users pull the
// real image.
func HPAExampleStandIn(names ...string) Image {
	if len(names) == 0 {
		names = []string{"registry.k8s.io/hpa-example:latest"}
	}
	img := Busybox(names...)
	// httpd as PID 1 ignores SIGTERM; the shell stops it at once.
	img.Cmd = []string{"sh", "-c", "trap 'exit 0' TERM; httpd -f -p 80 -h /var/www/html & wait"}
	img.Executables = map[string]string{"/var/www/html/cgi-bin/index.cgi": hpaExampleCGI}
	return img
}

// hpaExampleCGI is index.php's work in busybox sh: a loop that keeps a
// core busy for a fraction of a second, then "OK!".
const hpaExampleCGI = `#!/bin/sh
echo "Content-Type: text/html"
echo
i=0
while [ $i -lt 30000 ]; do i=$((i+1)); done
echo -n "OK!"
`
