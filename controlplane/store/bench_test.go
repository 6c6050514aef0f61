package store_test

import (
	"os"
	"testing"

	"skiff.dev/skiff/controlplane/store"
	st "skiff.dev/skiff/controlplane/store/storetest"
)

// benchOptions fsync every commit, the number that matters; set
// BENCH_NOSYNC=1 to see what the CPU alone allows.
func benchOptions() store.Options {
	o := store.DefaultOptions()
	o.HistorySize = 1000
	if os.Getenv("BENCH_NOSYNC") != "" {
		o.NoSync = true
	}
	return o
}

func reportCommits(b *testing.B, s *store.Bolt) {
	if stats := s.Stats(); stats.Commits > 0 {
		b.ReportMetric(float64(stats.Writes)/float64(stats.Commits), "writes/commit")
	}
}

// BenchmarkCreateSingleWriter: one goroutine, each create its own fsynced
// commit. Bounded by the disk's fsync latency (bbolt: about 1,000 tx/s).
// etcdstore has the same benchmark on an embedded etcd member.
func BenchmarkCreateSingleWriter(b *testing.B) {
	s, _ := openStore(b, benchOptions())
	st.BenchCreate(b, s, 1)
	reportCommits(b, s)
}

// BenchmarkCreate64Writers: 64 goroutines create pods; group commit shares
// each fsync among the writes queued meanwhile. Goal: >= 10,000 objects/s.
func BenchmarkCreate64Writers(b *testing.B) {
	s, _ := openStore(b, benchOptions())
	st.BenchCreate(b, s, 64)
	reportCommits(b, s)
}
