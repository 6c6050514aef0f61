package devices

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"skiff.dev/skiff/internal/atomicfile"
)

// checkpointVersion is bumped when the file's meaning changes.
const checkpointVersion = 1

// checkpoint is the file of allocations: which pod container holds which
// devices. It is the truth about allocations across agent restarts; the
// plugins' answers are not kept (Allocate is asked again after a restart).
type checkpoint struct {
	Version int     `json:"version"`
	Entries []entry `json:"entries"`
}

type entry struct {
	PodUID    string   `json:"podUID"`
	Namespace string   `json:"namespace"`
	PodName   string   `json:"podName"`
	Container string   `json:"container"`
	Resource  string   `json:"resource"`
	DeviceIDs []string `json:"deviceIDs"`
	// Created is when the devices were picked (see Config.RetainGrace).
	Created time.Time `json:"created"`
}

func (c *checkpoint) find(uid, container, resource string) *entry {
	for i := range c.Entries {
		e := &c.Entries[i]
		if e.PodUID == uid && e.Container == container && e.Resource == resource {
			return e
		}
	}
	return nil
}

// holds reports whether (uid, container) has an entry for every resource.
func (c *checkpoint) holds(uid, container string, resources []string) bool {
	for _, r := range resources {
		if c.find(uid, container, r) == nil {
			return false
		}
	}
	return true
}

// held is the set of device IDs of a resource that some pod holds.
func (c *checkpoint) held(resource string) map[string]bool {
	out := map[string]bool{}
	for _, e := range c.Entries {
		if e.Resource == resource {
			for _, id := range e.DeviceIDs {
				out[id] = true
			}
		}
	}
	return out
}

// remove drops the entries that match; it reports whether any did.
func (c *checkpoint) remove(match func(entry) bool) bool {
	n := len(c.Entries)
	c.Entries = slices.DeleteFunc(c.Entries, match)
	return len(c.Entries) != n
}

// ErrCheckpointDamaged means the checkpoint file cannot be read: cut
// short, not JSON, or of another version. The manager refuses to start on
// it (CheckpointError says how to recover).
var ErrCheckpointDamaged = errors.New("device checkpoint is damaged")

// CheckpointError is New's error for a checkpoint it cannot read. The
// checkpoint is the only record of which running container holds which
// device: starting without it could give a GPU that a running container
// holds to a second pod, so the manager refuses, and the message says how
// to reset it safely. errors.Is(err, ErrCheckpointDamaged) holds.
type CheckpointError struct {
	// Path of the file.
	Path string
	// Err is what is wrong with it.
	Err error
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("%v: %s: %v; it records which pod holds which device, and starting without it "+
		"could give a device that a running container holds to a second pod. To recover: stop every pod "+
		"on this node that uses devices (skiff drain NODE, then stop the agent), move the file aside "+
		"(mv %s %s.broken) and start the agent again; docs/troubleshooting.md says more",
		ErrCheckpointDamaged, e.Path, e.Err, e.Path, e.Path)
}

func (e *CheckpointError) Unwrap() []error { return []error{ErrCheckpointDamaged, e.Err} }

// readCheckpoint reads the file; a missing file is an empty checkpoint. A
// file that cannot be read is a CheckpointError, not a fresh start:
// handing out devices without knowing who holds them could give one GPU
// to two pods.
func readCheckpoint(path string) (checkpoint, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return checkpoint{Version: checkpointVersion}, nil
	}
	if err != nil {
		return checkpoint{}, fmt.Errorf("read device checkpoint: %w", err)
	}
	if len(b) == 0 {
		return checkpoint{}, &CheckpointError{Path: path, Err: errors.New("the file is empty (cut short?)")}
	}
	var ck checkpoint
	if err := json.Unmarshal(b, &ck); err != nil {
		return checkpoint{}, &CheckpointError{Path: path, Err: fmt.Errorf("not a checkpoint (cut short?): %w", err)}
	}
	if ck.Version != checkpointVersion {
		return checkpoint{}, &CheckpointError{Path: path, Err: fmt.Errorf("version %d, want %d (written by another skiff?)", ck.Version, checkpointVersion)}
	}
	return ck, nil
}

// writeCheckpoint replaces the file atomically (atomicfile.WriteFile, mode
// 0600): a power loss leaves the old checkpoint or the new one, whole.
func writeCheckpoint(path string, ck checkpoint) error {
	ck.Version = checkpointVersion
	b, err := json.MarshalIndent(ck, "", "  ")
	if err != nil {
		return fmt.Errorf("write device checkpoint: %w", err)
	}
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write device checkpoint: %w", err)
	}
	return nil
}
