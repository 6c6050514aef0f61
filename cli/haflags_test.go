package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/cluster"
)

// The etcd-only flags of `skiff server` are refused on a bbolt server
// (they would mean nothing there) and accepted with an etcd store.
func TestHAFlagsNeedEtcd(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"bbolt, no etcd flags", nil, ""},
		{"bbolt with a lease TTL", []string{"--leader-lease-ttl=9s"}, "--leader-lease-ttl applies only to an etcd store"},
		{"bbolt with peer and client URLs", []string{"--etcd-peer-listen=http://127.0.0.1:2390", "--etcd-client-listen=http://127.0.0.1:2389"},
			"--etcd-peer-listen applies only to an etcd store"},
		{"embedded etcd with a lease TTL", []string{"--cluster-init", "--leader-lease-ttl=9s"}, ""},
		{"external etcd with a lease TTL", []string{"--etcd-endpoints=http://127.0.0.1:2379", "--leader-lease-ttl=9s"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := clusterFlags{cfg: cluster.DefaultConfig()}
			cmd := &cobra.Command{Use: "server"}
			h.registerHA(cmd)
			if err := cmd.Flags().Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := h.validateHA()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
