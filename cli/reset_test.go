package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"skiff.dev/skiff/node"
)

// skiff reset on the data dir of a running server refuses, changing
// nothing; once it stopped, nothing is left to remove but the data dir,
// which --remove-data-dir removes.
func TestResetCommand(t *testing.T) {
	dir := t.TempDir()
	cp, _ := startTestControlPlane(t, dir)
	reset := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := Main(context.Background(), append([]string{"reset", "--data-dir", dir}, args...), &out, &errb)
		return out.String(), err
	}
	out, err := reset("--remove-data-dir")
	if !errors.Is(err, node.ErrRunning) || !strings.Contains(err.Error(), "is running on data dir "+dir+": stop it first") || out != "" {
		t.Fatalf("reset of a running server's dir: %q, %v; want it refused", out, err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("a refused reset removed the data dir: %v", err)
	}
	cp.Stop()
	out, err = reset()
	if err != nil || out != "nothing to remove: no skiff containers, pod network or iptables rules of "+dir+" on this machine\n" {
		t.Errorf("reset: %q, %v", out, err)
	}
	out, err = reset("--remove-data-dir")
	if err != nil || out != "removed data dir "+dir+"\n" {
		t.Errorf("reset --remove-data-dir: %q, %v", out, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data dir after --remove-data-dir: %v", err)
	}
}
