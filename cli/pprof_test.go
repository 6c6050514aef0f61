package cli

import (
	"strings"
	"testing"
)

func TestPprofListenAcceptsOnlyLoopback(t *testing.T) {
	tests := []struct {
		listen, wantErr string
	}{
		{"", ""},
		{"127.0.0.1:6060", ""},
		{"[::1]:6060", ""},
		{"localhost:6060", ""},
		{"0.0.0.0:6060", "want a loopback address"},
		{"10.0.0.5:6060", "want a loopback address"},
		{"example.com:6060", "want a loopback address"},
		{"6060", "missing port"},
	}
	for _, tt := range tests {
		t.Run(tt.listen, func(t *testing.T) {
			err := (&pprofFlags{listen: tt.listen}).validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("validate: %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("validate: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
