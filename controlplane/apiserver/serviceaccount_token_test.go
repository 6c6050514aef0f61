package apiserver

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/serviceaccount"
	"skiff.dev/skiff/controlplane/store"
)

// newSAEnv is newEnv with service account tokens on (signing, the token
// subresource, the authenticator and ServiceAccount admission).
func newSAEnv(t *testing.T) *env {
	t.Helper()
	st := defaultsStore(t, store.Options{NoSync: true})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := NewRegistry(st, logger)
	key, err := serviceaccount.LoadOrCreateKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tk, err := serviceaccount.New(key)
	if err != nil {
		t.Fatal(err)
	}
	reg.SetServiceAccountTokens(tk)
	if err := reg.EnsureDefaults(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Token = testToken
	cfg.TokenAuthenticators = []TokenAuthenticator{NewServiceAccountAuthenticator(reg)}
	srv, err := New(cfg, reg, logger)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &env{t: t, st: st, reg: reg, srv: srv, ts: ts, local: srv.Local()}
}

func (e *env) create(obj api.Object) api.Object {
	e.t.Helper()
	out, err := e.local.Create(context.Background(), obj)
	if err != nil {
		e.t.Fatalf("create %T: %v", obj, err)
	}
	return out
}

func saPod(ns, name, sa string) *api.Pod {
	return &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: ns},
		Spec: api.PodSpec{ServiceAccountName: sa, Containers: []api.Container{{Name: "c", Image: "busybox"}}}}
}

