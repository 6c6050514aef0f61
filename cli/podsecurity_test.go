package cli

import (
	"testing"

	"skiff.dev/skiff/controlplane/apiserver"
)

func TestPodSecurityFlag(t *testing.T) {
	tests := []struct {
		level   string
		wantErr string
		enforce string // of the applied config; "" none set
	}{
		{level: "", enforce: ""},
		{level: "baseline", enforce: "baseline"},
		{level: "privileged", enforce: "privileged"},
		{level: "restricted", enforce: "restricted"},
		{level: "strict", wantErr: `--pod-security-default "strict": must be one of privileged, baseline, restricted`},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			f := podSecurityFlag{level: tt.level}
			err := f.validate()
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("validate() = %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg := apiserver.DefaultConfig()
			f.apply(&cfg)
			switch {
			case tt.enforce == "" && cfg.PodSecurity != nil:
				t.Errorf("config set for the default: %+v", cfg.PodSecurity)
			case tt.enforce != "" && (cfg.PodSecurity == nil || cfg.PodSecurity.Defaults.Enforce != tt.enforce || cfg.PodSecurity.Defaults.Warn != tt.enforce || cfg.PodSecurity.Defaults.Audit != tt.enforce):
				t.Errorf("config = %+v, want every mode %s", cfg.PodSecurity, tt.enforce)
			}
		})
	}
}
