package cli

import "testing"

// --pod-security-default accepts the three levels and refuses the rest;
// cluster's TestPodSecurityDefault checks what a level sets.
func TestPodSecurityFlag(t *testing.T) {
	tests := []struct {
		level   string
		wantErr string
	}{
		{level: ""},
		{level: "baseline"},
		{level: "privileged"},
		{level: "restricted"},
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
		})
	}
}
