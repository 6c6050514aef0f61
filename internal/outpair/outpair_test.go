package outpair

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
)

// TestOneBufferForBothStreams copies two streams into one bytes.Buffer as
// a runtime does: stderr's copier is already blocked reading when stdout's
// output arrives, and stderr ends after it. Both outputs must be there.
func TestOneBufferForBothStreams(t *testing.T) {
	var buf bytes.Buffer
	stdout, stderr := Pair(&buf, &buf)
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	var wg sync.WaitGroup
	for _, c := range []struct {
		dst io.Writer
		src io.Reader
	}{{stdout, outR}, {stderr, errR}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := io.Copy(c.dst, c.src); err != nil {
				t.Error(err)
			}
		}()
	}
	// stderr's copier waits in Read (in bytes.Buffer's ReadFrom, without
	// Pair) while stdout's output is copied.
	if _, err := outW.Write([]byte("out\n")); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	if _, err := errW.Write([]byte("err\n")); err != nil {
		t.Fatal(err)
	}
	errW.Close()
	wg.Wait()
	if got := buf.String(); got != "out\nerr\n" && got != "err\nout\n" {
		t.Errorf("one buffer for stdout and stderr holds %q, want both lines", got)
	}
}

func TestPairKeepsDistinctWriters(t *testing.T) {
	var a, b bytes.Buffer
	if o, e := Pair(&a, &b); o != &a || e != &b {
		t.Errorf("Pair(a, b) = %T, %T; want a and b unchanged", o, e)
	}
	if o, e := Pair(nil, &b); o != nil || e != &b {
		t.Errorf("Pair(nil, b) = %v, %v; want nil and b", o, e)
	}
	// A writer of an uncomparable type is not taken for the other.
	f := funcWriter(func(p []byte) (int, error) { return len(p), nil })
	if o, e := Pair(f, f); o == nil || e == nil {
		t.Error("Pair of an uncomparable writer lost a stream")
	}
	var sb strings.Builder
	o, e := Pair(&sb, &sb)
	if o != e {
		t.Fatal("Pair(w, w) returned two writers; want one serialized writer for both")
	}
	if _, ok := o.(io.ReaderFrom); ok {
		t.Error("Pair(w, w)'s writer offers ReadFrom; io.Copy would bypass its lock")
	}
}

type funcWriter func([]byte) (int, error)

func (f funcWriter) Write(p []byte) (int, error) { return f(p) }
