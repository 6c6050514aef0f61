package integration

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/apiserver"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/pki/pkitest"
)

// API over TLS: create-pod latency with 50 concurrent clients (each its
// own connection, so its own TLS handshake) over HTTPS, as every client
// talks now, beside plain HTTP to the very same handler and store
// (httptest), in one run: the price of TLS alone. Rounds alternate so
// that neither side always meets the fuller store.
func TestBenchAPITLS(t *testing.T) {
	requireBench(t)
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := apiserver.NewRegistry(st, logger)
	ca := pkitest.CA(t)
	cfg := apiserver.DefaultConfig()
	cfg.Token, cfg.Listen, cfg.TLS = "bench-token", "127.0.0.1:0", pkitest.ServerTLS(t, ca)
	srv, err := apiserver.New(cfg, reg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	plain := httptest.NewServer(srv.Handler())
	t.Cleanup(plain.Close)

	sides := []struct {
		name string
		cc   client.Config
	}{
		{"https (TLS 1.3, cluster CA)", client.Config{Server: "https://" + srv.Addr(), Token: cfg.Token, CAData: ca.CertPEM()}},
		{"plain http, same handler", client.Config{Server: plain.URL, Token: cfg.Token}},
	}
	const rounds = 3
	var all [2][]time.Duration
	var wall [2]time.Duration
	for round := range rounds {
		for k := range sides {
			i := (k + round) % 2 // alternate who goes first
			elapsed, lats := concurrently(t, benchClients, benchPerClient, func(worker int) (func(j int) error, error) {
				c, err := client.New(sides[i].cc)
				if err != nil {
					return nil, err
				}
				return func(j int) error {
					_, err := c.Create(ctx, benchPod("default", fmt.Sprintf("r%d-s%d-%d-%d", round, i, worker, j)))
					return err
				}, nil
			})
			all[i] = append(all[i], lats...)
			wall[i] += elapsed
		}
	}
	fmt.Printf("| API create, %d clients x %d pods x %d rounds | n | p50 ms | p99 ms | max ms | creates/s |\n|---|---|---|---|---|---|\n", benchClients, benchPerClient, rounds)
	for i, s := range sides {
		l := all[i]
		slices.Sort(l)
		fmt.Printf("| %s | %d | %s | %s | %s | %.0f |\n", s.name, len(l), ms(percentile(l, .5)), ms(percentile(l, .99)), ms(l[len(l)-1]), float64(len(l))/wall[i].Seconds())
	}
}
