package apiserver

import (
	"net/http"
	"testing"

	"skiff.dev/skiff/api"
)

// A pod not yet on a node: its log is an empty stream, as kube-apiserver's
// (so `kubectl logs -l` of a Deployment with a Pending replica shows the
// others), and exec, attach and port-forward are refused in its words.
func TestProxyPodWithoutNode(t *testing.T) {
	e := newEnv(t)
	e.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", pod("pending", nil))
	for _, tc := range []struct {
		method, sub string
		code        int
		msg         string
	}{
		{"GET", "log", http.StatusOK, ""},
		{"GET", "exec?command=sh&stdout=1", http.StatusBadRequest, "pod pending does not have a host assigned"},
		{"POST", "attach?stdout=1", http.StatusBadRequest, "pod pending does not have a host assigned"},
		{"GET", "portforward?ports=80", http.StatusBadRequest, "pod pending does not have a host assigned"},
	} {
		t.Run(tc.sub, func(t *testing.T) {
			code, body := e.do(tc.method, "/api/v1/namespaces/default/pods/pending/"+tc.sub, nil)
			if code != tc.code {
				t.Fatalf("%s pods/pending/%s: %d, want %d: %s", tc.method, tc.sub, code, tc.code, body)
			}
			if tc.code == http.StatusOK {
				if len(body) != 0 {
					t.Errorf("log of a pod without a node: %q, want nothing", body)
				}
				return
			}
			if s := status(t, body, tc.code, api.ReasonBadRequest); s.Message != tc.msg {
				t.Errorf("message %q, want %q", s.Message, tc.msg)
			}
		})
	}
}
