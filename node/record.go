package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Files a node keeps in its data directory for `skiff reset`.
const (
	// RecordFile says what the node made on the machine (Record).
	RecordFile = "node.json"
	// LockFile is held (flock) by the running node and holds its pid:
	// reset refuses while it is held.
	LockFile = "node.lock"
)

// Record is what a node writes into its data directory when it starts:
// which containerd namespace its containers are in, its bridge and the
// prefix of its pods' network namespaces, whether it ran the machine's
// service proxy and routes. Reset works from it, without the control
// plane.
type Record struct {
	Name                string `json:"name"`
	Runtime             string `json:"runtime"` // containerd or fake
	ContainerdAddress   string `json:"containerdAddress,omitempty"`
	ContainerdNamespace string `json:"containerdNamespace,omitempty"`
	PodNetwork          string `json:"podNetwork"` // cni or none
	Bridge              string `json:"bridge,omitempty"`
	NetNSPrefix         string `json:"netnsPrefix,omitempty"`
	// ServiceProxy: this node ran the service proxy, routes and cluster
	// DNS (the first node of a machine).
	ServiceProxy bool `json:"serviceProxy"`
}

func writeRecord(dataDir string, r Record) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dataDir, RecordFile+".tmp")
	if err := os.WriteFile(tmp, append(raw, '\n'), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", RecordFile, err)
	}
	if err := os.Rename(tmp, filepath.Join(dataDir, RecordFile)); err != nil {
		return fmt.Errorf("write %s: %w", RecordFile, err)
	}
	return nil
}

func readRecord(dataDir string) (Record, error) {
	var r Record
	raw, err := os.ReadFile(filepath.Join(dataDir, RecordFile))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("read %s: %w", filepath.Join(dataDir, RecordFile), err)
	}
	return r, nil
}

// ErrRunning means a skiff process holds a data directory's lock: reset
// refuses to pull the machine from under a running node.
var ErrRunning = errors.New("skiff is running on this data directory")

// RunningError names the data directory and the process holding it.
type RunningError struct {
	DataDir string
	PID     int // 0 when unknown
}

func (e *RunningError) Error() string {
	who := "a skiff process"
	if e.PID > 0 {
		who = "skiff (pid " + strconv.Itoa(e.PID) + ")"
	}
	return fmt.Sprintf("%s is running on data dir %s: stop it first (Ctrl-C on skiff up or skiff agent), then run skiff reset again", who, e.DataDir)
}

func (e *RunningError) Unwrap() error { return ErrRunning }

// lockDataDir takes the data directory's lock for a running node and
// writes its pid into it; release gives it back. A second node (in this
// process or another) on the same directory gets a *RunningError.
func lockDataDir(dataDir string) (release func(), err error) {
	f, err := tryLock(dataDir, filepath.Join(dataDir, LockFile), os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil // closing releases the flock
}

// checkUnlocked fails with a *RunningError while a process holds the
// flock of path (a node's LockFile, or the API server's store, which
// bbolt flocks); a missing file is not held.
func checkUnlocked(dataDir, path string) error {
	f, err := tryLock(dataDir, path, os.O_RDONLY)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	f.Close()
	return nil
}

// tryLock opens path and takes its exclusive flock without waiting.
func tryLock(dataDir, path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		pid := lockPID(f)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &RunningError{DataDir: dataDir, PID: pid}
		}
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	return f, nil
}

func lockPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	return pid
}
