package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/spf13/cobra"
)

// pprofFlags is `up`'s and `server`'s --pprof-listen: Go's net/http/pprof
// (heap, goroutine, CPU profiles of this process) on an address of its own,
// off by default. The profiles are not behind the cluster token, so only a
// loopback address is accepted: whoever can reach it is already on the
// machine. docs/performance.md ("Memory at scale") uses it:
//
//	go tool pprof -sample_index=inuse_space http://127.0.0.1:6060/debug/pprof/heap
type pprofFlags struct {
	listen string
}

// debugHandlers add what a build with a tag serves besides the profiles
// (pprof_heapdump.go, -tags heapdump); none in a release build.
var debugHandlers []func(*http.ServeMux)

func (f *pprofFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.listen, "pprof-listen", "", "serve Go's net/http/pprof (heap, CPU and goroutine profiles of this process) on this loopback address, e.g. 127.0.0.1:6060; off when empty")
}

// validate: empty, or host:port with a loopback host.
func (f *pprofFlags) validate() error {
	if f.listen == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(f.listen)
	if err != nil {
		return fmt.Errorf("--pprof-listen %q: %w", f.listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--pprof-listen %q: want a loopback address (127.0.0.1:PORT): profiles are not behind the cluster token", f.listen)
	}
	return nil
}

// start serves the profiles until ctx ends; a no-op when off.
func (f *pprofFlags) start(ctx context.Context, lg *slog.Logger) error {
	if f.listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("--pprof-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	for _, add := range debugHandlers {
		add(mux)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			lg.Warn("pprof server", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	lg.Info("pprof profiles served", "addr", ln.Addr().String())
	return nil
}
