package apiserver

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func TestPathSegments(t *testing.T) {
	for _, p := range []string{
		"", "/", "//", "/api", "/api/v1", "/api/v1/namespaces/default/pods",
		"/api/v1/namespaces/default/pods/web-1/status", "/apis/batch/v1/namespaces/a/jobs/j/status",
		"api/v1/", "/api//v1", "/a/b/c/d/e/f/g/h", "/a/b/c/d/e/f/g/h/i/j", "///x///",
	} {
		var buf [8]string
		got := pathSegments(p, &buf)
		if want := strings.Split(strings.Trim(p, "/"), "/"); !slices.Equal(got, want) {
			t.Errorf("pathSegments(%q) = %q, want %q", p, got, want)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		var buf [8]string
		if len(pathSegments("/api/v1/namespaces/default/pods/web-1/status", &buf)) != 7 {
			t.Fatal("wrong count")
		}
	})
	if allocs != 0 {
		t.Errorf("pathSegments allocated %v times for a path of seven segments, want 0", allocs)
	}
}

func TestMediaTypeAsParseMediaType(t *testing.T) {
	for _, v := range []string{
		"application/json", "application/vnd.kubernetes.protobuf", "application/json;stream=watch",
		"application/json; charset=utf-8", "Application/JSON", " application/json ", "*/*", "application/*",
		"application/apply-patch+yaml", "application/merge-patch+json", "text/plain", "json", "/json",
		"application/", "application/json/x", "application/json,", "a@b/c", "", "application/json\x00",
	} {
		want := ""
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(v)); err == nil {
			want = mt
		}
		if got := mediaType(v); got != want {
			t.Errorf("mediaType(%q) = %q, mime.ParseMediaType gives %q", v, got, want)
		}
	}
}

// oldBearerToken is BearerToken as it was written before it used
// strings.Cut: the reference the new one must agree with.
func oldBearerToken(h string) (string, bool) {
	parts := strings.SplitN(strings.TrimSpace(h), " ", 3)
	if len(parts) < 2 || !strings.EqualFold(parts[0], "bearer") || parts[1] == "" {
		return "", false
	}
	return parts[1], true
}

func TestBearerTokenAsSplitN(t *testing.T) {
	for _, h := range []string{
		"Bearer abc", "bearer abc", "BEARER abc", "Bearer  abc", "Bearer abc def", "Bearer abc ",
		"  Bearer abc  ", "Bearer", "Bearer ", "", "Basic abc", "Bearer\tabc", "Bearerabc", " ",
	} {
		r := httptest.NewRequest(http.MethodGet, "/api", nil)
		r.Header.Set("Authorization", h)
		got, gotOK := BearerToken(r)
		want, wantOK := oldBearerToken(h)
		if got != want || gotOK != wantOK {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", h, got, gotOK, want, wantOK)
		}
	}
}

func TestReadAll(t *testing.T) {
	body := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`)
	for _, tc := range []struct {
		name   string
		length int64
	}{
		{"declared exactly", int64(len(body))},
		{"not declared", -1},
		{"declared zero", 0},
		{"declared shorter than sent", 5},
		{"declared longer than sent", int64(len(body)) + 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(iotest.OneByteReader(bytes.NewReader(body)), tc.length)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("readAll = %q, %v; want the body", got, err)
			}
		})
	}
	t.Run("one allocation for a declared body", func(t *testing.T) {
		rd := bytes.NewReader(nil)
		allocs := testing.AllocsPerRun(50, func() {
			rd.Reset(body)
			if b, err := readAll(rd, int64(len(body))); err != nil || len(b) != len(body) {
				t.Fatal(err)
			}
		})
		if allocs > 1 {
			t.Errorf("readAll allocated %v times, want 1", allocs)
		}
	})
	t.Run("a long declaration takes no more than presizeMax before the body comes", func(t *testing.T) {
		got, err := readAll(bytes.NewReader(body), 1<<30)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("readAll = %q, %v", got, err)
		}
		if cap(got) > presizeMax+1 {
			t.Errorf("cap %d for a body declared 1 GiB, want at most %d", cap(got), presizeMax+1)
		}
	})
	t.Run("a read error is returned", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := readAll(io.MultiReader(bytes.NewReader(body[:10]), iotest.ErrReader(boom)), int64(len(body)))
		if !errors.Is(err, boom) {
			t.Errorf("err = %v, want boom", err)
		}
	})
}

func TestQueryGet(t *testing.T) {
	for target, want := range map[string]string{
		"/api/v1/pods":                            "",
		"/api/v1/pods?watch=1":                    "1",
		"/api/v1/pods?labelSelector=a&watch=true": "true",
		"/api/v1/pods?watch=":                     "",
	} {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		if got := queryGet(r, "watch"); got != want {
			t.Errorf("queryGet(%q, watch) = %q, want %q", target, got, want)
		}
		if got, want := query(r).Has("watch"), strings.Contains(target, "watch="); got != want {
			t.Errorf("query(%q).Has(watch) = %v, want %v", target, got, want)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/pods", nil)
	if allocs := testing.AllocsPerRun(100, func() { _ = query(r).Has("dryRun") || queryGet(r, "watch") != "" }); allocs != 0 {
		t.Errorf("reading a request without a query allocated %v times, want 0", allocs)
	}
}
