// Package docs holds skiff's documentation; its tests keep it true: the
// file paths the pages name exist, the README's layout names every
// package, every package has a package comment, and the fuzz table of
// reliability.md lists exactly the tree's fuzz targets.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
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

// packageDirs lists the repository's Go package directories (relative,
// "/"-separated), skipping hidden directories and testdata; for each,
// whether it has non-test files.
func packageDirs(t *testing.T, root string) map[string]bool {
	t.Helper()
	dirs := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		dirs[rel] = dirs[rel] || !strings.HasSuffix(name, "_test.go")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// layoutEntries reads the ## Layout block of README.md: each top-level
// entry ("    api/   ...") with its continuation lines.
func layoutEntries(t *testing.T, readme string) map[string]string {
	t.Helper()
	_, after, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no ## Layout section")
	}
	block, _, _ := strings.Cut(after, "\n## ")
	entries := map[string]string{}
	top := ""
	for _, line := range strings.Split(block, "\n") {
		if !strings.HasPrefix(line, "    ") {
			continue
		}
		body := strings.TrimPrefix(line, "    ")
		if body != "" && body[0] != ' ' {
			first, _, _ := strings.Cut(body, " ")
			top = strings.TrimSuffix(first, "/")
		}
		if top != "" {
			entries[top] += " " + body
		}
	}
	return entries
}

// TestLayoutNamesEveryPackage: every package directory appears in the
// README's ## Layout, a top-level one as its own entry ("    api/ ..."),
// a nested one by its last element and a slash ("patch/") in its
// top-level entry.
func TestLayoutNamesEveryPackage(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	entries := layoutEntries(t, string(readme))
	for _, dir := range slices.Sorted(maps.Keys(packageDirs(t, ".."))) {
		if dir == "." {
			continue // main.go: the layout's first line
		}
		top, _, nested := strings.Cut(dir, "/")
		text, ok := entries[top]
		switch {
		case !ok:
			t.Errorf("README.md ## Layout has no entry for %s/: add a line `    %s/   (what it holds)` to the layout block", top, top)
		case nested && !strings.Contains(text, path.Base(dir)+"/"):
			t.Errorf("README.md ## Layout does not name package %s: add `%s/` (what it holds) to the `%s/` entry", dir, path.Base(dir), top)
		}
	}
}

// TestEveryPackageHasAComment: every package says what it is in a package
// comment (`// Package x ...` before its package clause; doc.go in the
// larger ones). A package of tests only may have it in a test file.
func TestEveryPackageHasAComment(t *testing.T) {
	dirs := packageDirs(t, "..")
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		hasSource := dirs[dir]
		files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		documented := false
		for _, f := range files {
			if hasSource && strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(af.Name.Name, "_test") {
				continue // an external test package says nothing of the package
			}
			if af.Doc != nil && strings.TrimSpace(af.Doc.Text()) != "" {
				documented = true
				break
			}
		}
		if !documented {
			t.Errorf("package %s has no package comment: add %s/doc.go with `// Package %s is ...`: its concept and invariants, in a few lines", dir, dir, path.Base(dir))
		}
	}
}

// fuzzRow is a row of the fuzz table of reliability.md: "| FuzzX (pkg) |".
var fuzzRow = regexp.MustCompile(`(?m)^\| (Fuzz\w+) \(([^)]*)\) \|`)

// TestFuzzTableListsEveryTarget: the fuzz table of docs/reliability.md
// lists exactly the `func FuzzX(f *testing.F)` targets of the tree, each
// with its package.
func TestFuzzTableListsEveryTarget(t *testing.T) {
	b, err := os.ReadFile("reliability.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range fuzzRow.FindAllStringSubmatch(string(b), -1) {
		listed[m[1]+" ("+strings.TrimSuffix(m[2], "/")+")"] = true
	}
	if len(listed) == 0 {
		t.Fatal("docs/reliability.md: no fuzz table rows (`| FuzzX (package) | oracle | execs | new | findings |`) found")
	}
	inTree := map[string]bool{}
	for dir := range packageDirs(t, "..") {
		files, err := filepath.Glob(filepath.Join("..", dir, "*_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range af.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Fuzz") && isFuzzTarget(fd) {
					inTree[fd.Name.Name+" ("+dir+")"] = true
				}
			}
		}
	}
	for _, target := range slices.Sorted(maps.Keys(inTree)) {
		if !listed[target] {
			t.Errorf("docs/reliability.md: the fuzz table has no row for %s: add `| %s | the oracle | execs (30 s) | new | findings |` to the table under ## Fuzzing (hack/fuzz.sh 30 runs it)", target, target)
		}
	}
	for _, target := range slices.Sorted(maps.Keys(listed)) {
		if !inTree[target] {
			t.Errorf("docs/reliability.md: the fuzz table lists %s, which is not in the tree: remove its row, or correct the name or the package", target)
		}
	}
}

// isFuzzTarget: one parameter, of type *testing.F.
func isFuzzTarget(fd *ast.FuncDecl) bool {
	ps := fd.Type.Params.List
	if len(ps) != 1 {
		return false
	}
	star, ok := ps[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "F"
}