func TestServiceAccountAdmission(t *testing.T) {
	e := newSAEnv(t)
	e.create(&api.Namespace{ObjectMeta: api.ObjectMeta{Name: "team"}})
	no := false
	e.create(&api.ServiceAccount{ObjectMeta: api.ObjectMeta{Name: "quiet", Namespace: "team"}, AutomountServiceAccountToken: &no})

	t.Run("missing service account", func(t *testing.T) {
		code, b := e.do("POST", "/api/v1/namespaces/team/pods", saPod("team", "x", "builder"))
		st := status(t, b, http.StatusForbidden, api.ReasonForbidden)
		if want := `pods "x" is forbidden: error looking up service account team/builder: serviceaccount "builder" not found`; st.Message != want || code != 403 {
			t.Errorf("got %d %q, want %q", code, st.Message, want)
		}
	})
	t.Run("default account mounted", func(t *testing.T) {
		p := saPod("team", "web", "")
		p.Spec.InitContainers = []api.Container{{Name: "init", Image: "busybox"}}
		out := e.create(p).(*api.Pod)
		if out.Spec.ServiceAccountName != "default" || out.Spec.DeprecatedServiceAccount != "default" {
			t.Errorf("serviceAccountName %q serviceAccount %q, want default", out.Spec.ServiceAccountName, out.Spec.DeprecatedServiceAccount)
		}
		if len(out.Spec.Volumes) != 1 || !strings.HasPrefix(out.Spec.Volumes[0].Name, api.APIAccessVolumePrefix) || len(out.Spec.Volumes[0].Name) != len(api.APIAccessVolumePrefix)+5 {
			t.Fatalf("volumes %+v: want one kube-api-access-xxxxx", out.Spec.Volumes)
		}
		v := out.Spec.Volumes[0]
		want := api.APIAccessVolume(v.Name)
		if gb, wb := mustJSON(t, v), mustJSON(t, want); gb != wb {
			t.Errorf("volume\n%s\nwant\n%s", gb, wb)
		}
		for _, c := range append(out.Spec.InitContainers, out.Spec.Containers...) {
			if !slices.Contains(c.VolumeMounts, api.VolumeMount{Name: v.Name, MountPath: api.ServiceAccountMountPath, ReadOnly: true}) {
				t.Errorf("container %s mounts %+v", c.Name, c.VolumeMounts)
			}
		}
		if _, err := e.local.Get(context.Background(), serviceAccountKind, "team", "default"); err != nil {
			t.Errorf("the default account was not created with the first pod: %v", err)
		}
	})
	off, on := false, true
	cases := []struct {
		name      string
		sa        string
		automount *bool
		mounted   bool
	}{
		{"account says no", "quiet", nil, false},
		{"pod says yes over the account", "quiet", &on, true},
		{"pod says no", "default", &off, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := saPod("team", "p"+string(rune('a'+i)), tc.sa)
			p.Spec.AutomountServiceAccountToken = tc.automount
			out := e.create(p).(*api.Pod)
			if got := len(out.Spec.Volumes) == 1; got != tc.mounted {
				t.Errorf("volume added %v, want %v: %+v", got, tc.mounted, out.Spec.Volumes)
			}
		})
	}
	t.Run("a container with its own mount there keeps it", func(t *testing.T) {
		p := saPod("team", "own", "")
		p.Spec.Volumes = []api.Volume{{Name: "mine", EmptyDir: &api.EmptyDirVolumeSource{}}}
		p.Spec.Containers = append(p.Spec.Containers, api.Container{Name: "d", Image: "busybox",
			VolumeMounts: []api.VolumeMount{{Name: "mine", MountPath: api.ServiceAccountMountPath}}})
		out := e.create(p).(*api.Pod)
		if len(out.Spec.Volumes) != 2 || len(out.Spec.Containers[1].VolumeMounts) != 1 || len(out.Spec.Containers[0].VolumeMounts) != 1 {
			t.Errorf("spec %+v", out.Spec)
		}
	})
	t.Run("deprecated serviceAccount names the account", func(t *testing.T) {
		p := saPod("team", "old", "")
		p.Spec.DeprecatedServiceAccount = "quiet"
		out := e.create(p).(*api.Pod)
		if out.Spec.ServiceAccountName != "quiet" || len(out.Spec.Volumes) != 0 {
			t.Errorf("serviceAccountName %q volumes %d", out.Spec.ServiceAccountName, len(out.Spec.Volumes))
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTokenRequest(t *testing.T) {
	e := newSAEnv(t)
	pod := e.create(saPod("default", "web", "")).(*api.Pod)
	e.create(&api.ServiceAccount{ObjectMeta: api.ObjectMeta{Name: "other", Namespace: "default"}})
	const path = "/api/v1/namespaces/default/serviceaccounts/default/token"
	cases := []struct {
		name   string
		path   string
		body   string
		code   int
		reason string // part of the message
	}{
		{"defaults", path, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}`, 201, ""},
		{"bound to the pod", path, `{"spec":{"expirationSeconds":3607,"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"web","uid":"` + pod.UID + `"}}}`, 201, ""},
		{"too short", path, `{"spec":{"expirationSeconds":599}}`, 422, "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"},
		{"too long", path, `{"spec":{"expirationSeconds":4294967297}}`, 422, "may not specify a duration larger than 2^32 seconds"},
		{"bound to a secret", path, `{"spec":{"boundObjectRef":{"kind":"Secret","name":"s"}}}`, 422, `spec.boundObjectRef.kind: Unsupported value: "Secret"`},
		{"pod gone", path, `{"spec":{"boundObjectRef":{"kind":"Pod","name":"nope"}}}`, 404, `pods "nope" not found`},
		{"stale pod uid", path, `{"spec":{"boundObjectRef":{"kind":"Pod","name":"web","uid":"123"}}}`, 409, "the UID in the bound object reference (123) does not match"},
		{"pod of another account", "/api/v1/namespaces/default/serviceaccounts/other/token", `{"spec":{"boundObjectRef":{"kind":"Pod","name":"web"}}}`, 400,
			`cannot bind token for serviceaccount "other" to pod running with different serviceaccount name.`},
		{"no such account", "/api/v1/namespaces/default/serviceaccounts/ghost/token", `{"spec":{}}`, 404, `serviceaccounts "ghost" not found`},
		{"name mismatch", path, `{"metadata":{"name":"x"},"spec":{}}`, 422, "metadata.name: Invalid value: \"x\": must match the service account name if specified"},
		{"unknown field", path, `{"spec":{"audience":"x"}}`, 400, "audience"},
		{"wrong kind", path, `{"apiVersion":"v1","kind":"Pod","spec":{}}`, 400, "send an authentication.k8s.io/v1 TokenRequest"},
		{"GET", path, ``, 405, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := "POST"
			var body any = tc.body
			if tc.name == "GET" {
				method, body = "GET", nil
			}
			code, b := e.do(method, tc.path, body)
			if code != tc.code {
				t.Fatalf("code %d, want %d: %s", code, tc.code, b)
			}
			if tc.code != 201 {
				var st api.Status
				if err := json.Unmarshal(b, &st); err != nil {
					t.Fatalf("not a Status: %s", b)
				}
				if !strings.Contains(st.Message, tc.reason) {
					t.Errorf("message %q, want %q in it", st.Message, tc.reason)
				}
				return
			}
			var tr api.TokenRequest
			if err := json.Unmarshal(b, &tr); err != nil {
				t.Fatal(err)
			}
			if tr.Kind != "TokenRequest" || tr.APIVersion != "authentication.k8s.io/v1" || tr.Name != "default" || tr.Namespace != "default" {
				t.Errorf("meta %+v %+v", tr.TypeMeta, tr.ObjectMeta)
			}
			if tr.Status.Token == "" || tr.Status.ExpirationTimestamp.IsZero() || tr.Spec.ExpirationSeconds == nil {
				t.Fatalf("status %+v", tr.Status)
			}
			if got := tr.Status.ExpirationTimestamp.Sub(tr.CreationTimestamp.Time).Seconds(); got < float64(*tr.Spec.ExpirationSeconds)-1 || got > float64(*tr.Spec.ExpirationSeconds)+1 {
				t.Errorf("expires after %vs, want %d", got, *tr.Spec.ExpirationSeconds)
			}
			if !slices.Equal(tr.Spec.Audiences, []string{api.DefaultTokenAudience}) {
				t.Errorf("audiences %v", tr.Spec.Audiences)
			}
			c, err := e.reg.saTokens.Verify(tr.Status.Token)
			if err != nil {
				t.Fatal(err)
			}
			if bound := c.Kubernetes.Pod != nil; bound != (tc.name == "bound to the pod") {
				t.Errorf("pod claim %+v", c.Kubernetes.Pod)
			}
		})
	}
}

// token issues a token for default/default through the API.
func (e *env) token(spec string) string {
	e.t.Helper()
	b := e.must(201, "POST", "/api/v1/namespaces/default/serviceaccounts/default/token", `{"spec":`+spec+`}`)
	var tr api.TokenRequest
	if err := json.Unmarshal(b, &tr); err != nil {
		e.t.Fatal(err)
	}
	return tr.Status.Token
}

func TestServiceAccountAuthenticator(t *testing.T) {
	e := newSAEnv(t)
	ctx := context.Background()
	pod := e.create(saPod("default", "web", "")).(*api.Pod)
	plain := e.token(`{}`)
	bound := e.token(`{"boundObjectRef":{"kind":"Pod","name":"web"}}`)
	vault := e.token(`{"audiences":["vault"]}`)
	a := NewServiceAccountAuthenticator(e.reg)

	u, ok, err := a.AuthenticateToken(ctx, bound)
	if err != nil || !ok {
		t.Fatalf("bound token: ok %v err %v", ok, err)
	}
	sa, _ := e.local.Get(ctx, serviceAccountKind, "default", "default")
	want := User{Name: "system:serviceaccount:default:default", UID: sa.GetObjectMeta().UID, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:default"}}
	if u.Name != want.Name || u.UID != want.UID || !slices.Equal(u.Groups, want.Groups) {
		t.Errorf("user %+v, want %+v", u, want)
	}
	if _, ok, err := a.AuthenticateToken(ctx, testToken); ok || err != nil {
		t.Errorf("the admin token: ok %v err %v, want not mine", ok, err)
	}
	if _, ok, err := a.AuthenticateToken(ctx, vault); ok || err == nil {
		t.Errorf("a token for another audience: ok %v err %v, want refused", ok, err)
	}

	// Over HTTP: a valid token is authenticated (whatever authorization
	// then says), a bad one is 401.
	authenticated := func(tok string) bool {
		code, _ := e.doToken(tok, "GET", "/api/v1/namespaces/default/pods", nil)
		return code != http.StatusUnauthorized
	}
	if !authenticated(bound) || !authenticated(plain) {
		t.Fatal("fresh tokens were refused")
	}
	if authenticated(vault) {
		t.Error("a token for another audience authenticated")
	}

	// Deleting the pod revokes the bound token only.
	zero := int64(0)
	if err := e.local.Delete(ctx, podKind, "default", pod.Name, api.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if authenticated(bound) {
		t.Error("the bound token still works after its pod was deleted")
	}
	if _, _, err := a.AuthenticateToken(ctx, bound); err == nil || !strings.Contains(err.Error(), "pod default/web has been deleted") {
		t.Errorf("err %v", err)
	}
	// A new pod of the same name is another pod.
	e.create(saPod("default", "web", ""))
	if authenticated(bound) {
		t.Error("the bound token works for a new pod of the same name")
	}
	if !authenticated(plain) {
		t.Error("the unbound token stopped working")
	}
	// Deleting the service account revokes every token.
	if err := e.local.Delete(ctx, serviceAccountKind, "default", "default", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if authenticated(plain) {
		t.Error("a token works after its service account was deleted")
	}
	// Recreated, it has a new uid: the old tokens stay dead.
	e.create(&api.ServiceAccount{ObjectMeta: api.ObjectMeta{Name: "default", Namespace: "default"}})
	if authenticated(plain) {
		t.Error("an old token works for a recreated service account")
	}
}

// A node asks only for tokens bound to a pod of its own, by uid
// (Kubernetes' NodeRestriction); in-process callers are not restricted.
func TestNodeTokenRestriction(t *testing.T) {
	e := newSAEnv(t)
	mine := saPod("default", "mine", "")
	mine.Spec.NodeName = "n1"
	mine = e.create(mine).(*api.Pod)
	theirs := saPod("default", "theirs", "")
	theirs.Spec.NodeName = "n2"
	theirs = e.create(theirs).(*api.Pod)
	ref := func(kind, name, uid string) *api.BoundObjectReference {
		return &api.BoundObjectReference{APIVersion: "v1", Kind: kind, Name: name, UID: uid}
	}
	n1 := WithUser(context.Background(), User{Name: "system:node:n1", Groups: []string{"system:nodes", AuthenticatedGroup}})
	cases := []struct {
		name string
		ctx  context.Context
		ref  *api.BoundObjectReference
		code int
		msg  string
	}{
		{"own pod", n1, ref("Pod", "mine", mine.UID), 0, ""},
		{"unbound", n1, nil, 403, `serviceaccounts "default" is forbidden: node requested token not bound to a pod`},
		{"bound to a secret", n1, ref("Secret", "s", "u"), 403, `serviceaccounts "default" is forbidden: node requested token not bound to a pod`},
		{"no uid", n1, ref("Pod", "mine", ""), 403, `serviceaccounts "default" is forbidden: node requested token with a pod binding without a uid`},
		{"pod gone", n1, ref("Pod", "nope", "u"), 404, `pods "nope" not found`},
		{"stale uid", n1, ref("Pod", "mine", "stale"), 403,
			`serviceaccounts "default" is forbidden: the UID in the bound object reference (stale) does not match the UID in record. The object might have been deleted and then recreated`},
		{"another node's pod", n1, ref("Pod", "theirs", theirs.UID), 403, `serviceaccounts "default" is forbidden: node requested token bound to a pod scheduled on a different node`},
		{"in process, unbound", context.Background(), nil, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := &api.TokenRequest{Spec: api.TokenRequestSpec{BoundObjectRef: tc.ref}}
			out, err := e.reg.CreateToken(tc.ctx, "default", "default", tr)
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("CreateToken: %v", err)
				}
				c, err := e.reg.saTokens.Verify(out.Status.Token)
				if err != nil {
					t.Fatal(err)
				}
				if bound := c.Kubernetes.Pod != nil; bound != (tc.ref != nil) {
					t.Errorf("pod claim %+v, want bound %v", c.Kubernetes.Pod, tc.ref != nil)
				}
				return
			}
			if st := api.StatusOf(err); st.Code != int32(tc.code) || st.Message != tc.msg {
				t.Fatalf("CreateToken: %d %q, want %d %q", st.Code, st.Message, tc.code, tc.msg)
			}
		})
	}
}
