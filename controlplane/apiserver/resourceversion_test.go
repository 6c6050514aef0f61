package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

// get sends a GET with the token and returns code, Retry-After and body.
func (e *env) get(path string) (int, string, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.ts.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), b
}

type cmList struct {
	Metadata api.ListMeta    `json:"metadata"`
	Items    []api.ConfigMap `json:"items"`
}

func listNames(l *cmList) string {
	var names []string
	for _, cm := range l.Items {
		names = append(names, cm.Name)
	}
	return strings.Join(names, ",")
}

// checkTooLarge checks kube-apiserver's 504 for a revision not reached.
func checkTooLarge(t *testing.T, st api.Status, requested, current int64) {
	t.Helper()
	want := fmt.Sprintf("Timeout: Too large resource version: %d, current: %d", requested, current)
	if st.Message != want {
		t.Errorf("message %q, want %q", st.Message, want)
	}
	d := st.Details
	if d == nil || d.RetryAfterSeconds != 1 || len(d.Causes) != 1 ||
		d.Causes[0].Type != api.CauseResourceVersionTooLarge || d.Causes[0].Message != "Too large resource version" {
		t.Errorf("details %+v, want retryAfterSeconds 1 and cause ResourceVersionTooLarge", d)
	}
}

func TestListResourceVersion(t *testing.T) {
	e := newEnv(t)
	e.reg.freshWait = 50 * time.Millisecond
	a := decode[api.ConfigMap](t, e.must(201, "POST", cmPath, configMap("", "a")))
	b := decode[api.ConfigMap](t, e.must(201, "POST", cmPath, configMap("", "b")))
	a.Data["k"] = "v2"
	e.must(200, "PUT", cmPath+"/a", a)
	// Pods change after the config maps: the config maps at the revision
	// of the last one's write are still the current ones.
	cmDone := decode[api.ConfigMap](t, e.must(200, "GET", cmPath+"/a", nil)).ResourceVersion
	e.must(201, "POST", "/api/v1/namespaces/default/pods", pod("p", nil))
	cur := e.st.Revision()
	curRV := strconv.FormatInt(cur, 10)
	future := cur + 100

	tests := []struct {
		name      string
		query     string
		code      int
		reason    api.StatusReason
		wantRV    string // list's resourceVersion
		wantNames string
		message   string // the Status message, word for word
	}{
		{name: "most recent", query: "", code: 200, wantRV: curRV, wantNames: "a,b"},
		{name: "any", query: "resourceVersion=0", code: 200, wantRV: curRV, wantNames: "a,b"},
		{name: "not older than, default", query: "resourceVersion=" + b.ResourceVersion, code: 200, wantRV: curRV, wantNames: "a,b"},
		{name: "not older than", query: "resourceVersion=" + b.ResourceVersion + "&resourceVersionMatch=NotOlderThan", code: 200, wantRV: curRV, wantNames: "a,b"},
		{name: "exact current", query: "resourceVersion=" + curRV + "&resourceVersionMatch=Exact", code: 200, wantRV: curRV, wantNames: "a,b"},
		{name: "exact, unchanged since", query: "resourceVersion=" + cmDone + "&resourceVersionMatch=Exact", code: 200, wantRV: cmDone, wantNames: "a,b"},
		{name: "exact, changed since", query: "resourceVersion=" + b.ResourceVersion + "&resourceVersionMatch=Exact", code: 410, reason: api.ReasonExpired,
			message: "The resourceVersion for the provided list is too old."},
		{name: "future", query: fmt.Sprintf("resourceVersion=%d", future), code: 504, reason: api.ReasonTimeout,
			message: fmt.Sprintf("Timeout: Too large resource version: %d, current: %d", future, cur)},
		{name: "future exact", query: fmt.Sprintf("resourceVersion=%d&resourceVersionMatch=Exact", future), code: 504, reason: api.ReasonTimeout,
			message: fmt.Sprintf("Timeout: Too large resource version: %d, current: %d", future, cur)},
		{name: "malformed", query: "resourceVersion=abc", code: 400, reason: api.ReasonBadRequest,
			message: `invalid resource version: resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax`},
		{name: "negative", query: "resourceVersion=-1", code: 400, reason: api.ReasonBadRequest,
			message: `invalid resource version: resourceVersion: Invalid value: "-1": strconv.ParseUint: parsing "-1": invalid syntax`},
		{name: "match without resourceVersion", query: "resourceVersionMatch=NotOlderThan", code: 422, reason: api.ReasonInvalid,
			message: `ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided`},
		{name: "unknown match", query: "resourceVersion=1&resourceVersionMatch=Newest", code: 422, reason: api.ReasonInvalid,
			message: `ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""`},
		{name: "exact zero", query: "resourceVersion=0&resourceVersionMatch=Exact", code: 422, reason: api.ReasonInvalid,
			message: `ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"`},
		{name: "two problems", query: "resourceVersionMatch=Newest", code: 422, reason: api.ReasonInvalid,
			message: `ListOptions.meta.k8s.io "" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""]`},
		{name: "sendInitialEvents on list", query: "sendInitialEvents=true", code: 422, reason: api.ReasonInvalid,
			message: `ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, retry, body := e.get(cmPath + "?" + tt.query)
			if code != tt.code {
				t.Fatalf("got %d, want %d: %s", code, tt.code, body)
			}
			if tt.code != 200 {
				st := status(t, body, tt.code, tt.reason)
				if st.Message != tt.message {
					t.Errorf("message:\n got %q\nwant %q", st.Message, tt.message)
				}
				if tt.code == 504 {
					checkTooLarge(t, st, future, cur)
					if retry != "1" {
						t.Errorf("Retry-After %q, want 1", retry)
					}
				}
				return
			}
			l := decode[cmList](t, body)
			if l.Metadata.ResourceVersion != tt.wantRV || listNames(l) != tt.wantNames {
				t.Fatalf("list at %s with %s, want %s with %s", l.Metadata.ResourceVersion, listNames(l), tt.wantRV, tt.wantNames)
			}
		})
	}
	// In process, the same rules.
	if _, _, err := e.local.List(context.Background(), cmKind, "default", api.ListOptions{ResourceVersion: strconv.FormatInt(future, 10)}); !api.IsTooLargeResourceVersion(err) {
		t.Errorf("Local list from a future revision: %v, want Too large resource version", err)
	}
	if _, _, err := e.local.List(context.Background(), cmKind, "default", api.ListOptions{ResourceVersion: b.ResourceVersion, ResourceVersionMatch: "Exact"}); !api.IsGone(err) {
		t.Errorf("Local exact list of a changed revision: %v, want Gone", err)
	}
}

// A list from a revision the store reaches while it waits is served.
func TestListWaitsForRevision(t *testing.T) {
	e := newEnv(t)
	e.reg.freshWait = 10 * time.Second
	next := e.st.Revision() + 1
	created := make(chan error, 1)
	go func() {
		_, err := e.local.Create(context.Background(), configMap("default", "late"))
		created <- err
	}()
	code, _, body := e.get(fmt.Sprintf("%s?resourceVersion=%d", cmPath, next))
	if code != 200 {
		t.Fatalf("got %d: %s", code, body)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	l := decode[cmList](t, body)
	if rv, _ := strconv.ParseInt(l.Metadata.ResourceVersion, 10, 64); rv < next || listNames(l) != "late" {
		t.Fatalf("list at %s with %q, want at least %d with late", l.Metadata.ResourceVersion, listNames(l), next)
	}
}

func TestWatchResourceVersion(t *testing.T) {
	e := newEnv(t)
	e.reg.freshWait = 50 * time.Millisecond
	e.must(201, "POST", cmPath, configMap("", "a"))
	cur := e.st.Revision()

	t.Run("too large", func(t *testing.T) {
		// 200, then one ERROR event with the 504 Status, then the end: the
		// client lists again.
		w := e.watch(fmt.Sprintf("%s?watch=1&resourceVersion=%d", cmPath, cur+100))
		ev := w.next()
		if ev.Type != api.Error {
			t.Fatalf("got %s, want ERROR: %s", ev.Type, ev.Object)
		}
		st := status(t, ev.Object, 504, api.ReasonTimeout)
		checkTooLarge(t, st, cur+100, cur)
		w.ended()
	})
	t.Run("reached while waiting", func(t *testing.T) {
		e.reg.freshWait = 10 * time.Second
		defer func() { e.reg.freshWait = 50 * time.Millisecond }()
		done := make(chan error, 1)
		go func() {
			_, err := e.local.Create(context.Background(), configMap("default", "b")) // cur+1
			if err == nil {
				_, err = e.local.Create(context.Background(), configMap("default", "c")) // cur+2
			}
			done <- err
		}()
		w := e.watch(fmt.Sprintf("%s?watch=1&resourceVersion=%d", cmPath, cur+1))
		w.expect(api.Added, "c") // changes after cur+1 only
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	for _, tc := range []struct{ name, query, message string }{
		{"malformed", "resourceVersion=abc",
			`invalid resource version: resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax`},
		{"match on watch", "resourceVersion=1&resourceVersionMatch=NotOlderThan",
			`ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided`},
		{"sendInitialEvents", "sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
			`ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := e.get(cmPath + "?watch=1&" + tc.query)
			var st api.Status
			if err := json.Unmarshal(body, &st); err != nil || code/100 != 4 || st.Message != tc.message {
				t.Fatalf("got %d %s, want message %q", code, body, tc.message)
			}
		})
	}
}

