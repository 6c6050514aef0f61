package apiserver

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/kubectltest"
)

// The documents as kube-apiserver serves them: the v3 discovery names
// every group version with its hash; the hashed URL is immutable, another
// hash is redirected, an ETag answers 304; v2 comes as JSON or protobuf,
// anything else is 406; none is served without credentials.
func TestOpenAPIServing(t *testing.T) {
	e := newEnv(t)
	var disc struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(e.must(http.StatusOK, "GET", "/openapi/v3", nil), &disc); err != nil {
		t.Fatal(err)
	}
	for _, k := range api.Kinds {
		gv := "api/" + k.Version
		if k.Group != "" {
			gv = "apis/" + k.Group + "/" + k.Version
		}
		if _, ok := disc.Paths[gv]; !ok {
			t.Errorf("/openapi/v3 does not list %s (%s)", gv, k.Kind)
		}
	}
	u := disc.Paths["apis/apps/v1"].ServerRelativeURL
	req := func(path string, header ...string) *http.Response {
		t.Helper()
		r, err := http.NewRequest("GET", e.ts.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer "+testToken)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := req(u, "Accept", "application/json")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "public, immutable" || resp.Header.Get("Etag") == "" {
		t.Fatalf("GET %s: %d, Cache-Control %q, Etag %q", u, resp.StatusCode, resp.Header.Get("Cache-Control"), resp.Header.Get("Etag"))
	}
	if got := req("/openapi/v3/apis/apps/v1", "If-None-Match", resp.Header.Get("Etag")); got.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %d, want 304", got.StatusCode)
	}
	if got := req("/openapi/v3/apis/apps/v1?hash=OLD"); got.StatusCode != http.StatusMovedPermanently || got.Header.Get("Location") != u {
		t.Errorf("old hash: %d to %q, want 301 to %q", got.StatusCode, got.Header.Get("Location"), u)
	}
	if got := req("/openapi/v3/apis/nope/v1"); got.StatusCode != http.StatusNotFound {
		t.Errorf("unknown group version: %d, want 404", got.StatusCode)
	}

	pb := req("/openapi/v2", "Accept", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
	if pb.StatusCode != http.StatusOK || pb.Header.Get("Content-Type") != mimeOpenAPIV2Proto {
		t.Fatalf("v2 protobuf: %d %q", pb.StatusCode, pb.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(pb.Body)
	if err != nil {
		t.Fatal(err)
	}
	var doc openapi_v2.Document
	if err := proto.Unmarshal(body, &doc); err != nil {
		t.Fatalf("v2 protobuf does not decode: %v", err)
	}
	var found bool
	for _, d := range doc.GetDefinitions().GetAdditionalProperties() {
		found = found || d.GetName() == "io.k8s.api.apps.v1.Deployment"
	}
	if !found {
		t.Error("v2 protobuf has no io.k8s.api.apps.v1.Deployment")
	}
	if got := req("/openapi/v2", "Accept", "text/html"); got.StatusCode != http.StatusNotAcceptable {
		t.Errorf("v2 as text/html: %d, want 406", got.StatusCode)
	}
	if code, _ := e.doToken("", "GET", "/openapi/v2", nil); code != http.StatusUnauthorized {
		t.Errorf("v2 without a token: %d, want 401", code)
	}
}

// The real kubectl: apply (twice: unchanged), explain from skiff's docs
// (v3, and v2 from protobuf), edit.
func TestKubectlOpenAPI(t *testing.T) {
	e := newEnv(t)
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	lab1, err := filepath.Abs("../../examples/lab1-nginx.yaml")
	if err != nil {
		t.Fatal(err)
	}
	first := c.Must(t, "", "apply", "-f", lab1)
	second := c.Must(t, "", "apply", "-f", lab1)
	for _, obj := range []string{"namespace/gpu-demo", "configmap/nginx-page", "deployment.apps/nginx-demo", "service/nginx-demo"} {
		if !strings.Contains(first, obj+" created") {
			t.Errorf("first apply: no %q:\n%s", obj+" created", first)
		}
		if !strings.Contains(second, obj+" unchanged") {
			t.Errorf("second apply: no %q:\n%s", obj+" unchanged", second)
		}
	}

	docs, err := api.LoadDocs()
	if err != nil {
		t.Fatal(err)
	}
	field := func(t reflect.Type, name string) api.Field {
		for _, f := range api.Fields(t) {
			if f.Name == name {
				return f
			}
		}
		panic(name)
	}
	replicasDoc := strings.Join(strings.Fields(docs.Field(field(reflect.TypeFor[api.DeploymentSpec](), "replicas"))), " ")
	for _, out := range []string{"plaintext", "plaintext-openapiv2"} {
		got := c.Must(t, "", "explain", "--output", out, "deployment.spec.replicas")
		if !strings.Contains(strings.Join(strings.Fields(got), " "), replicasDoc) || !strings.Contains(got, "<integer>") {
			t.Errorf("explain --output %s deployment.spec.replicas does not show skiff's doc %q:\n%s", out, replicasDoc, got)
		}
	}
	got := c.Must(t, "", "explain", "pod.spec.containers")
	for _, f := range api.Fields(reflect.TypeFor[api.Container]()) {
		if !strings.Contains(got, "  "+f.Name+"\t<") {
			t.Errorf("explain pod.spec.containers does not list %s:\n%s", f.Name, got)
		}
	}
	if strings.Contains(got, "lifecycle") {
		t.Errorf("explain pod.spec.containers lists lifecycle, which skiff does not implement:\n%s", got)
	}

	// kubectl edit: the editor changes the file; kubectl patches the change.
	editor := filepath.Join(t.TempDir(), "editor.sh")
	if err := os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/replicas: 3/replicas: 2/' \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBE_EDITOR", editor)
	if out := c.Must(t, "", "edit", "-n", "gpu-demo", "deployment/nginx-demo"); !strings.Contains(out, "deployment.apps/nginx-demo edited") {
		t.Errorf("edit: %s", out)
	}
	if out := c.Must(t, "", "get", "-n", "gpu-demo", "deployment/nginx-demo", "-o", "jsonpath={.spec.replicas}"); out != "2" {
		t.Errorf("after edit, replicas = %q, want 2", out)
	}
}

// A kept document holds its compressed bytes and no more: S2's encoder
// writes into a buffer as long as the input, and a sub-slice of it kept
// the whole buffer alive (2 MB for the v2 document).
func TestOpenAPICompressKeepsNoSpare(t *testing.T) {
	doc := []byte(strings.Repeat(`{"type":"object","properties":{"name":{"type":"string"}}},`, 2000))
	z := compress(doc)
	if cap(z) >= len(doc)/4 {
		t.Fatalf("compressed %d bytes into len %d, cap %d: want a slice about its own length, under a quarter of the input", len(doc), len(z), cap(z))
	}
	d := newOpenAPIDoc(doc, nil)
	if got, err := d.json(); err != nil || string(got) != string(doc) {
		t.Fatalf("the kept document does not decompress to what was given (err %v)", err)
	}
}
