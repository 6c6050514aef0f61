//go:build heapdump

package cli

import (
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
)

// Built with -tags heapdump (never a release: a dump holds every byte of
// the heap, the cluster's keys and tokens included), --pprof-listen also
// serves /debug/heapdump: a collection, then runtime/debug.WriteHeapDump
// of the live heap, for hack/heapdump to read.
func init() {
	debugHandlers = append(debugHandlers, func(mux *http.ServeMux) {
		mux.HandleFunc("/debug/heapdump", serveHeapDump)
	})
}

func serveHeapDump(w http.ResponseWriter, _ *http.Request) {
	f, err := os.CreateTemp("", "skiff-heapdump-")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer os.Remove(f.Name())
	defer f.Close()
	runtime.GC()
	debug.WriteHeapDump(f.Fd())
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = io.Copy(w, f)
}
