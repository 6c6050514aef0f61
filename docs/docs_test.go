// Package docs holds skiff's documentation; its test keeps the file paths
// the pages name true.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// backticked finds `code spans`; repoPath keeps those that look like a
// path in the repository (a top-level entry, then more).
var (
	backticked = regexp.MustCompile("`([^`\n]+)`")
	repoPath   = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.*-]*)*$`)
)

// TestPathsExist checks that every backticked repository path in the
// docs exists: `agent/devices/manager.go`, `cli/`, `examples/lab1-nginx.yaml`.
// A span whose first element is not a top-level entry of the repository
// (`nvidia.com/gpu`, `/dev/nvidia0`) is not a path of the repository.
// concepts.md must name at least 40 such paths.
func TestPathsExist(t *testing.T) {
	root := ".."
	top := map[string]bool{}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			top[e.Name()] = true
		}
	}
	for _, page := range []string{"concepts.md", "labs.md", "troubleshooting.md", "architecture.md"} {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatalf("read %s: %v", page, err)
		}
		n := 0
		for _, m := range backticked.FindAllStringSubmatch(string(b), -1) {
			p := m[1]
			first, _, ok := strings.Cut(p, "/")
			if !ok || !repoPath.MatchString(p) || !top[first] {
				continue
			}
			n++
			if strings.Contains(p, "*") {
				if ms, _ := filepath.Glob(filepath.Join(root, p)); len(ms) == 0 {
					t.Errorf("%s: `%s` matches no file", page, p)
				}
				continue
			}
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s: `%s` does not exist", page, p)
			}
		}
		if page == "concepts.md" && n < 40 {
			t.Errorf("concepts.md names %d repository paths, want at least 40", n)
		}
	}
}
