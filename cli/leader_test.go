package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

func TestPrintLeader(t *testing.T) {
	s0 := api.LeaderInfo{Name: "s0", APIServer: "http://10.0.0.1:7443"}
	s1 := api.LeaderInfo{Name: "s1", APIServer: "http://10.0.0.2:7443"}
	tests := []struct {
		name   string
		status *api.LeaderStatus // nil: the path is not served (bbolt)
		want   string
	}{
		{"one server on bbolt", nil, ""},
		{"another server leads", &api.LeaderStatus{Leader: s1, Self: s0},
			"Leader: s1 (http://10.0.0.2:7443)\nAnswered by: s0 (http://10.0.0.1:7443)\n"},
		{"the one asked leads", &api.LeaderStatus{Leader: s0, Self: s0, Leading: true},
			"Leader: s0 (http://10.0.0.1:7443)\nAnswered by: s0 (http://10.0.0.1:7443)\n"},
		{"nobody leads", &api.LeaderStatus{Self: s0},
			"Leader: none yet (an election is under way)\nAnswered by: s0 (http://10.0.0.1:7443)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.status == nil || r.URL.Path != api.LeaderPath || r.Header.Get("Authorization") != "Bearer tok" {
					http.NotFound(w, r)
					return
				}
				_ = json.NewEncoder(w).Encode(tt.status)
			}))
			defer ts.Close()
			c, err := client.New(client.Config{Server: ts.URL, Token: "tok"})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			printLeader(t.Context(), &out, c)
			if out.String() != tt.want {
				t.Errorf("printed %q, want %q", out.String(), tt.want)
			}
		})
	}
}
