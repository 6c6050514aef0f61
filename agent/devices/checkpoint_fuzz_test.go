package devices

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzCheckpoint reads any checkpoint file. One that cannot be read is an
// error for New too (never a fresh start that forgets who holds which
// device); one that reads is written back to a file that reads the same,
// and the manager built on it reports every device it records as held.
func FuzzCheckpoint(f *testing.F) {
	good, err := json.MarshalIndent(checkpoint{Version: checkpointVersion, Entries: []entry{
		{PodUID: "u1", Namespace: "default", PodName: "p", Container: "main", Resource: "nvidia.com/gpu", DeviceIDs: []string{"GPU-0", "GPU-1"}, Created: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)},
		{PodUID: "u2", Namespace: "ml", PodName: "q", Container: "c", Resource: "example.com/widget", DeviceIDs: []string{"w0"}},
	}}, "", "  ")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(good),
		`{"version":1,"entries":[]}`,
		`{"version":1}`,
		`{"version":2,"entries":[]}`,
		`{"version":1,"entries":[{"podUID":"a","resource":"r/x","deviceIDs":["d","d"]},{"podUID":"b","resource":"r/x","deviceIDs":["d"]}]}`,
		`{"version":1,"entries":[{"created":"2026-01-02T03:04:05+01:00"}]}`,
		`{"version":1,"entries":[{"created":"yesterday"}]}`,
		`{"version":1,"entries":null,"extra":true}`,
		`{"version":1,"entries":[null]}`,
		``, `null`, `[]`, `{"version":1,"entries":[`, "\x00\x00\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			t.Skip("input too large")
		}
		dir := t.TempDir()
		path := filepath.Join(dir, CheckpointName)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		ck, err := readCheckpoint(path)
		cfg := DefaultConfig()
		cfg.Dir = dir
		m, merr := New(cfg)
		if (err == nil) != (merr == nil) {
			t.Fatalf("readCheckpoint: %v, but New: %v", err, merr)
		}
		if err != nil {
			return
		}
		held := map[string]map[string]bool{}
		for _, e := range ck.Entries {
			if held[e.Resource] == nil {
				held[e.Resource] = map[string]bool{}
			}
			for _, id := range e.DeviceIDs {
				held[e.Resource][id] = true
			}
		}
		snap := m.Snapshot()
		for res, ids := range held {
			for id := range ids {
				if _, ok := snap[res].Allocated[id]; !ok {
					t.Fatalf("checkpoint holds %s %q, the manager does not say so (%v)", res, id, snap)
				}
			}
		}
		if err := writeCheckpoint(path, ck); err != nil {
			t.Fatal(err)
		}
		again, err := readCheckpoint(path)
		if err != nil {
			t.Fatalf("a checkpoint written back does not read: %v", err)
		}
		b1, _ := json.Marshal(ck)
		b2, _ := json.Marshal(again)
		if !bytes.Equal(b1, b2) {
			t.Fatalf("checkpoint changes when written back:\n%s\n%s", b1, b2)
		}
	})
}
