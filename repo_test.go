package main

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// maxTrackedFile is the largest file the repository may track: anything
// bigger is a build output, a data dump or a vendored binary, none of which
// belong in source control (tests build what they need).
const maxTrackedFile = 1 << 20

// TestTrackedFilesAreSmallText fails when git tracks a binary (a NUL byte in
// its first 8000 bytes, git's own heuristic) or a file over 1 MiB, such as a
// stray `go test -c` output.
func TestTrackedFilesAreSmallText(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	files := bytes.Split(bytes.TrimRight(out, "\x00"), []byte{0})
	if len(files) < 10 {
		t.Fatalf("git ls-files listed %d files; expected the whole repository", len(files))
	}
	for _, f := range files {
		name := string(f)
		st, err := os.Lstat(name)
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !st.Mode().IsRegular() {
			continue
		}
		if st.Size() > maxTrackedFile {
			t.Errorf("%s is %d bytes: tracked files must be at most %d (remove it, or generate it in the test)", name, st.Size(), maxTrackedFile)
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
			t.Errorf("%s is a binary file: tracked files must be text", name)
		}
	}
}
