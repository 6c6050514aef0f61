package cli

import (
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/membership"
)

// startServerMember is the gossip member `skiff server` runs, on loopback.
func startServerMember(t *testing.T, token, apiURL string) *membership.Membership {
	t.Helper()
	mc := membership.DefaultConfig("server", token)
	mc.BindAddr, mc.BindPort, mc.Fast = "127.0.0.1", 0, true
	mc.Meta = membership.Meta{Role: membership.RoleServer, APIServer: apiURL}
	m, err := membership.Start(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

func TestJoinClusterLearnsTheAPIServer(t *testing.T) {
	srv := startServerMember(t, "tok", "http://10.0.0.1:7443")
	m, url, err := joinCluster(t.Context(), joinConfig{Name: "agent-1", Join: srv.LocalAddr(), Token: "tok",
		BindAddr: "127.0.0.1", Port: 0, Fast: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	defer m.Stop()
	if url != "http://10.0.0.1:7443" {
		t.Errorf("API server %q, want the server's advertised URL", url)
	}
	// A second agent joins through the first, not the server.
	m2, url2, err := joinCluster(t.Context(), joinConfig{Name: "agent-2", Join: m.LocalAddr(), Token: "tok",
		BindAddr: "127.0.0.1", Port: 0, Fast: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("join through an agent: %v", err)
	}
	defer m2.Stop()
	if url2 != url {
		t.Errorf("second agent learned %q, want %q", url2, url)
	}
}

func TestJoinClusterWrongToken(t *testing.T) {
	srv := startServerMember(t, "right", "http://10.0.0.1:7443")
	_, _, err := joinCluster(t.Context(), joinConfig{Name: "intruder", Join: srv.LocalAddr(), Token: "wrong",
		BindAddr: "127.0.0.1", Port: 0, Fast: true, Timeout: 10 * time.Second})
	want := "cannot join " + srv.LocalAddr() + ": the cluster token is wrong (gossip messages could not be decrypted)"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// A node name the cluster already has: the agent says so and names the
// member that holds it, rather than waiting for an API server it will
// never see.
func TestJoinClusterNameTaken(t *testing.T) {
	srv := startServerMember(t, "tok", "http://10.0.0.1:7443")
	first, _, err := joinCluster(t.Context(), joinConfig{Name: "gpu-1", Join: srv.LocalAddr(), Token: "tok",
		BindAddr: "127.0.0.1", Port: 0, Fast: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("first join: %v", err)
	}
	t.Cleanup(first.Stop)
	tests := []struct{ name, taken, holder string }{
		{"another agent's name", "gpu-1", first.LocalAddr()},
		{"the server member's name (skiff up's node)", "server", srv.LocalAddr()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, err := joinCluster(t.Context(), joinConfig{Name: tt.taken, Join: srv.LocalAddr(), Token: "tok",
				BindAddr: "127.0.0.1", Port: 0, Fast: true, Timeout: 10 * time.Second})
			if err == nil {
				m.Stop()
				t.Fatalf("a second %q joined", tt.taken)
			}
			want := "cannot join " + srv.LocalAddr() + ": node name \"" + tt.taken + "\" is already taken in the cluster by " + tt.holder + "; choose another with --node-name"
			if err.Error() != want {
				t.Fatalf("error %q\nwant  %q", err, want)
			}
		})
	}
}

// A cluster whose server advertises no API server: the join times out
// with a message that says what is missing.
func TestJoinClusterNoAPIServer(t *testing.T) {
	mc := membership.DefaultConfig("lonely-agent", "tok")
	mc.BindAddr, mc.BindPort, mc.Fast = "127.0.0.1", 0, true
	mc.Meta = membership.Meta{Role: membership.RoleAgent}
	other, err := membership.Start(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Stop)
	_, _, err = joinCluster(t.Context(), joinConfig{Name: "agent-1", Join: other.LocalAddr(), Token: "tok",
		BindAddr: "127.0.0.1", Port: 0, Fast: true, Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no server member advertised an API server") {
		t.Fatalf("error %v", err)
	}
}

func TestAdvertiseURL(t *testing.T) {
	cases := []struct{ url, advertise, want string }{
		{"http://127.0.0.1:7443", "", "http://127.0.0.1:7443"},
		{"http://0.0.0.0:7443", "10.1.2.3", "http://10.1.2.3:7443"},
		{"http://10.0.0.5:7443", "10.1.2.3", "http://10.0.0.5:7443"},
		{"http://:7443", "10.1.2.3", "http://10.1.2.3:7443"},
	}
	for _, tc := range cases {
		if got := advertiseURL(tc.url, tc.advertise); got != tc.want {
			t.Errorf("advertiseURL(%q, %q) = %q, want %q", tc.url, tc.advertise, got, tc.want)
		}
	}
}