// A malformed resourceVersion in an object is 400 and changes nothing; in
// a delete precondition it is a failed precondition (409), as Kubernetes.
func TestMalformedResourceVersion(t *testing.T) {
	e := newEnv(t)
	orig := decode[api.ConfigMap](t, e.must(201, "POST", cmPath, configMap("", "c")))
	e.must(201, "POST", "/apis/apps/v1/namespaces/default/deployments", deployment("d", 1))
	const merge = "application/merge-patch+json"
	tests := []struct {
		name, method, path, body, contentType string
	}{
		{"put letters", "PUT", cmPath + "/c", `{"metadata":{"name":"c","resourceVersion":"abc"},"data":{"k":"changed"}}`, ""},
		{"put negative", "PUT", cmPath + "/c", `{"metadata":{"name":"c","resourceVersion":"-1"},"data":{"k":"changed"}}`, ""},
		{"put status", "PUT", "/api/v1/namespaces/default/pods/nope/status", `{"metadata":{"name":"nope","resourceVersion":"x1"}}`, ""},
		{"patch", "PATCH", cmPath + "/c", `{"metadata":{"resourceVersion":"abc"},"data":{"k":"changed"}}`, merge},
		{"scale", "PUT", "/apis/apps/v1/namespaces/default/deployments/d/scale", `{"metadata":{"name":"d","resourceVersion":"abc"},"spec":{"replicas":3}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.st.Revision()
			var hdr []string
			if tt.contentType != "" {
				hdr = []string{"Content-Type", tt.contentType}
			}
			code, b := e.do(tt.method, tt.path, tt.body, hdr...)
			if code != 400 {
				t.Fatalf("got %d, want 400: %s", code, b)
			}
			st := status(t, b, 400, api.ReasonBadRequest)
			if !strings.HasPrefix(st.Message, "invalid resource version: metadata.resourceVersion: Invalid value: ") {
				t.Errorf("message %q", st.Message)
			}
			if after := e.st.Revision(); after != before {
				t.Errorf("revision moved %d → %d: something was written", before, after)
			}
		})
	}
	got := decode[api.ConfigMap](t, e.must(200, "GET", cmPath+"/c", nil))
	if got.ResourceVersion != orig.ResourceVersion || got.Data["k"] != "v" {
		t.Fatalf("config map changed: rv %s data %v", got.ResourceVersion, got.Data)
	}
	sc := decode[api.Scale](t, e.must(200, "GET", "/apis/apps/v1/namespaces/default/deployments/d/scale", nil))
	if sc.Spec.Replicas != 1 {
		t.Fatalf("replicas %d after a refused scale", sc.Spec.Replicas)
	}

	// "0" is no resourceVersion: an unconditional update, as Kubernetes.
	upd := decode[api.ConfigMap](t, e.must(200, "PUT", cmPath+"/c", `{"metadata":{"name":"c","resourceVersion":"0"},"data":{"k":"zero"}}`))
	if upd.Data["k"] != "zero" || upd.ResourceVersion == orig.ResourceVersion {
		t.Fatalf("update with resourceVersion 0: %+v", upd)
	}

	// Delete: compared as given, so a failed precondition.
	code, b := e.do("DELETE", cmPath+"/c", `{"preconditions":{"resourceVersion":"abc"}}`)
	if code != 409 {
		t.Fatalf("delete with a malformed precondition: %d %s", code, b)
	}
	st := status(t, b, 409, api.ReasonConflict)
	want := fmt.Sprintf(`Operation cannot be fulfilled on configmaps "c": Precondition failed: ResourceVersion in precondition: abc, ResourceVersion in object meta: %s`, upd.ResourceVersion)
	if st.Message != want {
		t.Errorf("message:\n got %q\nwant %q", st.Message, want)
	}
	e.must(200, "GET", cmPath+"/c", nil)
}

func TestBearerScheme(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name, header string
		want         int
	}{
		{"Bearer", "Bearer " + testToken, 200},
		{"lowercase", "bearer " + testToken, 200},
		{"uppercase", "BEARER " + testToken, 200},
		{"trailing words", "Bearer " + testToken + " extra", 200}, // Kubernetes reads the token up to the next space
		{"surrounding spaces", "  Bearer " + testToken + "  ", 200},
		{"lowercase wrong token", "bearer nope", 401},
		{"two spaces", "Bearer  " + testToken, 401},
		{"no token", "bearer", 401},
		{"other scheme", "Basic " + testToken, 401},
		{"token alone", testToken, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := e.doToken("", "GET", cmPath, nil, "Authorization", tc.header)
			if code != tc.want {
				t.Fatalf("got %d, want %d: %s", code, tc.want, b)
			}
			if code == 401 {
				status(t, b, 401, api.ReasonUnauthorized)
			}
		})
	}
}
