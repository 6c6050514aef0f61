package testenv

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// The registry answers as a distribution registry: the manifest by tag
// (HEAD gives its digest), the config and layer blobs it names, 404 for
// what it does not hold, and counts the pulls.
func TestRegistryServesTheImage(t *testing.T) {
	img := HPAExampleStandIn()
	img.Stub = true
	r, err := NewRegistry(img)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(r)
	defer ts.Close()
	get := func(method, path string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, _ := get(http.MethodGet, "/v2/"); resp.StatusCode != 200 || resp.Header.Get("Docker-Distribution-API-Version") != "registry/2.0" {
		t.Fatalf("/v2/: %s", resp.Status)
	}
	head, _ := get(http.MethodHead, "/v2/hpa-example/manifests/latest")
	dg := head.Header.Get("Docker-Content-Digest")
	if head.StatusCode != 200 || dg == "" || head.Header.Get("Content-Type") != ocispec.MediaTypeImageManifest {
		t.Fatalf("HEAD manifest: %s %v", head.Status, head.Header)
	}
	if n := r.Pulls("hpa-example"); n != 1 {
		t.Errorf("the resolve (HEAD) counted %d times, want 1", n)
	}
	resp, body := get(http.MethodGet, "/v2/hpa-example/manifests/"+dg)
	var m ocispec.Manifest
	if resp.StatusCode != 200 || json.Unmarshal(body, &m) != nil || len(m.Layers) != 1 {
		t.Fatalf("GET manifest by digest: %s %s", resp.Status, body)
	}
	for _, d := range append(m.Layers, m.Config) {
		if resp, b := get(http.MethodGet, "/v2/hpa-example/blobs/"+d.Digest.String()); resp.StatusCode != 200 || int64(len(b)) != d.Size {
			t.Errorf("blob %s: %s, %d bytes, want %d", d.Digest, resp.Status, len(b), d.Size)
		}
	}
	var cfg ocispec.Image
	_, cb := get(http.MethodGet, "/v2/hpa-example/blobs/"+m.Config.Digest.String())
	if err := json.Unmarshal(cb, &cfg); err != nil || len(cfg.Config.Cmd) == 0 {
		t.Errorf("config: %v %s", err, cb)
	}
	if n := r.Pulls("hpa-example"); n != 2 {
		t.Errorf("pulls %d, want 2 (the HEAD and the GET)", n)
	}
	for _, p := range []string{"/v2/hpa-example/manifests/v2", "/v2/other/manifests/latest", "/v2/hpa-example/blobs/sha256:00", "/nothing"} {
		if resp, _ := get(http.MethodGet, p); resp.StatusCode != 404 {
			t.Errorf("GET %s: %s, want 404", p, resp.Status)
		}
	}
	if resp, _ := get(http.MethodPut, "/v2/hpa-example/manifests/latest"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %s, want 405", resp.Status)
	}
}
