// Package atomicfile writes files so that a reader, or a machine that loses
// power, sees the old content or the new content, whole, never half a file.
//
// The data goes to a temporary file in the same directory (named
// ".NAME-RANDOM", so it is hidden and never matches NAME's extension), which
// is given its mode, written and synced; then it is put in place and the
// directory is synced, which makes the new name durable. WriteFile puts it
// in place with a rename (replacing what was there); WriteNew with a link,
// which fails when the name exists, so of two processes creating the same
// file at once exactly one wins and neither overwrites the other.
//
// The mode is set with chmod, so the umask does not narrow it. On failure
// the temporary file is removed and the file at path is left as it was.
//
// github.com/google/renameio/v2 does the rename half, but syncs no
// directory and has no create-exclusive variant; the whole is forty lines.
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data, mode perm. The directory must exist.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, os.Rename)
}

// WriteNew creates path with data, mode perm, only when path does not
// exist yet. When it exists the error wraps fs.ErrExist and the file is
// untouched (read it: another writer won). The directory must exist.
func WriteNew(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, os.Link)
}

func write(path string, data []byte, perm fs.FileMode, place func(tmp, path string) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a rename: nothing there; after a link: the second name
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := place(tmp, path); err != nil {
		return err // an *os.LinkError naming both paths; wraps fs.ErrExist for WriteNew
	}
	return syncDir(dir)
}

// syncDir makes a new directory entry durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
