package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/apiserver"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/dashboard"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/pki"
)

const adminToken = "admin-token"

// testServer is a real API server with the dashboard, over TLS.
type testServer struct {
	ts    *httptest.Server
	local *apiserver.Local
	dash  *dashboard.Dashboard
	recs  *dashboard.Reconciles
	now   *fakeClock
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// users maps test bearer tokens to users (a node, a service account).
type users map[string]apiserver.User

func (u users) AuthenticateToken(_ context.Context, tok string) (apiserver.User, bool, error) {
	us, ok := u[tok]
	return us, ok, nil
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "skiff.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logger := slog.New(slog.DiscardHandler)
	reg := apiserver.NewRegistry(st, logger)
	if err := reg.EnsureDefaults(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Now()}
	sessions := dashboard.NewSessions()
	sessions.Now = clock.Now
	recs := dashboard.NewReconciles(10)
	local := apiserver.NewLocal(reg)
	dash, err := dashboard.New(dashboard.Config{Client: local, Sessions: sessions, Reconciles: recs, Heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := apiserver.DefaultConfig()
	cfg.Token = adminToken
	cfg.Dashboard = dash
	cfg.TokenAuthenticators = []apiserver.TokenAuthenticator{users{
		"node-token":  {Name: "system:node:n1", Groups: []string{"system:nodes"}},
		"alice-token": {Name: "alice", Groups: []string{"students"}},
	}}
	srv, err := apiserver.New(cfg, reg, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	ts := httptest.NewTLSServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &testServer{ts: ts, local: local, dash: dash, recs: recs, now: clock}
}

// browser is a client with a cookie jar that does not follow redirects.
func (s *testServer) browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := *s.ts.Client() // a copy: the server's client is shared
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func (s *testServer) do(t *testing.T, c *http.Client, method, path, token, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, s.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// loginURL asks for a code as the admin, as `skiff dashboard` does.
func (s *testServer) loginURL(t *testing.T, view string) string {
	t.Helper()
	return s.loginURLAs(t, adminToken, view)
}

// loginURLAs asks for a code with token.
func (s *testServer) loginURLAs(t *testing.T, token, view string) string {
	t.Helper()
	b, _ := json.Marshal(dashboard.LoginCodeRequest{View: view})
	resp := s.do(t, s.ts.Client(), http.MethodPost, dashboard.LoginCodePath, token, string(b))
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("login code: %s %s", resp.Status, body)
	}
	var lc dashboard.LoginCodeResponse
	if err := json.NewDecoder(resp.Body).Decode(&lc); err != nil {
		t.Fatal(err)
	}
	return lc.URL
}

var dashboardPaths = []string{
	"/dashboard/", "/dashboard/static/app.js", "/dashboard/static/style.css", "/dashboard/api/whoami",
	"/dashboard/api/watch", "/dashboard/api/chain/default/web", "/dashboard/api/devices/n1",
	"/dashboard/api/hpa/default/web", "/dashboard/static/hpa.js", "/dashboard/no-such-page", "/dashboard/login",
}

// Without a session every dashboard path answers 401 with a Status, the
// API's bearer token does not open them, and nothing of the page leaks.
func TestNoSessionIs401(t *testing.T) {
	s := newTestServer(t)
	for _, tc := range []struct {
		name   string
		token  string
		cookie string
	}{
		{"no cookie", "", ""},
		{"the admin token is not a session", adminToken, ""},
		{"a made-up cookie", "", "skiff-dashboard=bm90LWEtc2Vzc2lvbg"},
		{"an empty cookie", "", "skiff-dashboard="},
	} {
		for _, p := range dashboardPaths {
			t.Run(tc.name+" "+p, func(t *testing.T) {
				req, _ := http.NewRequest(http.MethodGet, s.ts.URL+p, nil)
				if tc.token != "" {
					req.Header.Set("Authorization", "Bearer "+tc.token)
				}
				if tc.cookie != "" {
					req.Header.Set("Cookie", tc.cookie)
				}
				resp, err := s.ts.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("GET %s: %s, want 401:\n%s", p, resp.Status, body)
				}
				var st api.Status
				if err := json.Unmarshal(body, &st); err != nil || st.Reason != api.ReasonUnauthorized {
					t.Fatalf("GET %s: body %s is not an Unauthorized Status (%v)", p, body, err)
				}
				if strings.Contains(string(body), "<html") || strings.Contains(string(body), "function") {
					t.Fatalf("GET %s: the page leaked without a session:\n%s", p, body)
				}
			})
		}
	}
}

// Any authenticated user gets a login code (their session reads as them),
// and only for a request that says exactly what it means: a misspelt field or an
// unknown view is 400 with the reason, never a code for the cluster view.
func TestLoginCodeNeedsTheAdmin(t *testing.T) {
	s := newTestServer(t)
	for _, tc := range []struct {
		name, token, body string
		want              int
		wantMsg           string // in the Status message, for errors
	}{
		{"no credential", "", `{}`, http.StatusUnauthorized, "Unauthorized"},
		{"a wrong token", "nope", `{}`, http.StatusUnauthorized, "Unauthorized"},
		{"a node (for what it may read)", "node-token", `{}`, http.StatusOK, ""},
		{"the admin", adminToken, `{"view":"chain/default/web"}`, http.StatusOK, ""},
		{"the admin, the cluster view", adminToken, `{}`, http.StatusOK, ""},
		{"the admin, a bad view", adminToken, `{"view":"../../etc"}`, http.StatusBadRequest, `view "../../etc": want chain/NAMESPACE/POD, sequence/NODE, hpa/NAMESPACE/NAME, loops or cluster`},
		{"the admin, an unknown view", adminToken, `{"view":"graphs"}`, http.StatusBadRequest, `view "graphs"`},
		{"the admin, a misspelt field", adminToken, `{"veiw":"loops"}`, http.StatusBadRequest, "veiw: unknown field"},
		{"the admin, a field twice", adminToken, `{"view":"loops","view":"cluster"}`, http.StatusBadRequest, "view: duplicate field"},
		{"the admin, data after the request", adminToken, `{"view":"loops"} {"view":"cluster"}`, http.StatusBadRequest, "decode dashboard login request"},
		{"the admin, a bad body", adminToken, `{"view":`, http.StatusBadRequest, "decode dashboard login request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := s.do(t, s.ts.Client(), http.MethodPost, dashboard.LoginCodePath, tc.token, tc.body)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.want {
				t.Fatalf("POST %s: %s, want %d: %s", dashboard.LoginCodePath, resp.Status, tc.want, body)
			}
			if tc.want == http.StatusOK {
				return
			}
			var st api.Status
			if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" || !strings.Contains(st.Message, tc.wantMsg) {
				t.Fatalf("POST %s: body %s (%v), want a Status whose message has %q", dashboard.LoginCodePath, body, err, tc.wantMsg)
			}
		})
	}
}

