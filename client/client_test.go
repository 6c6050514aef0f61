package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

const testToken = "t0ken"

func kind(t testing.TB, o api.Object) *api.Kind {
	t.Helper()
	k, err := api.KindOf(o)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newServer starts an httptest server with h behind a bearer-token check
// and returns a client for it.
func newServer(t testing.TB, h http.Handler) *client.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			writeStatus(w, api.NewStatusError(http.StatusUnauthorized, api.ReasonUnauthorized, "Unauthorized"))
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(client.Config{Server: srv.URL, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, e *api.StatusError) {
	writeJSON(w, int(e.Status.Code), e.Status)
}

func TestPathFor(t *testing.T) {
	pod, deploy, node := kind(t, &api.Pod{}), kind(t, &api.Deployment{}), kind(t, &api.Node{})
	tests := []struct {
		name         string
		k            *api.Kind
		ns, obj, sub string
		want         string
	}{
		{"pod", pod, "default", "web", "", "/api/v1/namespaces/default/pods/web"},
		{"pods all namespaces", pod, "", "", "", "/api/v1/pods"},
		{"pod binding", pod, "ns1", "web", "binding", "/api/v1/namespaces/ns1/pods/web/binding"},
		{"deployments", deploy, "ns1", "", "", "/apis/apps/v1/namespaces/ns1/deployments"},
		{"deployment scale", deploy, "ns1", "d", "scale", "/apis/apps/v1/namespaces/ns1/deployments/d/scale"},
		{"node ignores namespace", node, "default", "n1", "status", "/api/v1/nodes/n1/status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := client.PathFor(tt.k, tt.ns, tt.obj, tt.sub); got != tt.want {
				t.Errorf("PathFor = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestErrorDecoding(t *testing.T) {
	pods := kind(t, &api.Pod{})
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		check     func(error) bool
		wantCode  int
		wantInMsg string
	}{
		{
			name:      "status not found",
			handler:   func(w http.ResponseWriter, r *http.Request) { writeStatus(w, api.NewNotFound(pods, "web")) },
			check:     api.IsNotFound,
			wantCode:  404,
			wantInMsg: `pods "web" not found`,
		},
		{
			name:      "status conflict",
			handler:   func(w http.ResponseWriter, r *http.Request) { writeStatus(w, api.NewConflict(pods, "web", "stale")) },
			check:     api.IsConflict,
			wantCode:  409,
			wantInMsg: "Operation cannot be fulfilled",
		},
		{
			name: "plain text 500",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "boom", http.StatusInternalServerError)
			},
			check:     func(err error) bool { return api.ReasonOf(err) == api.ReasonInternal },
			wantCode:  500,
			wantInMsg: "boom",
		},
		{
			name: "html 404 from a proxy",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, "<html>nope</html>")
			},
			check:     api.IsNotFound,
			wantCode:  404,
			wantInMsg: "nope",
		},
		{
			name: "empty 410",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusGone)
			},
			check:    api.IsGone,
			wantCode: 410,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newServer(t, tt.handler)
			_, err := c.Get(t.Context(), pods, "default", "web")
			var se *api.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("error %T %v is not a *api.StatusError", err, err)
			}
			if !tt.check(err) {
				t.Errorf("reason check failed for %+v", se.Status)
			}
			if api.CodeOf(err) != tt.wantCode {
				t.Errorf("code = %d, want %d", api.CodeOf(err), tt.wantCode)
			}
			if !strings.Contains(err.Error(), tt.wantInMsg) {
				t.Errorf("message %q does not contain %q", err.Error(), tt.wantInMsg)
			}
		})
	}
}

func TestUnauthorized(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, api.NewStatusError(http.StatusUnauthorized, api.ReasonUnauthorized, "Unauthorized"))
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(client.Config{Server: srv.URL, Token: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.List(t.Context(), kind(t, &api.Pod{}), "", api.ListOptions{})
	if api.ReasonOf(err) != api.ReasonUnauthorized {
		t.Fatalf("err = %v, want Unauthorized", err)
	}
}

func TestConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := client.New(client.Config{Server: addr})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(t.Context(), kind(t, &api.Pod{}), "default", "web")
	want := fmt.Sprintf("cannot reach the skiff API server at https://%s: is `skiff up` running?", addr) // a bare host:port is https
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	var ue *client.UnreachableError
	if !errors.As(err, &ue) {
		t.Errorf("err is not an *UnreachableError")
	}
}

