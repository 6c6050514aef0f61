package agent

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/runtime"
	rtfake "skiff.dev/skiff/runtime/fake"
)

func TestParseLogOptions(t *testing.T) {
	tests := []struct {
		query   string
		want    logOptions
		wantErr string
	}{
		{"", logOptions{tail: -1}, ""},
		{"follow=true&previous=1&container=web&tailLines=3&limitBytes=10", logOptions{follow: true, previous: true, container: "web", tail: 3, limitBytes: 10}, ""},
		{"timestamps=false&insecureSkipTLSVerifyBackend=false&stream=All", logOptions{tail: -1}, ""},
		{"tailLines=-1", logOptions{}, "tailLines: Invalid value: -1: must be greater than or equal to 0"},
		{"tailLines=x", logOptions{}, `tailLines: "x" is not an integer`},
		{"limitBytes=0", logOptions{}, "limitBytes: Invalid value: 0: must be greater than 0"},
		{"sinceSeconds=60", logOptions{}, "sinceSeconds: not supported by skiff: the container's log keeps no time per line"},
		{"sinceSeconds=0", logOptions{}, "sinceSeconds: Invalid value: 0: must be greater than 0"},
		{"sinceTime=2026-01-02T15:04:05Z", logOptions{}, "sinceTime: not supported by skiff"},
		{"sinceTime=2026-01-02T15:04:05Z&sinceSeconds=5", logOptions{}, "at most one of `sinceTime` or `sinceSeconds` may be specified"},
		{"timestamps=true", logOptions{}, "timestamps: not supported by skiff"},
		{"insecureSkipTLSVerifyBackend=true", logOptions{}, "insecureSkipTLSVerifyBackend: not supported by skiff"},
		{"stream=Stderr", logOptions{}, `stream: Unsupported value: "Stderr"`},
		{"follow=maybe", logOptions{}, `follow: "maybe" is not true or false`},
		{"timestamps=true&tailLines=-2", logOptions{}, "tailLines: Invalid value: -2: must be greater than or equal to 0; timestamps: not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseLogOptions(q)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseLogOptions(%q): %v, want an error with %q", tt.query, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseLogOptions(%q) = %+v, %v; want %+v", tt.query, got, err, tt.want)
			}
		})
	}
}

// The agent's log endpoint honours limitBytes (with follow too: the
// stream ends at the limit) and answers 400 for what it cannot honour.
func TestServeLogOptions(t *testing.T) {
	rt := rtfake.New(rtfake.Config{Images: []string{"nginx:1"}})
	c := fake.New(testPod("talker", "uid-talker"))
	a := startAgent(t, testConfig(t), c, rt)
	var id string
	testwait.For(t, 10*time.Second, "the pod's container to run", func() bool {
		for _, s := range containersOf(t, rt, "uid-talker") {
			if s.State == runtime.StateRunning {
				id = s.ID
				return true
			}
		}
		return false
	})
	for _, line := range []string{"hello", "world"} {
		if err := rt.WriteLog(id, line); err != nil {
			t.Fatal(err)
		}
	}
	get := func(query string) (int, string) {
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, fromAPIServerRequest(t, http.MethodGet, "/pods/default/talker/log"+query, nil))
		return rec.Code, rec.Body.String()
	}
	code, full := get("")
	if code != http.StatusOK || !strings.HasSuffix(full, "hello\nworld\n") {
		t.Fatalf("whole log: %d %q", code, full)
	}
	tests := []struct {
		query    string
		wantCode int
		want     string // the body (200) or part of the Status message
	}{
		{"?limitBytes=7", 200, full[:7]},
		{"?limitBytes=7&follow=true", 200, full[:7]},
		{"?limitBytes=100000", 200, full},
		{"?tailLines=1&limitBytes=3", 200, "wor"},
		{"?timestamps=false", 200, full},
		{"?sinceSeconds=10", 400, "log options: sinceSeconds: not supported by skiff"},
		{"?timestamps=true", 400, "log options: timestamps: not supported by skiff"},
		{"?limitBytes=-1", 400, "log options: limitBytes: Invalid value: -1: must be greater than 0"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			code, body := get(tt.query)
			if code != tt.wantCode {
				t.Fatalf("%d %q, want %d", code, body, tt.wantCode)
			}
			if tt.wantCode == http.StatusOK {
				if body != tt.want {
					t.Errorf("log %q, want %q", body, tt.want)
				}
				return
			}
			var st api.Status
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatalf("not a Status: %q", body)
			}
			if st.Code != http.StatusBadRequest || !strings.Contains(st.Message, tt.want) {
				t.Errorf("Status %q, want %q in it", st.Message, tt.want)
			}
		})
	}
}
