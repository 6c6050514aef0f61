package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
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

// layers orders skiff's top-level packages: a package may import one of a
// lower layer, or one under its own top-level directory, and nothing else.
// So imports point one way (api → pki, membership → client → runtime →
// agent, controlplane → node, dashboard → cluster → cli → main), and a
// student can read each layer knowing only those below it. Tests are held
// to the same order.
var layers = [][]string{
	{"internal"},                    // helpers with no skiff imports
	{"api"},                         // object types, wire names, file formats
	{"pki", "membership"},           // the cluster CA and certificates; gossip membership
	{"client"},                      // how anything talks to the API
	{"runtime"},                     // containers
	{"agent", "controlplane"},       // the node agent; the server's pieces
	{"node", "dashboard"},           // assembly of a node; the web dashboard
	{"cluster"},                     // assembly of the processes: up, server, agent
	{"scenario"},                    // scheduling scenarios on an in-process cluster
	{"cli"},                         // the commands
	{""},                            // main
	{"integration", "hack", "docs"}, // end-to-end tests, tools, doc checks
}

// importExceptions are imports against the layers still to be removed,
// as "FROM -> TO". The test fails on one that is gone, so the list only
// shrinks.
var importExceptions = map[string]bool{}

// TestImportLayers fails on an import against layers.
func TestImportLayers(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not installed")
	}
	const module = "skiff.dev/skiff"
	out, err := exec.Command("go", "list", "-test", "-f", `{{.ImportPath}}{{range .Imports}}|{{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	rank := map[string]int{}
	for r, roots := range layers {
		for _, root := range roots {
			rank[root] = r
		}
	}
	// rel names a package by its path in the module; go list -test also
	// lists test variants ("P [P.test]"), external tests (P_test) and
	// test mains (P.test): each is held to P's place.
	rel := func(p string) (string, bool) {
		p, _, _ = strings.Cut(p, " [")
		p = strings.TrimSuffix(strings.TrimSuffix(p, ".test"), "_test")
		if p == module {
			return "", true
		}
		return strings.CutPrefix(p, module+"/")
	}
	root := func(p string) string { r, _, _ := strings.Cut(p, "/"); return r }
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Split(line, "|")
		from, ok := rel(fields[0])
		if !ok {
			continue
		}
		fr, known := rank[root(from)]
		if !known {
			t.Errorf("package %q: its top-level directory %q is in no layer (add it to layers)", from, root(from))
			continue
		}
		for _, imp := range fields[1:] {
			to, ok := rel(imp)
			if !ok || root(to) == root(from) {
				continue
			}
			tr, known := rank[root(to)]
			if known && tr < fr {
				continue
			}
			key := from + " -> " + to
			if importExceptions[key] {
				seen[key] = true
				continue
			}
			t.Errorf("%s imports %s: against the layers in repo_test.go (move what both need to a lower layer)", from, to)
		}
	}
	for key := range importExceptions {
		if !seen[key] {
			t.Errorf("import exception %q no longer occurs: remove it from importExceptions", key)
		}
	}
}

// maxCLIImports bounds the skiff packages cli imports: a thin CLI, as
// kind's and k3s's, parses flags and prints, and leaves the work to the
// package of its concept.
const maxCLIImports = 12

// TestCLIImports fails when package cli (its non-test files) imports more
// than maxCLIImports skiff packages.
func TestCLIImports(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not installed")
	}
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "./cli").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var skiff []string
	for _, imp := range strings.Fields(string(out)) {
		if strings.HasPrefix(imp, "skiff.dev/skiff/") {
			skiff = append(skiff, strings.TrimPrefix(imp, "skiff.dev/skiff/"))
		}
	}
	if len(skiff) > maxCLIImports {
		t.Errorf("cli imports %d skiff packages, at most %d allowed: %s\n"+
			"The CLI parses flags and prints: move the logic the new import serves into the package of its concept "+
			"(cluster for what up/server/agent run, client/kubectl for kubectl's client-side logic, api for shared names and formats) "+
			"and call it from there.", len(skiff), maxCLIImports, strings.Join(skiff, ", "))
	}
}
