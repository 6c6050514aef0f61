// Package etcdtest starts embedded etcd members for tests: data in
// tb.TempDir(), client and peer URLs on free loopback ports, stopped by
// tb.Cleanup.
package etcdtest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"testing"

	"skiff.dev/skiff/controlplane/etcd"
)

// Start starts a cluster of one member named name.
func Start(tb testing.TB, name string) *etcd.Server {
	tb.Helper()
	return StartWith(tb, Config(tb, name))
}

// Config is a member named name with a data directory in tb.TempDir() and
// free loopback ports, for StartWith after changing what a test needs.
func Config(tb testing.TB, name string) etcd.Config {
	tb.Helper()
	return etcd.Config{
		Name:      name,
		DataDir:   filepath.Join(tb.TempDir(), name),
		ClientURL: "http://" + FreeAddr(tb),
		PeerURL:   "http://" + FreeAddr(tb),
		Log:       slog.New(slog.DiscardHandler),
	}
}

// StartWith starts the member c, stopped by tb.Cleanup.
func StartWith(tb testing.TB, c etcd.Config) *etcd.Server {
	tb.Helper()
	s, err := etcd.StartEmbedded(context.Background(), c)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// FreeAddr is "127.0.0.1:PORT" of a port free a moment ago.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(fmt.Errorf("find a free port: %w", err))
	}
	defer l.Close()
	return l.Addr().String()
}
