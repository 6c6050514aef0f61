// Package outpair makes one writer safe to be a process's stdout and its
// stderr at once.
//
// A remote command's two output streams are copied by two goroutines (the
// runtime's FIFO readers on a node, client-go's stream copiers in the
// CLI). When the caller passes the same writer for both, as os/exec's Cmd
// allows, those goroutines write to it concurrently, and io.Copy goes
// through the writer's ReadFrom where it has one: bytes.Buffer's keeps
// the buffer's length across a blocking Read, so the stream that ends
// last cuts off what the other one wrote meanwhile. An exec probe's
// failure message, or `skiff exec` writing into one buffer, lost the
// command's whole output that way.
package outpair

import (
	"io"
	"sync"
)

// Pair returns stdout and stderr for two goroutines to copy into at once.
// When both are the same writer, the two returned writers share one mutex
// and offer Write only (no ReadFrom), as os/exec does for a Cmd whose
// Stdout and Stderr are equal; otherwise they come back unchanged.
func Pair(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	if stdout == nil || !same(stdout, stderr) {
		return stdout, stderr
	}
	w := &locked{w: stdout}
	return w, w
}

// same is stdout == stderr, false where the dynamic type is not
// comparable (the comparison would panic).
func same(a, b io.Writer) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}

// locked serializes writes to w.
type locked struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *locked) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
