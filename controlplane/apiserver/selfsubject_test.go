package apiserver

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/pki"
)

// post sends body to path with c (and token, when not "") and returns the code and body.
func (e *tlsEnv) post(t *testing.T, c *http.Client, token, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

const (
	ssarPath = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
	ssrrPath = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
	ssrPath  = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
)

func ssar(spec string) string {
	return `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":` + spec + `}`
}

func TestSelfSubjectAccessReview(t *testing.T) {
	e := newTLSEnv(t)
	seedAuthz(t, e.env)
	plain := e.client(t, "")
	n1 := e.client(t, "system:node:n1", pki.NodesGroup)
	for _, tc := range []struct {
		name   string
		c      *http.Client
		token  string
		spec   string
		allow  bool
		reason string
	}{
		{"admin may create pods", plain, testToken, `{"resourceAttributes":{"verb":"create","resource":"pods","namespace":"default"}}`, true, ""},
		{"admin may do anything anywhere", plain, testToken, `{"resourceAttributes":{"verb":"*","group":"*","resource":"*"}}`, true, ""},
		{"service account may not list pods at home: nothing by default", plain, "sa-a", `{"resourceAttributes":{"verb":"list","resource":"pods","namespace":"a"}}`, false, ""},
		{"service account may not list pods elsewhere", plain, "sa-a", `{"resourceAttributes":{"verb":"list","resource":"pods","namespace":"b"}}`, false, ""},
		{"service account may not get /metrics", plain, "sa-a", `{"nonResourceAttributes":{"verb":"get","path":"/metrics"}}`, false, ""},
		{"service account may get /version", plain, "sa-a", `{"nonResourceAttributes":{"verb":"get","path":"/version"}}`, true,
			`RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated"`},
		{"node may get its pod's secret", n1, "", `{"resourceAttributes":{"verb":"get","resource":"secrets","namespace":"x","name":"s1"}}`, true, ""},
		{"node may not get another node's pod's secret", n1, "", `{"resourceAttributes":{"verb":"get","resource":"secrets","namespace":"x","name":"s2"}}`, false,
			"no relationship found between node 'n1' and this object"},
		{"node may not list secrets", n1, "", `{"resourceAttributes":{"verb":"get","resource":"secrets","namespace":"x"}}`, false,
			"can only get individual resources of this type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := e.post(t, tc.c, tc.token, ssarPath, ssar(tc.spec))
			if code != http.StatusCreated {
				t.Fatalf("got %d: %s", code, b)
			}
			r := decode[api.SelfSubjectAccessReview](t, b)
			if r.Kind != "SelfSubjectAccessReview" || r.APIVersion != "authorization.k8s.io/v1" {
				t.Fatalf("type meta %+v", r.TypeMeta)
			}
			if r.Status.Allowed != tc.allow || r.Status.Reason != tc.reason {
				t.Fatalf("got %+v, want allowed %v reason %q", r.Status, tc.allow, tc.reason)
			}
		})
	}
}

func TestReviewsRefuseBadInput(t *testing.T) {
	e := newTLSEnv(t)
	plain := e.client(t, "")
	for _, tc := range []struct {
		name, path, body string
		code             int
		msg              string
	}{
		{"no attributes", ssarPath, ssar(`{}`), http.StatusUnprocessableEntity,
			`SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified`},
		{"both attributes", ssarPath, ssar(`{"resourceAttributes":{"verb":"get"},"nonResourceAttributes":{"verb":"get"}}`), http.StatusUnprocessableEntity,
			`: cannot be specified in combination with resourceAttributes`},
		{"unsupported field", ssarPath, ssar(`{"resourceAttributes":{"verb":"list","fieldSelector":{"rawSelector":"a=b"}}}`), http.StatusBadRequest, "fieldSelector"},
		{"rules without a namespace", ssrrPath, `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{}}`, http.StatusBadRequest, "no namespace on request"},
		{"wrong kind", ssrPath, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview"}`, http.StatusBadRequest,
			"the kind in the data (TokenReview) does not match the expected kind (SelfSubjectReview)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := e.post(t, plain, testToken, tc.path, tc.body)
			if code != tc.code {
				t.Fatalf("got %d, want %d: %s", code, tc.code, b)
			}
			if st := decode[api.Status](t, b); !strings.Contains(st.Message, tc.msg) {
				t.Fatalf("message %q, want it to contain %q", st.Message, tc.msg)
			}
		})
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+ssarPath, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := plain.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET of the reviews: %d, want 405", resp.StatusCode)
	}
}