// The one-time URL sets a session cookie (HttpOnly, Secure,
// SameSite=Strict), redirects to the view without the code, and works
// once; the session opens the page and its data as the admin.
func TestLoginURLWorksOnce(t *testing.T) {
	s := newTestServer(t)
	u := s.loginURL(t, "chain/default/web")
	if !strings.HasPrefix(u, dashboard.LoginPath+"?code=") {
		t.Fatalf("login URL %q", u)
	}
	b := s.browser(t)
	resp := s.do(t, b, http.MethodGet, u, "", "")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %s, want 303", resp.Status)
	}
	if loc := resp.Header.Get("Location"); loc != "/dashboard/#/chain/default/web" {
		t.Errorf("redirect to %q, want /dashboard/#/chain/default/web (no code)", loc)
	}
	sc := resp.Header.Get("Set-Cookie")
	for _, want := range []string{dashboard.CookieName + "=", "Path=/dashboard/", "HttpOnly", "Secure", "SameSite=Strict", "Max-Age="} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q lacks %q", sc, want)
		}
	}
	page := s.do(t, b, http.MethodGet, "/dashboard/", "", "")
	body, _ := io.ReadAll(page.Body)
	if page.StatusCode != http.StatusOK || !strings.Contains(string(body), "<html") {
		t.Fatalf("page with the session: %s\n%s", page.Status, body)
	}
	if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("Content-Security-Policy %q: want default-src 'self'", csp)
	}
	who := s.do(t, b, http.MethodGet, "/dashboard/api/whoami", "", "")
	wb, _ := io.ReadAll(who.Body)
	if who.StatusCode != http.StatusOK || !strings.Contains(string(wb), `"user":"`+apiserver.AdminUser+`"`) || !strings.Contains(string(wb), pki.MastersGroup) {
		t.Errorf("whoami: %s %s, want the admin", who.Status, wb)
	}

	// Again, in another browser: the code is spent.
	again := s.do(t, s.browser(t), http.MethodGet, u, "", "")
	if again.StatusCode != http.StatusUnauthorized || again.Header.Get("Set-Cookie") != "" {
		t.Fatalf("second use of the login URL: %s (Set-Cookie %q), want 401 and no cookie", again.Status, again.Header.Get("Set-Cookie"))
	}
	// Logout ends the session.
	if lo := s.do(t, b, http.MethodPost, "/dashboard/api/logout", "", ""); lo.StatusCode != http.StatusNoContent {
		t.Fatalf("logout: %s", lo.Status)
	}
	if r := s.do(t, b, http.MethodGet, "/dashboard/", "", ""); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after logout: %s, want 401", r.Status)
	}
}

