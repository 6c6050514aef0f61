// Command heapdump reads a Go heap dump (runtime/debug.WriteHeapDump) and
// says, for each object size, how much is live and how many 8 KB pages
// those objects keep in use: where a heap's spans in use exceed its live
// data, the size classes whose survivors lie scattered among freed
// slots. docs/performance.md ("Fewer scattered survivors of a burst,
// nineteenth sitting") found its steps with it.
//
// A skiff built with -tags heapdump serves a dump on --pprof-listen (never
// a release build: a dump holds every byte of the heap, keys and tokens
// included):
//
//	go build -tags heapdump -o /tmp/hd/skiff .
//	/tmp/hd/skiff up --runtime fake --sim-nodes 200 --pprof-listen 127.0.0.1:6060 ...
//	curl -so /tmp/heap.dump http://127.0.0.1:6060/debug/heapdump
//	go run ./hack/heapdump -top 20 -samples 5 /tmp/heap.dump
package main

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
)

func main() {
	top := flag.Int("top", 20, "size classes to list, the most wasteful first")
	samples := flag.Int("samples", 0, "for each listed size of at most 64 bytes, this many of the most common contents of its objects without pointers (strings, mostly)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: heapdump [-top N] [-samples N] FILE")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "heapdump:", err)
		os.Exit(1)
	}
	defer f.Close()
	s := newSummary(*samples > 0)
	if err := readObjects(f, s.add); err != nil {
		fmt.Fprintln(os.Stderr, "heapdump:", err)
		os.Exit(1)
	}
	s.print(os.Stdout, *top, *samples)
}

// pageSize is the Go heap's page: a small object's span is one or more.
const pageSize = 8 << 10

// readObjects calls visit for each object record of a heap dump (its
// address, its contents, and whether it holds pointers), which the
// runtime writes after the dump's parameters, types and itabs and before
// anything else. contents is valid only during the call: the next record
// is read into it.
func readObjects(r io.Reader, visit func(addr uint64, contents []byte, pointers bool)) error {
	br := bufio.NewReaderSize(r, 1<<20)
	const header = "go1.7 heap dump\n"
	h := make([]byte, len(header))
	if _, err := io.ReadFull(br, h); err != nil || string(h) != header {
		return errors.New("not a Go heap dump (runtime/debug.WriteHeapDump)")
	}
	var err error
	uvarint := func() uint64 {
		if err != nil {
			return 0
		}
		var v uint64
		v, err = binary.ReadUvarint(br)
		return v
	}
	var buf []byte
	bytesField := func() []byte {
		n := uvarint()
		if err != nil {
			return nil
		}
		if n > 1<<30 {
			err = fmt.Errorf("a field of %d bytes", n)
			return nil
		}
		buf = slices.Grow(buf[:0], int(n))[:n]
		_, err = io.ReadFull(br, buf)
		return buf
	}
	// The record tags of runtime/heapdump.go.
	const (
		tagObject = 1
		tagType   = 3
		tagParams = 6
		tagItab   = 8
	)
	for {
		switch tag := uvarint(); tag {
		case tagParams: // big-endian, pointer size, heap start, heap end, GOARCH, version, CPUs
			uvarint()
			uvarint()
			uvarint()
			uvarint()
			bytesField()
			bytesField()
			uvarint()
		case tagType: // address, size, name, whether it is a pointer
			uvarint()
			uvarint()
			bytesField()
			uvarint()
		case tagItab: // address, type address
			uvarint()
			uvarint()
		case tagObject: // address, contents, pointer fields (kind, offset) up to kind 0
			addr := uvarint()
			contents := bytesField()
			pointers := false
			for err == nil {
				if uvarint() == 0 {
					break
				}
				uvarint()
				pointers = true
			}
			if err == nil {
				visit(addr, contents, pointers)
			}
		default: // goroutines and what follows: the objects are done
			if err != nil {
				return fmt.Errorf("reading the dump: %w", err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the dump: %w", err)
		}
	}
}

// sizeStats is what the dump holds of objects of one size.
type sizeStats struct {
	size, objects, withPointers int
	pages                       map[uint64]bool // the pageSize pages its objects start on
	contents                    map[string]int  // pointer-free contents of at most 64 bytes, when sampled
}

// waste is the bytes of the pages its objects keep in use beyond their
// own; large objects (a span each) waste nothing here.
func (s *sizeStats) waste() int {
	if s.size > 32<<10 {
		return 0
	}
	return len(s.pages)*pageSize - s.objects*s.size
}

type summary struct {
	sample bool
	bySize map[int]*sizeStats
}

func newSummary(sample bool) *summary { return &summary{sample: sample, bySize: map[int]*sizeStats{}} }

func (s *summary) add(addr uint64, contents []byte, pointers bool) {
	st := s.bySize[len(contents)]
	if st == nil {
		st = &sizeStats{size: len(contents), pages: map[uint64]bool{}, contents: map[string]int{}}
		s.bySize[len(contents)] = st
	}
	st.objects++
	if pointers {
		st.withPointers++
	}
	// An object may end on the next page; where it starts says which span.
	st.pages[addr/pageSize] = true
	if s.sample && !pointers && len(contents) <= 64 {
		st.contents[strings.TrimRight(string(contents), "\x00")]++
	}
}

func (s *summary) print(w io.Writer, top, samples int) {
	live, inUse := 0, 0
	for _, st := range s.bySize {
		live += st.objects * st.size
		inUse += st.objects*st.size + st.waste()
	}
	fmt.Fprintf(w, "live objects %.1f MB; with the free slots of the pages they keep in use, %.1f MB\n", float64(live)/1e6, float64(inUse)/1e6)
	all := slices.Collect(maps.Values(s.bySize))
	slices.SortFunc(all, func(a, b *sizeStats) int { return cmp.Compare(b.waste(), a.waste()) })
	fmt.Fprintf(w, "%8s %10s %10s %10s %8s %12s\n", "size", "objects", "live MB", "pages MB", "density", "w/ pointers")
	for _, st := range all[:min(top, len(all))] {
		pagesMB := float64(st.objects*st.size+st.waste()) / 1e6
		fmt.Fprintf(w, "%8d %10d %10.2f %10.2f %8.2f %12d\n", st.size, st.objects, float64(st.objects*st.size)/1e6, pagesMB, float64(st.objects*st.size)/1e6/pagesMB, st.withPointers)
		if samples > 0 && len(st.contents) > 0 {
			keys := slices.Collect(maps.Keys(st.contents))
			slices.SortFunc(keys, func(a, b string) int {
				return cmp.Or(cmp.Compare(st.contents[b], st.contents[a]), strings.Compare(a, b))
			})
			for _, k := range keys[:min(samples, len(keys))] {
				fmt.Fprintf(w, "%30d × %q\n", st.contents[k], k)
			}
		}
	}
}
