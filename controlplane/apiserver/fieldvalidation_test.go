package apiserver

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/kubectltest"
)

// fieldValidation over HTTP: each mode on create, update and patch, and a
// value kube-apiserver would not take.
func TestFieldValidation(t *testing.T) {
	e := newEnv(t)
	const cm = "/api/v1/namespaces/default/configmaps"
	e.must(http.StatusCreated, "POST", cm, `{"metadata":{"name":"base"},"data":{"a":"1"}}`)
	tests := []struct {
		name, method, path, query, body, contentType string
		code                                         int
		msg, warning                                 string // in the body; the Warning header ("" none)
	}{
		{"create strict", "POST", cm, "Strict", `{"metadata":{"name":"s"},"dta":{}}`, "", 400,
			`ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "dta"`, ""},
		{"create without the parameter is strict, in skiff's words", "POST", cm, "", `{"metadata":{"name":"s"},"dta":{}}`, "", 400,
			`dta: unknown field: did you mean "data"?`, ""},
		{"create warn", "POST", cm, "Warn", `{"metadata":{"name":"w"},"dta":{}}`, "", 201, `"name":"w"`, `unknown field \"dta\"`},
		{"create ignore", "POST", cm, "Ignore", `{"metadata":{"name":"i"},"dta":{}}`, "", 201, `"name":"i"`, ""},
		{"duplicate key, strict", "POST", cm, "Strict", `{"metadata":{"name":"d","name":"e"}}`, "", 400,
			`strict decoding error: duplicate field "metadata.name"`, ""},
		{"duplicate key, warn keeps the last", "POST", cm, "Warn", `{"metadata":{"name":"d","name":"e"}}`, "", 201, `"name":"e"`, `duplicate field \"metadata.name\"`},
		{"unsupported field refused even under Ignore", "POST", "/api/v1/namespaces/default/pods", "Ignore",
			`{"metadata":{"name":"p"},"spec":{"hostPID":true,"containers":[{"name":"c","image":"x"}]}}`, "", 400, "spec.hostPID: field not supported by skiff", ""},
		{"update warn", "PUT", cm + "/base", "Warn", `{"metadata":{"name":"base"},"data":{"a":"2"},"extra":1}`, "", 200, `"a":"2"`, `unknown field \"extra\"`},
		{"merge patch strict", "PATCH", cm + "/base", "Strict", `{"bogus":1}`, "application/merge-patch+json", 400,
			`strict decoding error: unknown field "bogus"`, ""},
		{"merge patch warn", "PATCH", cm + "/base", "Warn", `{"bogus":1,"data":{"a":"3"}}`, "application/merge-patch+json", 200, `"a":"3"`, `unknown field \"bogus\"`},
		{"unknown value", "POST", cm, "Loose", `{"metadata":{"name":"x"}}`, "", 422,
			`CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loose": supported values: "", "Ignore", "Strict", "Warn"`, ""},
		{"unknown value on a patch", "PATCH", cm + "/base", "strict", `{}`, "application/merge-patch+json", 422, `PatchOptions.meta.k8s.io`, ""},
		{"reads ignore it", "GET", cm + "/base", "Loose", "", "", 200, `"name":"base"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.path
			if tt.query != "" {
				path += "?fieldValidation=" + tt.query
			}
			var header []string
			if tt.contentType != "" {
				header = []string{"Content-Type", tt.contentType}
			}
			req, err := http.NewRequest(tt.method, e.ts.URL+path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+testToken)
			req.Header.Set("Content-Type", "application/json")
			for i := 0; i+1 < len(header); i += 2 {
				req.Header.Set(header[i], header[i+1])
			}
			resp, err := e.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b := new(strings.Builder)
			if _, err := io.Copy(b, resp.Body); err != nil {
				t.Fatal(err)
			}
			text := b.String()
			if resp.StatusCode >= 400 {
				var st api.Status
				if err := json.Unmarshal([]byte(text), &st); err != nil {
					t.Fatalf("%d, not a Status: %s", resp.StatusCode, text)
				}
				text = st.Message
			}
			if resp.StatusCode != tt.code || !strings.Contains(text, tt.msg) {
				t.Fatalf("%d %s, want %d with %s", resp.StatusCode, text, tt.code, tt.msg)
			}
			warnings := strings.Join(resp.Header.Values("Warning"), "\n")
			if tt.warning == "" && warnings != "" {
				t.Errorf("warnings %q, want none", warnings)
			}
			if tt.warning != "" && !strings.Contains(warnings, `299 - "`+tt.warning+`"`) {
				t.Errorf("warnings %q, want %q", warnings, tt.warning)
			}
		})
	}
}

// The real kubectl, validation as on a real cluster: kubectl sees
// fieldValidation in the OpenAPI documents and leaves validation to the
// server; a typo is refused by apply and create (strict, the default),
// warned about by --validate=warn, and dropped by --validate=ignore/false.
func TestKubectlValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	const typo = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: typo
  namespace: default
spec:
  replica: 3
  selector:
    matchLabels: {app: typo}
  template:
    metadata:
      labels: {app: typo}
    spec:
      containers:
      - name: c
        image: nginx
`
	const refused = `Error from server (BadRequest): error when creating "STDIN": Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.replica"`
	tests := []struct {
		args   []string
		ok     bool
		stderr string // contained ("" for an empty stderr)
	}{
		{[]string{"apply", "-f", "-"}, false, refused},
		{[]string{"create", "-f", "-"}, false, refused},
		{[]string{"create", "--validate=strict", "-f", "-"}, false, refused},
		{[]string{"create", "--validate=warn", "-f", "-"}, true, `Warning: unknown field "spec.replica"`},
		{[]string{"create", "--validate=ignore", "-f", "-"}, true, ""},
		{[]string{"create", "--validate=false", "-f", "-"}, true, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := c.Run(t, typo, tt.args...)
			if (r.Err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v\nstdout: %s\nstderr: %s", r.Err, tt.ok, r.Stdout, r.Stderr)
			}
			if (tt.stderr == "" && strings.TrimSpace(r.Stderr) != "") || !strings.Contains(r.Stderr, tt.stderr) {
				t.Errorf("stderr:\n%s\nwant: %s", r.Stderr, tt.stderr)
			}
			code, _ := e.do("GET", "/apis/apps/v1/namespaces/default/deployments/typo", nil)
			if tt.ok != (code == http.StatusOK) {
				t.Errorf("after it, GET the deployment: %d (created: %v)", code, tt.ok)
			}
			if tt.ok {
				c.Must(t, "", "delete", "deployment", "typo")
			}
		})
	}
}

// apply of a changed file with a typo to an existing object: the patch is
// refused naming the field, and the object stays as it was.
func TestKubectlApplyTypoToExisting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	good := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: default\ndata:\n  a: b\n"
	c.Must(t, good, "apply", "-f", "-")
	r := c.Run(t, strings.Replace(good, "\ndata:", "\ndta:", 1), "apply", "-f", "-")
	if r.Err == nil || !strings.Contains(r.Stderr, `error when patching "STDIN": ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "dta"`) {
		t.Fatalf("err = %v, stderr:\n%s", r.Err, r.Stderr)
	}
	if got := c.Must(t, "", "get", "configmap", "x", "-o", "jsonpath={.data.a}"); got != "b" {
		t.Errorf("data.a = %q after the refused apply, want b", got)
	}
}