// A code expires after CodeTTL unused; a session after SessionTTL.
func TestExpiry(t *testing.T) {
	s := newTestServer(t)
	t.Run("code", func(t *testing.T) {
		u := s.loginURL(t, "")
		s.now.Add(dashboard.CodeTTL)
		if r := s.do(t, s.browser(t), http.MethodGet, u, "", ""); r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("expired code: %s, want 401", r.Status)
		}
	})
	t.Run("session", func(t *testing.T) {
		b := s.browser(t)
		if r := s.do(t, b, http.MethodGet, s.loginURL(t, ""), "", ""); r.StatusCode != http.StatusSeeOther {
			t.Fatalf("login: %s", r.Status)
		}
		s.now.Add(dashboard.SessionTTL - time.Second)
		if r := s.do(t, b, http.MethodGet, "/dashboard/api/whoami", "", ""); r.StatusCode != http.StatusOK {
			t.Fatalf("a second before expiry: %s, want 200", r.Status)
		}
		s.now.Add(time.Second)
		if r := s.do(t, b, http.MethodGet, "/dashboard/api/whoami", "", ""); r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("expired session: %s, want 401", r.Status)
		}
	})
}

// The event stream pushes a new pod and a reconcile line as they happen.
func TestWatchPushesChanges(t *testing.T) {
	s := newTestServer(t)
	b := s.browser(t)
	s.do(t, b, http.MethodGet, s.loginURL(t, ""), "", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.ts.URL+"/dashboard/api/watch", nil)
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("watch: %s %s", resp.Status, ct)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var seen []string
	wait := func(what string, match func(event, data string) bool) {
		t.Helper()
		var ev string
		testwait.Until(t, 10*time.Second, func() (bool, string) {
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						return false, "stream ended: " + strings.Join(seen, "\n")
					}
					seen = append(seen, l)
					if e, ok := strings.CutPrefix(l, "event: "); ok {
						ev = e
					} else if d, ok := strings.CutPrefix(l, "data: "); ok && match(ev, d) {
						return true, ""
					}
				default:
					return false, what + " not seen in:\n" + strings.Join(seen, "\n")
				}
			}
		})
	}
	wait("the pods reset", func(e, d string) bool { return e == "reset" && strings.Contains(d, `"pods"`) })
	pod := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := s.local.Create(apiserver.WithUser(ctx, apiserver.User{Name: apiserver.AdminUser, Groups: []string{pki.MastersGroup}}), pod); err != nil {
		t.Fatal(err)
	}
	wait("the new pod", func(e, d string) bool { return e == "ADDED" && strings.Contains(d, `"name":"web"`) })
	s.recs.Add(dashboard.Reconcile{Controller: "deployment-controller", Key: "default/web", Observed: "1 replica", Desired: "3 replicas", Action: "scaled up", Acted: true})
	wait("the reconcile line", func(e, d string) bool { return e == "reconcile" && strings.Contains(d, `"desired":"3 replicas"`) })

	// The chain of the pod, with its trace (the API server's span).
	ch := s.do(t, b, http.MethodGet, "/dashboard/api/chain/default/web", "", "")
	var chain dashboard.Chain
	if err := json.NewDecoder(ch.Body).Decode(&chain); err != nil || chain.Pod == nil || chain.Trace == nil {
		t.Fatalf("chain: %s %v %+v", ch.Status, err, chain)
	}
	if len(chain.Trace.Spans) == 0 || chain.Trace.Spans[0].Details["resourceVersion"] != chain.Pod.ResourceVersion {
		t.Errorf("chain: trace %+v, want the apiserver span with resourceVersion %s", chain.Trace.Spans, chain.Pod.ResourceVersion)
	}
}