func TestSelfSubjectReviewAndRules(t *testing.T) {
	e := newTLSEnv(t)
	n1 := e.client(t, "system:node:n1", pki.NodesGroup)
	code, b := e.post(t, n1, "", ssrPath, `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	if code != http.StatusCreated {
		t.Fatalf("whoami: %d %s", code, b)
	}
	who := decode[api.SelfSubjectReview](t, b).Status.UserInfo
	if who.Username != "system:node:n1" || strings.Join(who.Groups, ",") != "system:nodes,system:authenticated" {
		t.Fatalf("whoami: %+v", who)
	}

	code, b = e.post(t, n1, "", ssrrPath, `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{"namespace":"kube-node-lease"}}`)
	if code != http.StatusCreated {
		t.Fatalf("rules: %d %s", code, b)
	}
	rules := decode[api.SelfSubjectRulesReview](t, b).Status
	if !rules.Incomplete || !hasRule(rules, "coordination.k8s.io", "leases", "update", "n1") || hasRule(rules, "*", "*", "*", "") {
		t.Fatalf("node rules: %+v", rules)
	}
	code, b = e.post(t, e.client(t, ""), "sa-a", ssrrPath, `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{"namespace":"a"}}`)
	if code != http.StatusCreated {
		t.Fatalf("rules: %d %s", code, b)
	}
	if rules := decode[api.SelfSubjectRulesReview](t, b).Status; hasRule(rules, "*", "*", "*", "") ||
		!hasRule(rules, "authorization.k8s.io", "selfsubjectaccessreviews", "create", "") || hasRule(rules, "", "pods", "list", "") {
		t.Fatalf("service account rules at home (the basic user's only): %+v", rules)
	}
	_, b = e.post(t, e.client(t, ""), "sa-a", ssrrPath, `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{"namespace":"b"}}`)
	if rules := decode[api.SelfSubjectRulesReview](t, b).Status; hasRule(rules, "*", "*", "*", "") {
		t.Fatalf("service account rules elsewhere: %+v", rules)
	}
}

func hasRule(st api.SubjectRulesReviewStatus, group, resource, verb, name string) bool {
	for _, r := range st.ResourceRules {
		if contains(r.APIGroups, group) && contains(r.Resources, resource) && contains(r.Verbs, verb) && (name == "" && len(r.ResourceNames) == 0 || contains(r.ResourceNames, name)) {
			return true
		}
	}
	return false
}

func contains(l []string, s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}

// The review kinds are in discovery, create only.
func TestReviewDiscovery(t *testing.T) {
	e := newEnv(t)
	groups := string(e.must(http.StatusOK, "GET", "/apis", nil))
	for _, g := range []string{`"authorization.k8s.io"`, `"authentication.k8s.io"`} {
		if !strings.Contains(groups, g) {
			t.Errorf("/apis lacks %s: %s", g, groups)
		}
	}
	var rl struct {
		Resources []apiResource `json:"resources"`
	}
	if err := json.Unmarshal(e.must(http.StatusOK, "GET", "/apis/authorization.k8s.io/v1", nil), &rl); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rl.Resources {
		got = append(got, fmt.Sprintf("%s %s %v %v", r.Name, r.Kind, r.Namespaced, r.Verbs))
	}
	want := "selfsubjectaccessreviews SelfSubjectAccessReview false [create]|selfsubjectrulesreviews SelfSubjectRulesReview false [create]|subjectaccessreviews SubjectAccessReview false [create]"
	if strings.Join(got, "|") != want {
		t.Fatalf("got %q\nwant %q", strings.Join(got, "|"), want)
	}
}

// The real kubectl: `auth can-i` and `auth whoami` as the admin and as a
// node's client certificate.
func TestKubectlAuth(t *testing.T) {
	t.Parallel()
	e := newTLSEnv(t)
	seedAuthz(t, e.env)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.ts.Certificate().Raw})
	admin := kubectltest.Use(t, e.url, caPEM, testToken)
	if out := admin.Must(t, "", "auth", "can-i", "create", "pods"); out != "yes\n" {
		t.Fatalf("admin can-i create pods: %q", out)
	}
	if out := admin.Must(t, "", "auth", "whoami"); !strings.Contains(out, "skiff-admin") || !strings.Contains(out, "system:masters") {
		t.Fatalf("admin whoami:\n%s", out)
	}
	if out := admin.Must(t, "", "auth", "can-i", "--list"); !strings.Contains(out, "*.*") {
		t.Fatalf("admin can-i --list:\n%s", out)
	}

	node := kubectltest.Use(t, e.url, caPEM, "unused")
	certPEM, keyPEM := e.issue(t, "system:node:n1", pki.NodesGroup)
	writeCertKubeconfig(t, node.Kubeconfig, e.url, caPEM, certPEM, keyPEM)
	r := node.Run(t, "", "auth", "can-i", "get", "secrets", "-n", "x")
	if r.Err == nil || !strings.HasPrefix(r.Stdout, "no") {
		t.Fatalf("node can-i get secrets -n x: %v %q %q", r.Err, r.Stdout, r.Stderr)
	}
	if out := node.Must(t, "", "auth", "can-i", "get", "secrets/s1", "-n", "x"); out != "yes\n" {
		t.Fatalf("node can-i get its pod's secret: %q", out)
	}
	r = node.Run(t, "", "auth", "can-i", "get", "secrets/s2", "-n", "x")
	if r.Err == nil || r.Stdout != "no - no relationship found between node 'n1' and this object\n" {
		t.Fatalf("node can-i get another node's pod's secret: %v %q %q", r.Err, r.Stdout, r.Stderr)
	}
	r = node.Run(t, "", "get", "secret", "s2", "-n", "x")
	if want := `Error from server (Forbidden): secrets "s2" is forbidden: User "system:node:n1" cannot get resource "secrets" in API group "" in the namespace "x": no relationship found between node 'n1' and this object`; r.Err == nil || strings.TrimSpace(r.Stderr) != want {
		t.Fatalf("node get secret s2: %v\n%s\nwant %s", r.Err, r.Stderr, want)
	}
	if out := node.Must(t, "", "auth", "whoami"); !strings.Contains(out, "system:node:n1") || !strings.Contains(out, "system:nodes") {
		t.Fatalf("node whoami:\n%s", out)
	}
}

// writeCertKubeconfig writes a kubeconfig whose user is a client certificate.
func writeCertKubeconfig(t *testing.T, path, url string, caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	b64 := base64.StdEncoding.EncodeToString
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `apiVersion: v1
kind: Config
clusters:
- name: skiff
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: node
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: skiff
  context:
    cluster: skiff
    user: node
current-context: skiff
`, url, b64(caPEM), b64(certPEM), b64(keyPEM))
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}
