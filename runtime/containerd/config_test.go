package containerd

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	bad := Config{StateDir: "relative", CDISpecDirs: []string{"also-relative"}}
	err := bad.Validate()
	if err == nil {
		t.Fatal("Validate of an empty config passed")
	}
	for _, want := range []string{"address", "namespace", "stateDir", "cdiSpecDirs[0]", "snapshotter", "runtimeName", "dialTimeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %q; does not name %s", err, want)
		}
	}
}
