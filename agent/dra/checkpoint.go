package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"skiff.dev/skiff/internal/atomicfile"
)

// ErrCheckpointDamaged means a DRA checkpoint file cannot be read: cut
// short, not JSON, or of another version. The manager and the GPU driver
// refuse to start on one (CheckpointError says how to recover).
var ErrCheckpointDamaged = errors.New("DRA checkpoint is damaged")

// CheckpointError is the error for a checkpoint that cannot be read.
// A checkpoint is the only record of which claim holds which device on
// this node: starting without it could give a GPU that a running container
// holds to a second pod, so the reader refuses, and the message says how
// to reset it safely. errors.Is(err, ErrCheckpointDamaged) holds.
type CheckpointError struct {
	// Path of the file.
	Path string
	// Err is what is wrong with it.
	Err error
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("%v: %s: %v; it records which ResourceClaim holds which device on this node, and starting "+
		"without it could give a device that a running container holds to a second pod. To recover: stop every pod "+
		"on this node that uses ResourceClaims (skiff drain NODE, then stop the agent), move the file aside "+
		"(mv %s %s.broken) and start the agent again; docs/troubleshooting.md says more",
		ErrCheckpointDamaged, e.Path, e.Err, e.Path, e.Path)
}

func (e *CheckpointError) Unwrap() []error { return []error{ErrCheckpointDamaged, e.Err} }

// ReadCheckpoint reads the JSON file at path into v, whose top-level
// "version" field must be version. A missing file leaves v as it is and
// returns nil (a first start). Anything unreadable is a CheckpointError.
func ReadCheckpoint(path string, version int, v any) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read DRA checkpoint: %w", err)
	}
	if len(b) == 0 {
		return &CheckpointError{Path: path, Err: errors.New("the file is empty (cut short?)")}
	}
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return &CheckpointError{Path: path, Err: fmt.Errorf("not a checkpoint (cut short?): %w", err)}
	}
	if head.Version != version {
		return &CheckpointError{Path: path, Err: fmt.Errorf("version %d, want %d (written by another skiff?)", head.Version, version)}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return &CheckpointError{Path: path, Err: fmt.Errorf("not a checkpoint: %w", err)}
	}
	return nil
}

// WriteCheckpoint replaces the file at path atomically with v as JSON
// (atomicfile.WriteFile, mode 0600), so a crash leaves the old file or the
// new one, whole.
func WriteCheckpoint(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write DRA checkpoint: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("write DRA checkpoint: %w", err)
	}
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write DRA checkpoint: %w", err)
	}
	return nil
}
