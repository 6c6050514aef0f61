package apiserver

import "testing"

func TestNodeProxyPath(t *testing.T) {
	for _, tc := range []struct {
		path, name, rest string
		ok               bool
	}{
		{"/api/v1/nodes/n1/proxy/gpus/3/fault", "n1", "/gpus/3/fault", true},
		{"/api/v1/nodes/n1/proxy", "n1", "/", true},
		{"/api/v1/nodes/n1/proxy/", "n1", "/", true},
		{"/api/v1/nodes/n1", "", "", false},
		{"/api/v1/nodes/n1/status", "", "", false},
		{"/api/v1/nodes/n1/proxyx/a", "", "", false},
		{"/api/v1/nodes//proxy/a", "", "", false},
		{"/api/v1/namespaces/default/pods/p/log", "", "", false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			name, rest, ok := nodeProxyPath(tc.path)
			if name != tc.name || rest != tc.rest || ok != tc.ok {
				t.Errorf("nodeProxyPath(%q) = %q, %q, %v; want %q, %q, %v", tc.path, name, rest, ok, tc.name, tc.rest, tc.ok)
			}
		})
	}
}
