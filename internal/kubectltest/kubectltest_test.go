package kubectltest

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// The kubeconfig reaches the server over TLS with the bearer token: the
// handler sees the token kubectl sent.
func TestServeSendsTheToken(t *testing.T) {
	var got atomic.Value
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"32","gitVersion":"v1.32.0-skiff"}`))
	})
	c := Serve(t, h, "tok-123")
	out := c.Must(t, "", "version", "-o", "json")
	if !strings.Contains(out, `"gitVersion": "v1.32.0-skiff"`) {
		t.Errorf("kubectl version did not show the server's version:\n%s", out)
	}
	if got.Load() != "Bearer tok-123" {
		t.Errorf("Authorization = %q, want the kubeconfig's token", got.Load())
	}
}
