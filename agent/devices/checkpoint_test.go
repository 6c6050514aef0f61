package devices_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"skiff.dev/skiff/agent/devices"
)

// A checkpoint as the manager writes it: pod a holds widgets w2 and w3.
const goodCheckpoint = `{
  "version": 1,
  "entries": [
    {
      "podUID": "a",
      "namespace": "default",
      "podName": "a",
      "container": "main",
      "resource": "example.com/widget",
      "deviceIDs": ["w2", "w3"],
      "created": "2026-01-02T03:04:05Z"
    }
  ]
}`

// TestDamagedCheckpointRefused: a checkpoint cut short, emptied, replaced
// by something else or of another version stops the manager with an error
// that names the file and the safe reset; the file is left as it was, and
// the reset (moving it aside) lets the manager start.
func TestDamagedCheckpointRefused(t *testing.T) {
	tests := []struct {
		name, data, says string
	}{
		{"emptied", "", "empty"},
		{"cut short", goodCheckpoint[:len(goodCheckpoint)/2], "cut short"},
		{"cut by one byte", goodCheckpoint[:len(goodCheckpoint)-1], "unexpected end of JSON input"},
		{"zeros", "\x00\x00\x00\x00", "not a checkpoint"},
		{"null", "null", "version 0, want 1"},
		{"newer version", `{"version": 2, "entries": []}`, "version 2, want 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := shortDir(t)
			path := filepath.Join(dir, devices.CheckpointName)
			if err := os.WriteFile(path, []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := devices.DefaultConfig()
			cfg.Dir = dir
			m, err := devices.New(cfg)
			if err == nil {
				m.Stop()
				t.Fatal("New with a damaged checkpoint succeeded; it could hand out devices that running containers hold")
			}
			var ce *devices.CheckpointError
			if !errors.As(err, &ce) || !errors.Is(err, devices.ErrCheckpointDamaged) || ce.Path != path {
				t.Fatalf("New: %v; want a CheckpointError for %s", err, path)
			}
			for _, want := range []string{path, tt.says, "skiff drain NODE", "mv " + path + " " + path + ".broken"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
			t.Logf("the error: %v", err)
			if b, err := os.ReadFile(path); err != nil || string(b) != tt.data {
				t.Fatalf("the failed start changed the checkpoint: %q, %v", b, err)
			}

			// The reset the message gives.
			if err := os.Rename(path, path+".broken"); err != nil {
				t.Fatal(err)
			}
			m, err = devices.New(cfg)
			if err != nil {
				t.Fatalf("New after the reset: %v", err)
			}
			m.Stop()
		})
	}
}

// TestGoodCheckpointReads: the fixture above is a checkpoint New reads
// (so the damaged cases are damaged by their cut, not by the fixture).
func TestGoodCheckpointReads(t *testing.T) {
	dir := shortDir(t)
	if err := os.WriteFile(filepath.Join(dir, devices.CheckpointName), []byte(goodCheckpoint), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := devices.DefaultConfig()
	cfg.Dir = dir
	m, err := devices.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Stop()
}
