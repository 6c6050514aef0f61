package apiserver

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The request log never shows the dashboard's one-time login code; the
// API's queries it shows as they came.
func TestRequestLogHidesDashboardQueryValues(t *testing.T) {
	e := newEnv(t)
	var logs bytes.Buffer // the handler logs before ServeHTTP returns
	cfg := DefaultConfig()
	cfg.Token = testToken
	cfg.Dashboard = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusSeeOther) })
	srv, err := New(cfg, e.reg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	tests := []struct {
		name, target string
		wantQuery    string // the logged query attribute
		secret       string // never in the log
	}{
		{"login code", "/dashboard/login?code=Zk3-secret-code", "query=code ", "Zk3-secret-code"},
		{"several parameters", "/dashboard/login?code=abc123secret&next=%2Fdashboard%2F&code=again", "query=code&next ", "abc123secret"},
		{"an API query", "/api/v1/pods?labelSelector=app%3Dweb&limit=5", "query=\"labelSelector=app%3Dweb&limit=5\"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(logs.String())
			req := httptest.NewRequest(http.MethodGet, tt.target, nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			h.ServeHTTP(httptest.NewRecorder(), req)
			got := logs.String()[before:]
			if !strings.Contains(got, "msg=request") || !strings.Contains(got, tt.wantQuery) {
				t.Errorf("log %q, want a request line with %q", got, tt.wantQuery)
			}
			if tt.secret != "" && strings.Contains(logs.String(), tt.secret) {
				t.Errorf("the log shows %q: %s", tt.secret, got)
			}
		})
	}
	if strings.Contains(logs.String(), "again") {
		t.Errorf("the log shows a dashboard query value: %s", logs.String())
	}
}
