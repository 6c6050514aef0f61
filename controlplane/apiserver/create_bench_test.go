package apiserver

import (
	"bytes"
	"fmt"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCreatePod: the server's whole create of a pod, as the API
// benchmark sends it (hack/benchab: the admin's token, namespace default,
// the same JSON), through the server's handler but without a network or
// TLS: authentication, decoding, admission, validation, the store's write
// (bbolt, no fsync) and the response. Parallel, so that the store's
// writes commit in batches as they do under load. Its ns/op and allocs/op
// are what the API's creates/s rests on, less noisy than the end-to-end run.
func BenchmarkCreatePod(b *testing.B) {
	e := newEnv(b)
	h := e.srv.Handler()
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(25) // 50 writers on 2 cores, as hack/benchab's API benchmark
	cpu0 := processCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			name := fmt.Sprintf("p-%d", n.Add(1))
			body := fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":"default","labels":{"app":"bench"}},`+
				`"spec":{"containers":[{"name":"main","image":"busybox:1.36","command":["sleep","3600"]}]}}`, name)
			req, err := http.NewRequest(http.MethodPost, "/api/v1/namespaces/default/pods", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			req.RequestURI, req.RemoteAddr = req.URL.RequestURI(), "127.0.0.1:1"
			req.Header.Set("Authorization", "Bearer "+testToken)
			req.Header.Set("Content-Type", "application/json")
			w := &countingWriter{header: http.Header{}}
			h.ServeHTTP(w, req)
			if w.code != http.StatusCreated || w.n == 0 {
				b.Fatalf("create %s: %d, %d bytes", name, w.code, w.n)
			}
		}
	})
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time the process has used (user and system): on a
// shared machine a steadier measure of a handler's cost than the wall
// time, which other processes' load stretches.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countingWriter is a ResponseWriter that keeps the status and counts the
// body's bytes: what a benchmark of the handler needs of a response.
type countingWriter struct {
	header http.Header
	code   int
	n      int
}

func (w *countingWriter) Header() http.Header { return w.header }

func (w *countingWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(p)
	return len(p), nil
}
