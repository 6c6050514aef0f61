package store

// Bad disks and bad files: a full disk fails writes with ErrNoSpace and
// nothing else (reads go on, writes resume when space returns); a damaged
// or cut-short state.db is found when the store opens and refused with a
// DamagedError that says how to recover, never replaced by an empty store.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"skiff.dev/skiff/api"
)

// ErrNoSpace means a commit failed because the store's disk (or the
// user's quota on it) is full. The write is not stored and the revision is
// unchanged; reads keep working, and writes succeed again once space is
// freed, without a restart. The error is also an *api.StatusError: 500, as
// kube-apiserver answers when etcd is out of space ("etcdserver: mvcc:
// database space exceeded").
var ErrNoSpace = errors.New("the store's disk is full")

// noSpaceError is the error of every write of a batch whose commit found
// the disk full: a 500 Status for the API, ErrNoSpace and the disk's own
// error for errors.Is.
type noSpaceError struct {
	status *api.StatusError
	err    error
}

func (e *noSpaceError) Error() string   { return e.status.Error() }
func (e *noSpaceError) Unwrap() []error { return []error{e.status, ErrNoSpace, e.err} }

// isNoSpace reports whether err is the disk's "no space left on device"
// (or "disk quota exceeded").
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// newNoSpaceError is the error of a commit to path that failed with err,
// a full disk. The disk's errors name the file; one that does not is told.
func newNoSpaceError(path string, err error) error {
	what := err.Error()
	if !strings.Contains(what, path) {
		what = path + ": " + what
	}
	msg := fmt.Sprintf("Internal error occurred: %v: %s; the write was not stored. Writes fail until space is freed on that disk; reads keep working", ErrNoSpace, what)
	return &noSpaceError{status: api.NewStatusError(500, api.ReasonInternal, msg), err: err}
}

// DamagedError is the error of Open for a store file it will not use:
// cut short, with broken pages, or not a skiff store. Open never replaces
// such a file with an empty store; the message says how to recover.
// errors.Is(err, ErrDamaged) holds.
type DamagedError struct {
	// Path of the file.
	Path string
	// Err is what is wrong with it.
	Err error
}

func (e *DamagedError) Error() string {
	dir := filepath.Dir(e.Path)
	return fmt.Sprintf("store %s is damaged: %v; skiff will not start on it, nor replace it with an empty store. "+
		"To recover: stop skiff and restore your latest snapshot with `skiff snapshot restore FILE --data-dir %s` "+
		"(the damaged file is kept as %s.bak-TIME); without a snapshot, move %s aside and start again "+
		"with an empty store (every object is lost; nodes register again). docs/troubleshooting.md says more",
		e.Path, e.Err, dir, filepath.Base(e.Path), e.Path)
}

func (e *DamagedError) Unwrap() []error { return []error{ErrDamaged, e.Err} }

// statExisting says whether path is a store file to check before it is
// opened: false when there is none (Open creates it). A file too short to
// be a database (an empty one among them: bbolt would write a new store
// over it) is damaged.
func statExisting(path string) (size int64, exists bool, err error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("open store %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return 0, false, fmt.Errorf("open store %s: not a regular file", path)
	}
	if fi.Size() < minFileSize {
		return 0, false, &DamagedError{Path: path, Err: fmt.Errorf("%d bytes, too small for a database (cut short?)", fi.Size())}
	}
	return fi.Size(), true, nil
}

// guard runs f and turns a panic or a memory fault (bbolt reading a
// damaged page, or past the end of a file cut short) into an ErrDamaged
// error.
func guard(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrDamaged, p)
		}
	}()
	return f()
}

// checkPages checks the database of tx, whose file holds size bytes: the
// file is not shorter than the database and bbolt's page check passes
// (every page reachable once, none both used and free). It does not
// decode the objects (Inspect does).
func checkPages(tx *bolt.Tx, size int64) error {
	if tx.Size() > size {
		return fmt.Errorf("%w: %d bytes, the database needs %d", ErrDamaged, size, tx.Size())
	}
	readPages(tx)
	var damaged []error
	for cerr := range tx.Check() { // read to the end: Check's goroutine sends them all
		damaged = append(damaged, cerr)
	}
	if len(damaged) > 0 {
		return fmt.Errorf("%w: %d problems, first: %w", ErrDamaged, len(damaged), damaged[0])
	}
	return nil
}

// readPages reads every branch and leaf page of tx's buckets in the
// caller's goroutine, so that a damaged page panics there, where the caller
// recovers. The store keeps no freelist in the file (boltOptions:
// NoFreelistSync), so bbolt's Check first rebuilds it by walking the pages
// in a goroutine of its own, where such a panic would end the process
// instead of failing the check.
func readPages(tx *bolt.Tx) {
	var walk func(b *bolt.Bucket)
	walk = func(b *bolt.Bucket) {
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if v == nil {
				if child := b.Bucket(k); child != nil {
					walk(child)
				}
			}
		}
	}
	_ = tx.ForEach(func(_ []byte, b *bolt.Bucket) error { walk(b); return nil })
}

// checkFile checks an existing store file before Open writes to it: read
// only, so that a damaged file is closed again and left as it was (bbolt
// opening it for writing reads its freelist and may panic half way, the
// file still locked). It checks the pages and skiff's revision bucket. A
// database with no bucket at all is a store created but never written (a
// server stopped right after creating it) and passes; one with buckets but
// not skiff's is another program's (an etcd snapshot, say).
func checkFile(path string, size int64) error {
	var db *bolt.DB
	err := guard(func() (err error) {
		db, err = bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
		return err
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return fmt.Errorf("open store %s: %w: stop it, or give this server its own --data-dir", path, ErrInUse)
	}
	if err != nil {
		return &DamagedError{Path: path, Err: err}
	}
	defer db.Close()
	err = guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			// The size first: Check must not read pages past the end of
			// the file (its goroutine would fault, unguarded).
			if err := checkPages(tx, size); err != nil {
				return err
			}
			meta := tx.Bucket(metaBucket)
			if meta == nil {
				empty := true
				_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
				if empty {
					return nil
				}
				return fmt.Errorf("%w: no %s bucket (a bbolt file, but not skiff's)", ErrNotStore, metaBucket)
			}
			if _, err := readRevision(meta); err != nil {
				return fmt.Errorf("%w: %w", ErrDamaged, err)
			}
			return nil
		})
	})
	if err != nil {
		return &DamagedError{Path: path, Err: err}
	}
	return nil
}
