package client_test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"

	"skiff.dev/skiff/api"
)

// Warning headers reach the handler as their text, as client-go's
// WarningHandler gets them: code 299 only, on success and on error.
func TestWarningHandler(t *testing.T) {
	tests := []struct {
		name    string
		headers []string
		code    int
		want    []string
	}{
		{"one", []string{`299 - "would violate PodSecurity \"restricted:latest\": runAsNonRoot != true"`}, http.StatusCreated,
			[]string{`would violate PodSecurity "restricted:latest": runAsNonRoot != true`}},
		{"several, in order", []string{`299 - "first"`, `299 - "second"`}, http.StatusCreated, []string{"first", "second"}},
		{"with an error", []string{`299 - "said anyway"`}, http.StatusForbidden, []string{"said anyway"}},
		{"other codes ignored", []string{`199 - "misc"`, `299 - "kept"`}, http.StatusCreated, []string{"kept"}},
		{"malformed ignored", []string{`299 - unquoted`, `299 - "kept"`}, http.StatusCreated, []string{"kept"}},
		{"none", nil, http.StatusCreated, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for _, h := range tt.headers {
					w.Header().Add("Warning", h)
				}
				if tt.code != http.StatusCreated {
					writeStatus(w, api.NewStatusError(tt.code, api.ReasonForbidden, "no"))
					return
				}
				writeJSON(w, tt.code, &api.ConfigMap{TypeMeta: api.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: api.ObjectMeta{Name: "x", Namespace: "default"}})
			}))
			var (
				mu  sync.Mutex
				got []string
			)
			c.SetWarningHandler(func(text string) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, text)
			})
			_, err := c.Create(context.Background(), &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: "x", Namespace: "default"}})
			if (err != nil) != (tt.code != http.StatusCreated) {
				t.Fatalf("err = %v", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("warnings = %q, want %q", got, tt.want)
			}
		})
	}
}