// The login path refuses what it does not serve.
func TestLoginMethods(t *testing.T) {
	s := newTestServer(t)
	q := url.Values{"code": {"x"}}
	if r := s.do(t, s.browser(t), http.MethodPost, dashboard.LoginPath+"?"+q.Encode(), "", ""); r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST login: %s, want 405", r.Status)
	}
	if r := s.do(t, s.ts.Client(), http.MethodGet, dashboard.LoginCodePath, adminToken, ""); r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET login-codes: %s, want 405", r.Status)
	}
}

// A student's session shows what their credential may read: with view in
// their namespace, its pods and its control-loop lines, never another
// namespace's pods, lines, pod chains, nor a node's device calls.
func TestStudentSeesOnlyWhatTheyMayRead(t *testing.T) {
	s := newTestServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := apiserver.WithUser(ctx, apiserver.User{Name: apiserver.AdminUser, Groups: []string{pki.MastersGroup}})
	for _, ns := range []string{"alice", "bob"} {
		if _, err := s.local.Create(admin, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.local.Create(admin, &api.RoleBinding{ObjectMeta: api.ObjectMeta{Name: "alice-view", Namespace: "alice"},
		RoleRef:  api.RoleRef{APIGroup: api.RBACGroup, Kind: "ClusterRole", Name: "view"},
		Subjects: []api.Subject{{Kind: api.SubjectUser, APIGroup: api.RBACGroup, Name: "alice"}}}); err != nil {
		t.Fatal(err)
	}
	alice := apiserver.WithUser(ctx, apiserver.User{Name: "alice", Groups: []string{"students", "system:authenticated"}})
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		ok, err := s.local.Can(alice, "list", "", "pods", "", "alice", "")
		return ok, fmt.Sprintf("alice cannot list her pods yet (%v)", err)
	})
	for _, p := range []struct{ ns, name string }{{"alice", "mine"}, {"bob", "theirs"}} {
		if _, err := s.local.Create(admin, &api.Pod{ObjectMeta: api.ObjectMeta{Name: p.name, Namespace: p.ns},
			Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "busybox"}}}}); err != nil {
			t.Fatal(err)
		}
	}
	b := s.browser(t)
	if r := s.do(t, b, http.MethodGet, s.loginURLAs(t, "alice-token", ""), "", ""); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("alice's login: %s", r.Status)
	}
	for _, tc := range []struct{ path, want string }{
		{"/dashboard/api/chain/bob/theirs", `pods "theirs" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "bob"`},
		{"/dashboard/api/devices/n1", `nodes "n1" is forbidden: User "alice" cannot get resource "nodes/proxy" in API group "" at the cluster scope`},
	} {
		r := s.do(t, b, http.MethodGet, tc.path, "", "")
		var st api.Status
		body, _ := io.ReadAll(r.Body)
		if r.StatusCode != http.StatusForbidden || json.Unmarshal(body, &st) != nil || st.Message != tc.want {
			t.Errorf("GET %s as alice: %s %s, want 403 %q", tc.path, r.Status, body, tc.want)
		}
	}
	if r := s.do(t, b, http.MethodGet, "/dashboard/api/chain/alice/mine", "", ""); r.StatusCode != http.StatusOK {
		t.Errorf("alice's own pod's chain: %s", r.Status)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.ts.URL+"/dashboard/api/watch", nil)
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	s.recs.Add(dashboard.Reconcile{Controller: "deployment-controller", Key: "bob/web", Action: "bob's line"})
	s.recs.Add(dashboard.Reconcile{Controller: "node-lifecycle-controller", Key: "n1", Action: "a node's line"})
	s.recs.Add(dashboard.Reconcile{Controller: "deployment-controller", Key: "alice/web", Action: "alice's line"})
	var seen []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	gotPod, gotLine := false, false
	for sc.Scan() && !(gotPod && gotLine) {
		l := sc.Text()
		seen = append(seen, l)
		gotPod = gotPod || strings.Contains(l, `"name":"mine"`)
		gotLine = gotLine || strings.Contains(l, "alice's line")
	}
	all := strings.Join(seen, "\n")
	if !gotPod || !gotLine {
		t.Fatalf("alice's stream lacks her pod or her line:\n%s", all)
	}
	for _, leak := range []string{`"name":"theirs"`, "bob's line", "a node's line", `"kind":"nodes","object"`} {
		if strings.Contains(all, leak) {
			t.Errorf("alice's stream shows %s:\n%s", leak, all)
		}
	}
}
