package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"

	"skiff.dev/skiff/api"
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

// BenchmarkGuaranteedUpdateBind: a scheduler's bind, 64 at a time: read a
// pod, set its node, write it back (GuaranteedUpdate). With BENCH_NOSYNC=1
// it is the CPU and allocations of the read-modify-write alone.
func BenchmarkGuaranteedUpdateBind(b *testing.B) {
	s, _ := openStore(b, benchOptions())
	ctx := context.Background()
	const pods = 64
	for i := range pods {
		st.MustCreate(b, s, benchPod(b, fmt.Sprintf("p-%d", i)))
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(pods / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if _, err := s.GuaranteedUpdate(ctx, st.PodKind, "default", fmt.Sprintf("p-%d", i%pods), func(cur api.Object) (api.Object, error) {
				cur.(*api.Pod).Spec.NodeName = fmt.Sprintf("node-%d", i)
				return cur, nil
			}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportCommits(b, s)
}

// BenchmarkGetNamespace: what every create reads first (its namespace;
// for a pod its ServiceAccount too), here a namespace with labels and the
// managedFields of a real apply.
func BenchmarkGetNamespace(b *testing.B) {
	s, _ := openStore(b, benchOptions())
	ctx := context.Background()
	ns := &api.Namespace{ObjectMeta: api.ObjectMeta{
		Name:   "student-07",
		Labels: map[string]string{"kubernetes.io/metadata.name": "student-07", "pod-security.kubernetes.io/enforce": "baseline", "skiff.dev/room": "lab-2"},
		ManagedFields: []api.ManagedFieldsEntry{{
			Manager: "kubectl-client-side-apply", Operation: "Update", APIVersion: "v1", FieldsType: "FieldsV1",
			FieldsV1: []byte(`{"f:metadata":{"f:labels":{".":{},"f:kubernetes.io/metadata.name":{},"f:pod-security.kubernetes.io/enforce":{},"f:skiff.dev/room":{}}}}`),
		}},
	}}
	st.MustCreate(b, s, ns)
	kind := api.MustKindOf(ns)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Get(ctx, kind, "", "student-07"); err != nil {
			b.Fatal(err)
		}
	}
}

// benchPod is a Deployment's pod as the API server stores it: labels, an
// owner, managedFields, resources, the defaults.
func benchPod(tb testing.TB, name string) *api.Pod {
	var p api.Pod
	if err := json.Unmarshal(store.BenchPodJSON, &p); err != nil {
		tb.Fatal(err)
	}
	p.Name = name
	return &p
}
