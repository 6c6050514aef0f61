package controlplane

import (
	"strings"
	"testing"
	"time"
)

func TestEtcdConfigValidate(t *testing.T) {
	with := func(f func(*EtcdConfig)) *EtcdConfig {
		c := DefaultEtcdConfig()
		f(c)
		return c
	}
	tests := []struct {
		name  string
		cfg   *EtcdConfig
		token string
		want  []string // every one must appear; none: valid
	}{
		{"cluster-init", with(func(c *EtcdConfig) { c.ClusterInit = true }), "", nil},
		{"join", with(func(c *EtcdConfig) { c.JoinServer, c.CACertHash = "https://10.0.0.1:7443", "sha256:00" }), "tok", nil},
		{"join without a pin", with(func(c *EtcdConfig) { c.JoinServer = "https://10.0.0.1:7443" }), "tok", []string{"--join-server needs --discovery-token-ca-cert-hash"}},
		{"join, pin skipped", with(func(c *EtcdConfig) { c.JoinServer, c.UnsafeSkipCAVerification = "https://10.0.0.1:7443", true }), "tok", nil},
		{"external", with(func(c *EtcdConfig) { c.Endpoints = []string{"http://10.0.0.5:2379"} }), "", nil},
		{"nothing chosen", with(func(*EtcdConfig) {}), "", []string{"one of --cluster-init, --join-server or --etcd-endpoints is required"}},
		{"init and join", with(func(c *EtcdConfig) { c.ClusterInit, c.JoinServer = true, "http://10.0.0.1:7443" }), "tok", []string{"exclude each other"}},
		{"join and external, no token, bad URLs, short TTL", with(func(c *EtcdConfig) {
			c.JoinServer, c.Endpoints, c.LeaderLeaseTTL = "10.0.0.1", []string{"etcd:2379"}, time.Second
		}), "", []string{"exclude each other", "--join-server: ", "--join-server needs the admin token", "--etcd-endpoints[0]", "--leader-lease-ttl 1s"}},
		{"bad member URLs", with(func(c *EtcdConfig) {
			c.ClusterInit, c.PeerListen, c.ClientListen = true, "127.0.0.1:2380", "http://127.0.0.1"
		}), "",
			[]string{"--etcd-peer-listen", "--etcd-client-listen", "no port"}},
		{"plain-http member URLs", with(func(c *EtcdConfig) {
			c.ClusterInit, c.PeerListen = true, "http://127.0.0.1:2380"
		}), "", []string{`--etcd-peer-listen: "http://127.0.0.1:2380": want https://HOST:PORT (etcd's traffic between servers is TLS with the cluster CA)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig(t.TempDir())
			cfg.Etcd, cfg.API.Token = tc.cfg, tc.token
			err := cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors mentioning %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v\nwant it to mention %q", err, w)
				}
			}
		})
	}
}
