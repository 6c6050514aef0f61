package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/controlplane/kueue"
)

// The --kueue-* flags of `up` and `server` become the queue manager's
// waitForPodsReady; bad values are refused with every problem named.
func TestKueueFlags(t *testing.T) {
	def := kueue.DefaultConfig().WaitForPodsReady
	for _, tt := range []struct {
		name    string
		args    []string
		want    kueue.WaitForPodsReady
		wantErr []string
	}{
		{name: "defaults", want: def},
		{name: "short timeout and backoff", args: []string{"--kueue-pods-ready-timeout=3s", "--kueue-requeue-backoff-base=1s", "--kueue-requeue-backoff-max=4s", "--kueue-requeue-backoff-limit=2"},
			want: kueue.WaitForPodsReady{Enable: true, Timeout: 3 * time.Second, BackoffBase: time.Second, BackoffMax: 4 * time.Second, BackoffLimitCount: 2}},
		{name: "off", args: []string{"--kueue-pods-ready-timeout=0"},
			want: kueue.WaitForPodsReady{Enable: false, BackoffBase: def.BackoffBase, BackoffMax: def.BackoffMax}},
		{name: "negative timeout", args: []string{"--kueue-pods-ready-timeout=-1s"}, wantErr: []string{"--kueue-pods-ready-timeout -1s: must not be negative"}},
		{name: "every bad value", args: []string{"--kueue-requeue-backoff-base=0s", "--kueue-requeue-backoff-limit=-1"},
			wantErr: []string{"waitForPodsReady.requeuingStrategy.backoffBaseSeconds 0s: must be positive", "waitForPodsReady.requeuingStrategy.backoffLimitCount -1: must not be negative"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var k kueueFlags
			cmd := &cobra.Command{Use: "up"}
			k.register(cmd)
			if err := cmd.Flags().Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := k.validate()
			if len(tt.wantErr) > 0 {
				for _, w := range tt.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("validate() = %v, want %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("validate() = %v", err)
			}
			got := k.config()
			if got.WaitForPodsReady != tt.want {
				t.Errorf("config %+v, want %+v", got.WaitForPodsReady, tt.want)
			}
		})
	}
	var unregistered kueueFlags
	if unregistered.config() != nil || unregistered.validate() != nil {
		t.Error("flags not registered: want the server's default (nil)")
	}
}
