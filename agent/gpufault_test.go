package agent

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/client/fake"
	rtfake "skiff.dev/skiff/runtime/fake"
)

func TestGPUFaultEndpoint(t *testing.T) {
	src, _, err := gpu.Open("sim:dgxa100", gpu.Options{NodeName: testNode})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cfg := DefaultConfig()
	cfg.NodeName = testNode
	cfg.GPUFaults = src.(gpu.FaultInjector)
	a, err := New(cfg, fake.New(), rtfake.New(rtfake.DefaultConfig()))
	if err != nil {
		t.Fatal(err)
	}
	noGPU, err := New(Config{NodeName: testNode, HeartbeatInterval: 1, Workers: 1}, fake.New(), rtfake.New(rtfake.DefaultConfig()))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		a      *Agent
		target string
		code   int
		body   string
		want   bool // GPU 3 healthy afterwards
	}{
		{"inject 79", a, "/gpus/3/fault?xid=79", 200, `"healthy":false`, false},
		{"clear", a, "/gpus/3/fault?clear=true", 200, `"healthy":true`, true},
		{"harmless xid", a, "/gpus/3/fault?xid=13", 200, `"healthy":true`, true},
		{"no such GPU", a, "/gpus/8/fault?xid=79", 404, "has no GPU 8", true},
		{"neither", a, "/gpus/3/fault", 400, "give xid=N", true},
		{"both", a, "/gpus/3/fault?xid=79&clear=true", 400, "not both", true},
		{"bad index", a, "/gpus/x/fault?xid=79", 400, "GPU index", true},
		{"not simulated", noGPU, "/gpus/0/fault?xid=79", 400, "not simulated", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := fromAPIServerRequest(t, http.MethodPost, tc.target, nil)
			rec := httptest.NewRecorder()
			tc.a.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
				t.Errorf("POST %s = %d %s; want %d containing %q", tc.target, rec.Code, rec.Body.String(), tc.code, tc.body)
			}
			devs, err := src.Devices(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if devs[3].Healthy != tc.want {
				t.Errorf("GPU 3 healthy = %v, want %v", devs[3].Healthy, tc.want)
			}
		})
	}
	req := httptest.NewRequest(http.MethodPost, "/gpus/3/fault?xid=79", nil)
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", rec.Code)
	}
}