func TestNewRejectsBadServer(t *testing.T) {
	for _, s := range []string{"", "ftp://x", "http://"} {
		if _, err := client.New(client.Config{Server: s}); err == nil {
			t.Errorf("New(%q) succeeded", s)
		}
	}
}

func TestCRUDRequests(t *testing.T) {
	type req struct{ method, path, query, body string }
	var got []req
	mux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, req{r.Method, r.URL.Path, r.URL.RawQuery, string(b)})
		switch {
		case r.URL.Path == "/api/v1/namespaces/default/pods" && r.Method == http.MethodGet:
			_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"42"},"items":[
				{"metadata":{"name":"a","namespace":"default","resourceVersion":"40"}},
				{"metadata":{"name":"b","namespace":"default","resourceVersion":"41"},"spec":{"nodeName":"n1"}}]}`)
		case r.URL.Path == "/api/v1/namespaces/default/pods/web/binding",
			r.URL.Path == "/api/v1/namespaces/default/pods/web/trace" && r.Method == http.MethodPost,
			r.Method == http.MethodDelete:
			writeJSON(w, 200, map[string]string{"kind": "Status", "status": "Success"})
		case r.URL.Path == "/api/v1/namespaces/default/pods/web/trace":
			_, _ = io.WriteString(w, `{"metadata":{"name":"web"},"spans":[{"component":"scheduler","step":"bind","start":null,"end":null}]}`)
		case strings.HasSuffix(r.URL.Path, "/scale"):
			_, _ = io.WriteString(w, `{"kind":"Scale","metadata":{"name":"d"},"spec":{"replicas":3},"status":{"replicas":2}}`)
		default: // echo the object back with a resourceVersion
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			meta, _ := m["metadata"].(map[string]any)
			meta["resourceVersion"] = "7"
			writeJSON(w, 200, m)
		}
	})
	c := newServer(t, mux)
	ctx := t.Context()

	pod := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "web"}}
	created, err := client.Create(ctx, c, pod)
	if err != nil {
		t.Fatal(err)
	}
	if created.ResourceVersion != "7" || created.Kind != "Pod" || created.APIVersion != "v1" {
		t.Errorf("created = %+v", created.ObjectMeta)
	}
	if pod.Kind != "" {
		t.Errorf("Create modified the caller's object: %+v", pod.TypeMeta)
	}
	if _, err := client.Update(ctx, c, created); err != nil {
		t.Fatal(err)
	}
	if _, err := client.UpdateStatus(ctx, c, created); err != nil {
		t.Fatal(err)
	}
	node, err := client.Update(ctx, c, &api.Node{ObjectMeta: api.ObjectMeta{Name: "n1"}})
	if err != nil || node.Name != "n1" {
		t.Fatalf("update node: %v %v", node, err)
	}
	pods, rv, err := client.List[*api.Pod](ctx, c, "default", api.ListOptions{LabelSelector: "app=web", FieldSelector: "spec.nodeName=n1", ResourceVersion: "40", ResourceVersionMatch: "NotOlderThan", TimeoutSeconds: 5})
	if err != nil {
		t.Fatal(err)
	}
	if rv != "42" || len(pods) != 2 || pods[1].Spec.NodeName != "n1" || pods[0].Kind != "Pod" {
		t.Errorf("list = %v rv %q", pods, rv)
	}
	if err := c.Bind(ctx, &api.Binding{ObjectMeta: api.ObjectMeta{Name: "web"}, Target: api.ObjectReference{Kind: "Node", Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if err := c.Delete(ctx, kind(t, &api.Pod{}), "default", "web", api.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	deploy := kind(t, &api.Deployment{})
	s, err := c.GetScale(ctx, deploy, "default", "d")
	if err != nil || s.Spec.Replicas != 3 {
		t.Fatalf("scale = %+v, %v", s, err)
	}
	if _, err := c.UpdateScale(ctx, deploy, "default", "d", s); err != nil {
		t.Fatal(err)
	}
	if err := c.AddTrace(ctx, "default", "web", api.TraceSpan{Component: "scheduler", Step: "bind"}); err != nil {
		t.Fatal(err)
	}
	tr, err := c.GetTrace(ctx, "default", "web")
	if err != nil || len(tr.Spans) != 1 || tr.Spans[0].Step != "bind" {
		t.Fatalf("trace = %+v, %v", tr, err)
	}

	want := []req{
		{"POST", "/api/v1/namespaces/default/pods", "", `"kind":"Pod"`},
		{"PUT", "/api/v1/namespaces/default/pods/web", "", `"name":"web"`},
		{"PUT", "/api/v1/namespaces/default/pods/web/status", "", ""},
		{"PUT", "/api/v1/nodes/n1", "", `"kind":"Node"`},
		{"GET", "/api/v1/namespaces/default/pods", "fieldSelector=spec.nodeName%3Dn1&labelSelector=app%3Dweb&resourceVersion=40&resourceVersionMatch=NotOlderThan&timeoutSeconds=5", ""},
		{"POST", "/api/v1/namespaces/default/pods/web/binding", "", `"target":{"kind":"Node","name":"n1"}`},
		{"DELETE", "/api/v1/namespaces/default/pods/web", "", `"gracePeriodSeconds":0`},
		{"GET", "/apis/apps/v1/namespaces/default/deployments/d/scale", "", ""},
		{"PUT", "/apis/apps/v1/namespaces/default/deployments/d/scale", "", `"replicas":3`},
		{"POST", "/api/v1/namespaces/default/pods/web/trace", "", `[{"component":"scheduler","step":"bind"`},
		{"GET", "/api/v1/namespaces/default/pods/web/trace", "", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d requests, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.method != w.method || g.path != w.path || g.query != w.query || !strings.Contains(g.body, w.body) {
			t.Errorf("request %d = %s %s?%s %s\nwant %s %s?%s containing %s", i, g.method, g.path, g.query, g.body, w.method, w.path, w.query, w.body)
		}
	}
}

// watchServer streams the given lines, then ends the response (or holds it
// open until the client goes away when hold is set).
func watchServer(t *testing.T, lines []string, hold bool, gotQuery chan<- string) *client.Client {
	return newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gotQuery != nil {
			gotQuery <- r.URL.RawQuery
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		w.(http.Flusher).Flush() // a watch sends its headers at once
		for _, l := range lines {
			_, _ = io.WriteString(w, l+"\n")
			w.(http.Flusher).Flush()
		}
		if hold {
			<-r.Context().Done()
		}
	}))
}

func collect(t *testing.T, w client.Watcher) []client.Event {
	t.Helper()
	var evs []client.Event
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				return evs
			}
			evs = append(evs, ev)
		case <-timeout:
			t.Fatal("watch did not end")
		}
	}
}

func TestWatchDecode(t *testing.T) {
	pods := kind(t, &api.Pod{})
	lines := []string{
		`{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"default","resourceVersion":"5"}}}`,
		`{"type":"MODIFIED","object":{"metadata":{"name":"a","namespace":"default","resourceVersion":"6"},"spec":{"nodeName":"n1"}}}`,
		`{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"8"}}}`,
		`{"type":"DELETED","object":{"metadata":{"name":"a","namespace":"default","resourceVersion":"9"}}}`,
	}
	t.Run("normal end", func(t *testing.T) {
		q := make(chan string, 1)
		c := watchServer(t, lines, false, q)
		w, err := c.Watch(t.Context(), pods, "default", api.ListOptions{ResourceVersion: "4", LabelSelector: "app=a"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if got := <-q; got != "labelSelector=app%3Da&resourceVersion=4&watch=1" {
			t.Errorf("query = %q", got)
		}
		evs := collect(t, w)
		if len(evs) != 4 {
			t.Fatalf("got %d events, want 4", len(evs))
		}
		want := []api.WatchEventType{api.Added, api.Modified, api.Bookmark, api.Deleted}
		for i, ev := range evs {
			if ev.Type != want[i] {
				t.Errorf("event %d type %s, want %s", i, ev.Type, want[i])
			}
		}
		if p := evs[1].Object.(*api.Pod); p.Spec.NodeName != "n1" || p.Kind != "Pod" || p.ResourceVersion != "6" {
			t.Errorf("modified pod = %+v", p)
		}
		if err := w.Err(); err != nil {
			t.Errorf("Err() = %v, want nil after a normal end", err)
		}
	})
	t.Run("error 410", func(t *testing.T) {
		gone, _ := json.Marshal(api.NewGone("too old resource version: 4 (100)").Status)
		c := watchServer(t, append(lines[:1:1], `{"type":"ERROR","object":`+string(gone)+`}`), true, nil)
		w, err := c.Watch(t.Context(), pods, "", api.ListOptions{ResourceVersion: "4"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if evs := collect(t, w); len(evs) != 1 {
			t.Errorf("got %d events before the error, want 1", len(evs))
		}
		if !api.IsGone(w.Err()) {
			t.Errorf("Err() = %v, want Gone", w.Err())
		}
	})
	t.Run("garbage", func(t *testing.T) {
		c := watchServer(t, []string{`{"type":"ADDED","object":`}, false, nil)
		w, err := c.Watch(t.Context(), pods, "", api.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		collect(t, w)
		if w.Err() == nil {
			t.Error("Err() = nil for a truncated stream")
		}
	})
	t.Run("stop", func(t *testing.T) {
		c := watchServer(t, lines[:1], true, nil)
		w, err := c.Watch(t.Context(), pods, "", api.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		<-w.Events()
		w.Stop()
		w.Stop()
		if _, ok := <-w.Events(); ok {
			t.Error("Events still open after Stop")
		}
		if w.Err() != nil {
			t.Errorf("Err() = %v after Stop", w.Err())
		}
	})
	t.Run("ctx cancel", func(t *testing.T) {
		c := watchServer(t, nil, true, nil)
		ctx, cancel := context.WithCancel(t.Context())
		w, err := c.Watch(ctx, pods, "", api.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		collect(t, w)
		if w.Err() != nil {
			t.Errorf("Err() = %v after ctx cancel", w.Err())
		}
	})
	t.Run("watch refused with status", func(t *testing.T) {
		c := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeStatus(w, api.NewGone("too old"))
		}))
		_, err := c.Watch(t.Context(), pods, "", api.ListOptions{ResourceVersion: "1"})
		if !api.IsGone(err) {
			t.Errorf("err = %v, want Gone", err)
		}
	})
}

func TestStream(t *testing.T) {
	c := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/default/pods/web/log" || r.URL.Query().Get("follow") != "true" {
			writeStatus(w, api.NewNotFound(nil, r.URL.Path))
			return
		}
		_, _ = io.WriteString(w, "line 1\nline 2\n")
	}))
	rc, err := c.Stream(t.Context(), client.PathFor(kind(t, &api.Pod{}), "default", "web", "log")+"?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	if string(b) != "line 1\nline 2\n" {
		t.Errorf("stream = %q", b)
	}
	if _, err := c.Stream(t.Context(), "/nope"); !api.IsNotFound(err) {
		t.Errorf("err = %v, want NotFound", err)
	}
}

// Every request names skiff in its User-Agent (the API server names a
// write's field manager after it), and a write under WithFieldManager
// carries ?fieldManager=, as kubectl's client-side apply does.
func TestUserAgentAndFieldManager(t *testing.T) {
	type seen struct{ method, ua, manager string }
	got := make(chan seen, 4)
	c := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Method, r.UserAgent(), r.URL.Query().Get("fieldManager")}
		writeJSON(w, http.StatusCreated, &api.ConfigMap{TypeMeta: api.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: api.ObjectMeta{Name: "a", Namespace: "default"}})
	}))
	cm := &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: "a", Namespace: "default"}}
	if _, err := c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	if s := <-got; !strings.HasPrefix(s.ua, "skiff/"+api.Version+" (") || s.manager != "" {
		t.Errorf("plain create: User-Agent %q, fieldManager %q; want skiff/%s (OS/ARCH) and none", s.ua, s.manager, api.Version)
	}
	ctx := client.WithFieldManager(context.Background(), "skiff-client-side-apply")
	if _, err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s.manager != "skiff-client-side-apply" {
		t.Errorf("create under WithFieldManager: fieldManager %q", s.manager)
	}
	if _, err := c.Get(ctx, kind(t, cm), "default", "a"); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s.method != http.MethodGet || s.manager != "" {
		t.Errorf("a read sent fieldManager %q", s.manager)
	}
}
