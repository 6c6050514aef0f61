package main

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// A dump of this very process holds the objects it keeps alive: 2,000
// blocks of 1,000 bytes (Go's 1,024-byte size class) and 3,000 strings of
// 12 bytes (16-byte blocks), counted with their size and their pages, and
// read with their contents; a file that is not a dump is refused.
func TestReadObjects(t *testing.T) {
	blocks := make([]*[1000]byte, 2000)
	for i := range blocks {
		blocks[i] = new([1000]byte)
		blocks[i][0] = 'b'
	}
	strs := make([]string, 3000)
	for i := range strs {
		strs[i] = strings.Clone("kept-string!")
	}
	path := filepath.Join(t.TempDir(), "heap.dump")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	debug.WriteHeapDump(f.Fd())
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(blocks)
	runtime.KeepAlive(strs)

	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	s := newSummary(true)
	kept := 0 // 16-byte objects that hold the string (where in the block, and with what around it, is the allocator's)
	if err := readObjects(in, func(addr uint64, contents []byte, pointers bool) {
		s.add(addr, contents, pointers)
		if len(contents) == 16 && strings.Contains(string(contents), "kept-string!") {
			kept++
		}
	}); err != nil {
		t.Fatal(err)
	}
	big := s.bySize[1024]
	if big == nil || big.objects < len(blocks) || len(big.pages) < len(blocks)/8 {
		t.Fatalf("1,024-byte objects: %+v; want at least %d on at least %d pages", big, len(blocks), len(blocks)/8)
	}
	if big.waste() < 0 {
		t.Fatalf("1,024-byte objects waste %d bytes: fewer pages than they fill", big.waste())
	}
	if kept < len(strs) {
		t.Fatalf("16-byte objects: %d holding the kept string, want at least %d", kept, len(strs))
	}
	if small := s.bySize[16]; small == nil || small.objects < kept || len(small.contents) == 0 {
		t.Fatalf("16-byte objects: %+v; want at least %d, their contents sampled", small, kept)
	}
	var out strings.Builder
	s.print(&out, 5, 1)
	if !strings.HasPrefix(out.String(), "live objects ") || strings.Count(out.String(), "\n") < 3 {
		t.Fatalf("the summary printed:\n%s", out.String())
	}

	if err := readObjects(strings.NewReader("go1.7 heap dum"), s.add); err == nil {
		t.Fatal("a truncated header read as a dump")
	}
}
