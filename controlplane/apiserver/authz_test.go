package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/pki"
)

var (
	nodeN1 = User{Name: "system:node:n1", Groups: []string{pki.NodesGroup, AuthenticatedGroup}}
	saA    = User{Name: "system:serviceaccount:a:default", Groups: []string{ServiceAccountsGroup, ServiceAccountsGroup + ":a", AuthenticatedGroup}}
	alice  = User{Name: "alice", Groups: []string{AuthenticatedGroup}}
)

// seedAuthz creates namespaces a and x and three pods in x: p1 on node n1
// (secret s1 in a volume, configmap c1 through envFrom, the API access
// volume with kube-root-ca.crt, service account builder), p2 on n2
// (secret s2 through an env var), p3 unbound (secret s3); and the
// secrets s1, s2 and s3.
func seedAuthz(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range []string{"a", "x"} {
		if _, err := e.local.Create(ctx, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sa := range []string{"default", "builder"} {
		if _, err := e.local.Create(ctx, &api.ServiceAccount{ObjectMeta: api.ObjectMeta{Name: sa, Namespace: "x"}}); err != nil && !api.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	p1 := pod("p1", nil)
	p1.Namespace, p1.Spec.NodeName, p1.Spec.ServiceAccountName = "x", "n1", "builder"
	p1.Spec.Volumes = []api.Volume{{Name: "s", Secret: &api.SecretVolumeSource{SecretName: "s1"}}, api.APIAccessVolume("kube-api-access-abcde")}
	p1.Spec.Containers[0].EnvFrom = []api.EnvFromSource{{ConfigMapRef: &api.LocalObjectRefOptnl{Name: "c1"}}}
	p1.Spec.Containers[0].VolumeMounts = []api.VolumeMount{{Name: "s", MountPath: "/s"}}
	p2 := pod("p2", nil)
	p2.Namespace, p2.Spec.NodeName = "x", "n2"
	p2.Spec.Containers[0].Env = []api.EnvVar{{Name: "K", ValueFrom: &api.EnvVarSource{SecretKeyRef: &api.KeySelector{Name: "s2", Key: "k"}}}}
	p3 := pod("p3", nil)
	p3.Namespace = "x"
	p3.Spec.Volumes = []api.Volume{{Name: "s", Secret: &api.SecretVolumeSource{SecretName: "s3"}}}
	for _, p := range []*api.Pod{p1, p2, p3} {
		if _, err := e.local.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"s1", "s2", "s3"} {
		if _, err := e.local.Create(ctx, &api.Secret{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
}

func res(u User, verb, group, resource, sub, ns, name string) attributes {
	return attributes{user: u, verb: verb, resourceRequest: true, group: group, version: "v1", resource: resource, sub: sub, namespace: ns, name: name}
}

func path(u User, verb, p string) attributes { return attributes{user: u, verb: verb, path: p} }

func TestAuthorize(t *testing.T) {
	e := newEnv(t)
	seedAuthz(t, e)
	notInNodes := User{Name: "system:node:n1", Groups: []string{AuthenticatedGroup}}
	listPods := func(u User, sel string) attributes {
		a := res(u, "list", "", "pods", "", "", "")
		a.fieldSelector = sel
		return a
	}
	noRel := "no relationship found between node 'n1' and this object"
	discovery := `RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated"`
	basicUser := `RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole "system:basic-user" to Group "system:authenticated"`
	for _, tc := range []struct {
		name   string
		a      attributes
		allow  bool
		reason string
	}{
		{"admin reads any secret", res(adminUser(), "get", "", "secrets", "", "x", "s2"), true, ""},
		{"admin gets /metrics", path(adminUser(), "get", "/metrics"), true, ""},
		{"admin proxies to a node", res(adminUser(), "get", "", "nodes", "proxy", "", "n1"), true, ""},

		{"node gets its pod's volume secret", res(nodeN1, "get", "", "secrets", "", "x", "s1"), true, ""},
		{"node cannot get another node's pod's secret", res(nodeN1, "get", "", "secrets", "", "x", "s2"), false, noRel},
		{"node cannot get an unbound pod's secret", res(nodeN1, "get", "", "secrets", "", "x", "s3"), false, noRel},
		{"node cannot list secrets", res(nodeN1, "list", "", "secrets", "", "x", ""), false, "can only get individual resources of this type"},
		{"node cannot update its pod's secret", res(nodeN1, "update", "", "secrets", "", "x", "s1"), false, "can only get individual resources of this type"},
		{"node gets its pod's envFrom configmap", res(nodeN1, "get", "", "configmaps", "", "x", "c1"), true, ""},
		{"node gets kube-root-ca.crt where its pods are", res(nodeN1, "get", "", "configmaps", "", "x", "kube-root-ca.crt"), true, ""},
		{"node cannot get kube-root-ca.crt elsewhere", res(nodeN1, "get", "", "configmaps", "", "a", "kube-root-ca.crt"), false, noRel},
		{"node watches the GPU sharing configs", res(nodeN1, "watch", "", "configmaps", "", "kube-system", ""), true, ""},
		{"node gets a mig-parted config", res(nodeN1, "get", "", "configmaps", "", "gpu-operator", "custom-mig-parted-config"), true, ""},
		{"node cannot write the GPU configs", res(nodeN1, "update", "", "configmaps", "", "kube-system", "nvidia-device-plugin-config"), false, "can only get individual resources of this type"},
		{"node gets its pod's service account", res(nodeN1, "get", "", "serviceaccounts", "", "x", "builder"), true, ""},
		{"node creates its pod's service account token", res(nodeN1, "create", "", "serviceaccounts", "token", "x", "builder"), true, ""},
		{"node cannot create another service account's token", res(nodeN1, "create", "", "serviceaccounts", "token", "x", "default"), false, noRel},

		{"node gets its pod", res(nodeN1, "get", "", "pods", "", "x", "p1"), true, ""},
		{"node cannot get another node's pod", res(nodeN1, "get", "", "pods", "", "x", "p2"), false, noRel},
		{"node cannot get a missing pod", res(nodeN1, "get", "", "pods", "", "x", "gone"), false, noRel},
		{"node updates its pod's status", res(nodeN1, "update", "", "pods", "status", "x", "p1"), true, ""},
		{"node cannot update another node's pod's status", res(nodeN1, "patch", "", "pods", "status", "x", "p2"), false, noRel},
		{"node deletes its pod", res(nodeN1, "delete", "", "pods", "", "x", "p1"), true, ""},
		{"node evicts its pod", res(nodeN1, "create", "", "pods", "eviction", "x", "p1"), true, ""},
		{"node adds trace spans to its pod", res(nodeN1, "create", "", "pods", "trace", "x", "p1"), true, ""},
		{"node cannot add trace spans to another node's pod", res(nodeN1, "create", "", "pods", "trace", "x", "p2"), false, noRel},
		{"node cannot post an autoscaler's decisions", res(nodeN1, "create", "autoscaling", "horizontalpodautoscalers", "trace", "x", "h"), false, ""},
		{"node cannot create pods", res(nodeN1, "create", "", "pods", "", "x", ""), false, ""},
		{"node cannot exec in its pod", res(nodeN1, "create", "", "pods", "exec", "x", "p1"), false, ""},
		{"node lists its pods by field selector", listPods(nodeN1, "spec.nodeName=n1"), true, ""},
		{"node lists its pods among other selectors", listPods(nodeN1, "status.phase!=Succeeded,spec.nodeName=n1"), true, ""},
		{"node cannot list another node's pods", listPods(nodeN1, "spec.nodeName=n2"), false, "can only list/watch pods with spec.nodeName field selector"},
		{"node cannot list all pods", listPods(nodeN1, ""), false, "can only list/watch pods with spec.nodeName field selector"},

		{"node updates its Node", res(nodeN1, "update", "", "nodes", "", "", "n1"), true, ""},
		{"node creates a Node (name checked at admission)", res(nodeN1, "create", "", "nodes", "", "", ""), true, ""},
		{"node cannot update another Node", res(nodeN1, "update", "", "nodes", "", "", "n2"), false, `node "n1" is not allowed to modify node "n2"`},
		{"node patches its Node's status", res(nodeN1, "patch", "", "nodes", "status", "", "n1"), true, ""},
		{"node cannot patch another Node's status", res(nodeN1, "patch", "", "nodes", "status", "", "n2"), false, `node "n1" is not allowed to modify node "n2"`},
		{"node lists nodes", res(nodeN1, "list", "", "nodes", "", "", ""), true, ""},
		{"node cannot proxy to a node", res(nodeN1, "get", "", "nodes", "proxy", "", "n1"), false, ""},
		{"node renews its Lease", res(nodeN1, "update", "coordination.k8s.io", "leases", "", NodeLeaseNamespace, "n1"), true, ""},
		{"node cannot renew another Lease", res(nodeN1, "update", "coordination.k8s.io", "leases", "", NodeLeaseNamespace, "n2"), false, "can only access node lease with the same name as the requesting node"},
		{"node cannot touch leases elsewhere", res(nodeN1, "get", "coordination.k8s.io", "leases", "", "default", "n1"), false, `can only access leases in the "kube-node-lease" system namespace`},
		{"node cannot list leases", res(nodeN1, "list", "coordination.k8s.io", "leases", "", NodeLeaseNamespace, ""), false, "can only get, create, update, patch, or delete a node lease"},
		{"node records events", res(nodeN1, "create", "", "events", "", "x", ""), true, ""},
		{"node reads services", res(nodeN1, "watch", "", "services", "", "", ""), true, ""},
		{"node reads endpointslices", res(nodeN1, "list", "discovery.k8s.io", "endpointslices", "", "", ""), true, ""},
		{"node cannot list deployments", res(nodeN1, "list", "apps", "deployments", "", "x", ""), false, ""},
		{"node cannot get /metrics", path(nodeN1, "get", "/metrics"), false, ""},
		{"a node name without system:nodes is no node", res(notInNodes, "get", "", "secrets", "", "x", "s1"), false, ""},

		{"service account gets nothing by default", res(saA, "list", "", "pods", "", "a", ""), false, ""},
		{"service account cannot list pods in all namespaces", res(saA, "list", "", "pods", "", "", ""), false, ""},
		{"service account cannot get its own namespace", res(saA, "get", "", "namespaces", "", "a", "a"), false, ""},
		{"service account cannot list nodes", res(saA, "list", "", "nodes", "", "", ""), false, ""},
		{"service account reads discovery", path(saA, "get", "/apis/apps/v1"), true, discovery},
		{"service account reads the core discovery", path(saA, "get", "/api/v1"), true, discovery},
		{"service account reads openapi", path(saA, "get", "/openapi/v3/api/v1"), true, discovery},
		{"service account cannot post to discovery", path(saA, "post", "/api"), false, ""},
		{"service account cannot reach unknown API resources", res(saA, "get", "example.com", "widgets", "", "a", ""), false, ""},
		{"service account cannot get /metrics", path(saA, "get", "/metrics"), false, ""},
		{"service account cannot get /skiff/v1/snapshot", path(saA, "get", SnapshotPath), false, ""},

		{"anyone asks whether they may", res(alice, "create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "", ""), true, basicUser},
		{"anyone asks who they are", res(alice, "create", "authentication.k8s.io", "selfsubjectreviews", "", "", ""), true, basicUser},
		{"a user with no grant reads no pods", res(alice, "get", "", "pods", "", "default", "p"), false, ""},
		{"an unauthenticated user reads no discovery", path(User{Name: "x"}, "get", "/api"), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason, err := e.srv.authorize(context.Background(), tc.a)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.allow || reason != tc.reason {
				t.Fatalf("got %v %q, want %v %q", ok, reason, tc.allow, tc.reason)
			}
		})
	}
}

// Requests are read the way the handlers read them.
func TestRequestAttributes(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		want           attributes
	}{
		{"GET", "/api/v1/namespaces/x/pods", res(alice, "list", "", "pods", "", "x", "")},
		{"GET", "/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dn1", func() attributes {
			a := res(alice, "watch", "", "pods", "", "", "")
			a.fieldSelector = "spec.nodeName=n1"
			return a
		}()},
		{"PUT", "/api/v1/namespaces/x/pods/p/status", res(alice, "update", "", "pods", "status", "x", "p")},
		{"DELETE", "/apis/apps/v1/namespaces/x/deployments", res(alice, "deletecollection", "apps", "deployments", "", "x", "")},
		{"GET", "/api/v1/namespaces/x", res(alice, "get", "", "namespaces", "", "x", "x")},
		{"POST", "/api/v1/nodes/n1/proxy/stats", res(alice, "create", "", "nodes", "proxy", "", "n1")},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", res(alice, "create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "", "")},
		{"GET", "/metrics", path(alice, "get", "/metrics")},
		{"GET", "/apis/apps/v1", path(alice, "get", "/apis/apps/v1")},
		{"POST", "/apis/nosuch.io/v1/things", res(alice, "create", "nosuch.io", "things", "", "", "")},
		{"GET", "/api/v1/namespaces/x/widgets/w", res(alice, "get", "", "widgets", "", "x", "w")},
		{"GET", "/apis/nosuch.io/v1/namespaces/x/things?watch=1", res(alice, "watch", "nosuch.io", "things", "", "x", "")},
		{"DELETE", "/apis/nosuch.io/v1/things", res(alice, "deletecollection", "nosuch.io", "things", "", "", "")},
		{"PATCH", "/apis/nosuch.io/v1/things/t/status", res(alice, "patch", "nosuch.io", "things", "status", "", "t")},
		{"GET", "/api/v2/namespaces/x", res(alice, "get", "", "namespaces", "", "x", "x")},
		{"HEAD", "/api/v1/namespaces/x/pods", res(alice, "head", "", "pods", "", "x", "")},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		got := requestAttributes(r, alice)
		want := tc.want
		if want.resourceRequest {
			want.path = got.path
		}
		if got.verb != want.verb || got.resourceRequest != want.resourceRequest || got.group != want.group ||
			got.resource != want.resource || got.sub != want.sub || got.namespace != want.namespace ||
			got.name != want.name || got.fieldSelector != want.fieldSelector || got.path != want.path {
			t.Errorf("%s %s: got %+v, want %+v", tc.method, tc.target, got, want)
		}
	}
}

// The 403 bodies read as kube-apiserver's.
func TestForbiddenMessages(t *testing.T) {
	for _, tc := range []struct {
		a      attributes
		reason string
		want   string
	}{
		{res(saA, "list", "", "pods", "", "b", ""), "",
			`pods is forbidden: User "system:serviceaccount:a:default" cannot list resource "pods" in API group "" in the namespace "b"`},
		{res(nodeN1, "get", "", "secrets", "", "x", "s2"), "no relationship found between node 'n1' and this object",
			`secrets "s2" is forbidden: User "system:node:n1" cannot get resource "secrets" in API group "" in the namespace "x": no relationship found between node 'n1' and this object`},
		{res(saA, "list", "apps", "deployments", "", "", ""), "",
			`deployments.apps is forbidden: User "system:serviceaccount:a:default" cannot list resource "deployments" in API group "apps" at the cluster scope`},
		{res(saA, "get", "", "nodes", "proxy", "", "n1"), "",
			`nodes "n1" is forbidden: User "system:serviceaccount:a:default" cannot get resource "nodes/proxy" in API group "" at the cluster scope`},
		{path(saA, "get", "/metrics"), "",
			`forbidden: User "system:serviceaccount:a:default" cannot get path "/metrics"`},
	} {
		e := forbiddenError(tc.a, tc.reason)
		if e.Status.Message != tc.want || e.Status.Code != http.StatusForbidden || e.Status.Reason != api.ReasonForbidden {
			t.Errorf("got %d %s %q\nwant 403 Forbidden %q", e.Status.Code, e.Status.Reason, e.Status.Message, tc.want)
		}
		if d := e.Status.Details; d == nil || d.Kind != tc.a.resource || d.Group != tc.a.group || d.Name != tc.a.name {
			t.Errorf("%q: details %+v", tc.want, d)
		}
	}
}

// A node creates only its own Node and Lease (NodeRestriction); the
// in-process callers, without a user, are not restricted.
func TestNodeRestriction(t *testing.T) {
	e := newEnv(t)
	node := func(name string) *api.Node {
		return &api.Node{ObjectMeta: api.ObjectMeta{Name: name}}
	}
	ctx := WithUser(context.Background(), nodeN1)
	if _, err := e.reg.Create(ctx, nodeKind, node("n1")); err != nil {
		t.Fatalf("own node: %v", err)
	}
	_, err := e.reg.Create(ctx, nodeKind, node("n2"))
	if st := api.StatusOf(err); st.Code != http.StatusForbidden || st.Message != `nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"` {
		t.Fatalf("other node: %v", err)
	}
	gen := node("")
	gen.GenerateName = "n"
	if _, err := e.reg.Create(ctx, nodeKind, gen); api.StatusOf(err).Code != http.StatusForbidden {
		t.Fatalf("generated node name: %v", err)
	}
	if _, err := e.reg.Create(context.Background(), nodeKind, node("n3")); err != nil {
		t.Fatalf("in-process create: %v", err)
	}
}

// fakeTokens authenticates tokens from a map; "broken" is recognized but bad.
type fakeTokens map[string]User

func (f fakeTokens) AuthenticateToken(_ context.Context, tok string) (User, bool, error) {
	if tok == "broken" {
		return User{}, false, errors.New("token expired")
	}
	u, ok := f[tok]
	return u, ok, nil
}

// tlsEnv serves the API over TLS that verifies client certificates from
// a cluster CA made for the test, as `skiff server` does, with a
// ServiceAccount-like token authenticator.
type tlsEnv struct {
	*env
	ca  *pki.CA
	ts  *httptest.Server
	url string
	srv *Server
}

func newTLSEnv(t *testing.T) *tlsEnv {
	t.Helper()
	e := newEnv(t)
	ca, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Token = testToken
	cfg.TokenAuthenticators = []TokenAuthenticator{fakeTokens{"sa-a": saA}}
	srv, err := New(cfg, e.reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.TLS = &tls.Config{ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool()}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return &tlsEnv{env: e, ca: ca, ts: ts, url: ts.URL, srv: srv}
}

// client returns an HTTPS client presenting a certificate of the cluster
// CA for user cn in groups (none when cn is "").
func (e *tlsEnv) client(t *testing.T, cn string, groups ...string) *http.Client {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(e.ts.Certificate())
	cfg := &tls.Config{RootCAs: roots}
	if cn != "" {
		c, err := tls.X509KeyPair(e.issue(t, cn, groups...))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
}

// issue signs a client certificate for user cn in groups.
func (e *tlsEnv) issue(t *testing.T, cn string, groups ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := e.ca.Issue(pki.Leaf{CommonName: cn, Organization: groups, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

func TestAuthenticationOverTLS(t *testing.T) {
	e := newTLSEnv(t)
	seedAuthz(t, e.env)
	n1 := e.client(t, "system:node:n1", pki.NodesGroup)
	plain := e.client(t, "")
	for _, tc := range []struct {
		name   string
		c      *http.Client
		token  string
		method string
		path   string
		code   int
		msg    string
	}{
		{"node reads its pod's secret", n1, "", "GET", "/api/v1/namespaces/x/secrets/s1", http.StatusOK, ""},
		{"node cannot read another node's pod's secret", n1, "", "GET", "/api/v1/namespaces/x/secrets/s2", http.StatusForbidden,
			`secrets "s2" is forbidden: User "system:node:n1" cannot get resource "secrets" in API group "" in the namespace "x": no relationship found between node 'n1' and this object`},
		{"node lists its pods", n1, "", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1", http.StatusOK, ""},
		{"node cannot list all pods", n1, "", "GET", "/api/v1/pods", http.StatusForbidden,
			`pods is forbidden: User "system:node:n1" cannot list resource "pods" in API group "" at the cluster scope: can only list/watch pods with spec.nodeName field selector`},
		// A node's DRA driver finds its ResourceSlice by listing its own
		// (a get of one not created yet is 403, as the Node authorizer's).
		{"node lists its resource slices", n1, "", "GET", "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dn1", http.StatusOK, ""},
		{"node cannot list all resource slices", n1, "", "GET", "/apis/resource.k8s.io/v1/resourceslices", http.StatusForbidden,
			`resourceslices.resource.k8s.io is forbidden: User "system:node:n1" cannot list resource "resourceslices" in API group "resource.k8s.io" at the cluster scope: can only list/watch/deleteCollection resourceslices with nodeName field selector`},
		{"node cannot get a slice that does not exist", n1, "", "GET", "/apis/resource.k8s.io/v1/resourceslices/n1-gpu.nvidia.com", http.StatusForbidden, ""},
		{"node cannot read /metrics", n1, "", "GET", "/metrics", http.StatusForbidden, `forbidden: User "system:node:n1" cannot get path "/metrics"`},
		{"a bad token is refused even with a certificate", n1, "nope", "GET", "/api", http.StatusUnauthorized, "Unauthorized"},
		{"service account token lists nothing by default", plain, "sa-a", "GET", "/api/v1/namespaces/a/pods", http.StatusForbidden,
			`pods is forbidden: User "system:serviceaccount:a:default" cannot list resource "pods" in API group "" in the namespace "a"`},
		{"service account token is refused elsewhere", plain, "sa-a", "GET", "/api/v1/namespaces/b/pods", http.StatusForbidden,
			`pods is forbidden: User "system:serviceaccount:a:default" cannot list resource "pods" in API group "" in the namespace "b"`},
		{"service account reads discovery", plain, "sa-a", "GET", "/apis", http.StatusOK, ""},
		{"an authenticator's error is 401", plain, "broken", "GET", "/api", http.StatusUnauthorized, "Unauthorized"},
		{"admin token", plain, testToken, "GET", "/metrics", http.StatusOK, ""},
		{"no credential", plain, "", "GET", "/api/v1/pods", http.StatusUnauthorized, "Unauthorized"},
		{"health without a credential", plain, "", "GET", "/healthz", http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, e.url+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := tc.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code {
				t.Fatalf("got %d, want %d: %s", resp.StatusCode, tc.code, b)
			}
			if tc.msg != "" {
				var st api.Status
				if err := json.Unmarshal(b, &st); err != nil || st.Message != tc.msg {
					t.Fatalf("got %s\nwant message %q", b, tc.msg)
				}
			}
		})
	}
}

// A node may update one of its pods only to write HAMi's bind phase (its
// HAMi device plugin's one write); any other change is forbidden.
func TestNodeRestrictPodUpdate(t *testing.T) {
	e := newEnv(t)
	bg := context.Background()
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "p", Namespace: "default", Annotations: map[string]string{api.HAMiBindPhase: "allocating", "keep": "x"}},
		Spec: api.PodSpec{NodeName: "n1", Containers: []api.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := e.reg.Create(bg, podKind, p); err != nil {
		t.Fatal(err)
	}
	ctx := WithUser(bg, nodeN1)
	get := func() *api.Pod {
		o, err := e.reg.Get(bg, podKind, "default", "p")
		if err != nil {
			t.Fatal(err)
		}
		return o.(*api.Pod)
	}
	ok := get()
	ok.Annotations[api.HAMiBindPhase] = "success"
	if _, err := e.reg.Update(ctx, podKind, ok); err != nil {
		t.Fatalf("bind phase: %v", err)
	}
	if got := get().Annotations; got[api.HAMiBindPhase] != "success" || got["keep"] != "x" {
		t.Fatalf("annotations %v", got)
	}
	for name, edit := range map[string]func(*api.Pod){
		"another annotation": func(p *api.Pod) { p.Annotations["keep"] = "y" },
		"a label":            func(p *api.Pod) { p.Labels = map[string]string{"a": "b"} },
		"the decision":       func(p *api.Pod) { p.Annotations[api.HAMiDevicesToAllocate] = "GPU-0,NVIDIA,1,1:;" },
		"the spec":           func(p *api.Pod) { p.Spec.Containers[0].Image = "nginx" },
	} {
		bad := get()
		edit(bad)
		_, err := e.reg.Update(ctx, podKind, bad)
		if st := api.StatusOf(err); st.Code != http.StatusForbidden || !strings.Contains(st.Message, `node "n1" may only change the annotation hami.io/bind-phase of its pods`) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := get(); got.Annotations["keep"] != "x" || got.Spec.Containers[0].Image != "busybox" {
		t.Fatalf("a refused update changed the pod: %+v", got)
	}
}
