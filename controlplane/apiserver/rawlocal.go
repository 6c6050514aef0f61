package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"

	"skiff.dev/skiff/api"
)

// RawLocal is an in-process raw client of the server's HTTP API for the
// in-process components that read what is not stored and so not in the
// registry (the HPA controller's metrics.k8s.io, custom.metrics.k8s.io
// and external.metrics.k8s.io): each request is served by the same
// handlers as over HTTPS, authorized as the admin user, as Local writes are
// (no TLS, no token: the caller is the control plane itself).
type RawLocal struct{ s *Server }

// RawLocal returns the server's in-process raw client.
func (s *Server) RawLocal() *RawLocal { return &RawLocal{s: s} }

// Do serves one request; like client.Client.Do it returns the response
// when its status is 2xx and a *api.StatusError otherwise.
func (l *RawLocal) Do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req := httptest.NewRequest(method, path, body).WithContext(WithUser(ctx, adminUser()))
	rec := httptest.NewRecorder()
	var info requestInfo
	l.s.serveAPI(rec, req, &info)
	resp := rec.Result()
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var st api.Status
	if json.Unmarshal(data, &st) == nil && st.Message != "" {
		return nil, &api.StatusError{Status: st}
	}
	return nil, api.NewStatusError(resp.StatusCode, api.StatusReason(http.StatusText(resp.StatusCode)), string(bytes.TrimSpace(data)))
}
