package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkLayout is bbolt alone, in the two layouts a store can give it:
// what the store's write path would gain from keying objects by revision,
// as etcd does, instead of by "namespace/name" (doc.go). Nothing in the
// store uses the revision layout; this measures whether it is worth a new
// store format (docs/performance.md, "The store's layout, twenty-eighth
// sitting").
//
// The workload is the API benchmark's: 50 clients create 200 pods each,
// 25 creates to a transaction (what the group commit batches at that
// load), every value a stored pod's (benchPodJSON, packed as the
// committer packs it). "updates" then writes each of the 10,000 pods once
// more in a random order, as binds do. bbolt reads a page into a node,
// every key of it, before it changes the page: keys scattered over the
// tree (names) touch a branch and a leaf apiece, keys in revision order
// touch the tree's right edge alone. By revision, an update must also
// remove the old revision: at once (rev-delete), or later in revision
// order, 1,000 to a transaction (rev-compact, etcd's compaction; its time
// is reported apart, compact-ns/write). A create removes nothing: its
// revision layout is "rev". The in-memory index that a
// revision layout needs (name to revision) is a map here.
//
// No fsync (the CPU and the allocations): `go test ./controlplane/store
// -run X -bench Layout -benchtime 3x`.
func BenchmarkLayout(b *testing.B) {
	const clients, perClient, batch = 50, 200, 25
	var names []string
	for j := range perClient {
		for w := range clients {
			names = append(names, fmt.Sprintf("default/p-%d-%d", w, j))
		}
	}
	values := make([][]byte, len(names))
	var packer valuePacker
	for i, n := range names {
		p := benchPod()
		p.Name = n
		raw, err := json.Marshal(p)
		if err != nil {
			b.Fatal(err)
		}
		stored, _ := packer.pack(raw)
		values[i] = stored
	}
	order := rand.New(rand.NewPCG(1, 2)).Perm(len(names))
	revKey := func(rev uint64) []byte { return binary.BigEndian.AppendUint64(nil, rev) }

	// write runs the writes of one phase (indices into names), batch to a
	// transaction; byRev maps each name to its revision.
	write := func(db *bolt.DB, idx []int, layout string, rev *uint64, byRev map[string]uint64, old *[]uint64) {
		for i := 0; i < len(idx); i += batch {
			err := db.Update(func(tx *bolt.Tx) error {
				bk, err := tx.CreateBucketIfNotExists([]byte("pods"))
				if err != nil {
					return err
				}
				for _, k := range idx[i:min(i+batch, len(idx))] {
					*rev++
					n, v := names[k], values[k]
					if layout == "name" {
						if err := bk.Put([]byte(n), v); err != nil {
							return err
						}
						continue
					}
					if prev, ok := byRev[n]; ok {
						if layout == "rev-delete" {
							if err := bk.Delete(revKey(prev)); err != nil {
								return err
							}
						} else {
							*old = append(*old, prev)
						}
					}
					byRev[n] = *rev
					if err := bk.Put(revKey(*rev), v); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	all := make([]int, len(names))
	for i := range all {
		all[i] = i
	}
	for _, phase := range []string{"creates", "updates"} {
		layouts := []string{"name", "rev-delete", "rev-compact"}
		if phase == "creates" {
			layouts = []string{"name", "rev"} // a create removes nothing
		}
		for _, layout := range layouts {
			b.Run(phase+"/"+layout, func(b *testing.B) {
				var ms0, ms1 runtime.MemStats
				var allocated uint64
				var compact time.Duration
				for b.Loop() {
					b.StopTimer()
					db, err := bolt.Open(filepath.Join(b.TempDir(), "db"), 0o600, &bolt.Options{
						NoSync: true, InitialMmapSize: 1 << 30, FreelistType: bolt.FreelistMapType, NoFreelistSync: true})
					if err != nil {
						b.Fatal(err)
					}
					var rev uint64
					byRev := map[string]uint64{}
					var old []uint64
					if phase == "updates" {
						write(db, all, layout, &rev, byRev, &old)
					}
					runtime.ReadMemStats(&ms0)
					b.StartTimer()
					if phase == "creates" {
						write(db, all, layout, &rev, byRev, &old)
					} else {
						write(db, order, layout, &rev, byRev, &old)
					}
					b.StopTimer()
					runtime.ReadMemStats(&ms1)
					allocated += ms1.TotalAlloc - ms0.TotalAlloc
					if len(old) > 0 {
						start := time.Now()
						slices.Sort(old)
						for i := 0; i < len(old); i += 1000 {
							err := db.Update(func(tx *bolt.Tx) error {
								bk := tx.Bucket([]byte("pods"))
								for _, r := range old[i:min(i+1000, len(old))] {
									if err := bk.Delete(revKey(r)); err != nil {
										return err
									}
								}
								return nil
							})
							if err != nil {
								b.Fatal(err)
							}
						}
						compact += time.Since(start)
					}
					if err := db.Close(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				writes := float64(b.N * len(names))
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/writes, "ns/write")
				b.ReportMetric(float64(allocated)/writes, "B/write")
				if compact > 0 {
					b.ReportMetric(float64(compact.Nanoseconds())/writes, "compact-ns/write")
				}
			})
		}
	}
}
