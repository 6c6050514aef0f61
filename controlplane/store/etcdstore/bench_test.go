package etcdstore_test

import (
	"testing"

	"skiff.dev/skiff/controlplane/etcd/etcdtest"
	"skiff.dev/skiff/controlplane/store/etcdstore"
	st "skiff.dev/skiff/controlplane/store/storetest"
)

// The bbolt store's benchmarks of the same names (package store) create
// the same pods; compare objects/s. One embedded member, fsync on (etcd
// fsyncs its write-ahead log per Raft batch), over loopback gRPC.

// BenchmarkCreateSingleWriter: one goroutine, one transaction at a time.
func BenchmarkCreateSingleWriter(b *testing.B) {
	s := newStore(b, etcdtest.Start(b, "bench").Client(), etcdstore.Options{Prefix: "/bench/"})
	st.BenchCreate(b, s, 1)
}

// BenchmarkCreate64Writers: 64 goroutines; etcd batches their proposals.
func BenchmarkCreate64Writers(b *testing.B) {
	s := newStore(b, etcdtest.Start(b, "bench").Client(), etcdstore.Options{Prefix: "/bench/"})
	st.BenchCreate(b, s, 64)
}
