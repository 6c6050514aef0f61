package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/controlplane/etcd"
	"skiff.dev/skiff/controlplane/etcd/etcdtest"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/controlplane/store/etcdstore"
)

// Stores: the same two measurements on bbolt and on embedded etcd with one
// and three members (all on this machine, loopback, fsync on), in one run
// so that the machine's load is the same for all three:
//   - store writes/s: 64 goroutines create ConfigMaps straight into the
//     store (store.Store.Create), 3,000 in all;
//   - API create: 50 HTTP clients × 40 pod creates against a control
//     plane on that store (scheduler off), as TestBenchAPI.
//
// The etcd control planes reach their members as an external etcd
// (EtcdConfig.Endpoints), so the members are the same for both parts.
func TestBenchStores(t *testing.T) {
	requireBench(t)
	var rows []string
	for _, members := range []int{0, 1, 3} {
		name := "bbolt"
		var endpoints []string
		if members > 0 {
			name = fmt.Sprintf("embedded etcd, %d member", members)
			if members > 1 {
				name += "s"
			}
			endpoints = startEtcdMembers(t, members)
		}
		ws, wlat, n := benchStoreWrites(t, endpoints)
		cs, clat := benchAPICreates(t, endpoints)
		rows = append(rows, fmt.Sprintf("| %s | %d | %.0f | %s | %d | %s | %s | %s | %.0f |",
			name, n, ws, ms(percentile(wlat, .99)), len(clat), ms(percentile(clat, .5)), ms(percentile(clat, .99)), ms(clat[len(clat)-1]), cs))
	}
	fmt.Printf("\nStores (same run; loopback; fsync on)\n")
	fmt.Printf("| store | store writes | writes/s (64 writers) | write p99 ms | API creates | p50 ms | p99 ms | max ms | creates/s |\n|---|---|---|---|---|---|---|---|---|\n")
	fmt.Println(strings.Join(rows, "\n"))
}

// startEtcdMembers starts a cluster of n embedded members on loopback and
// returns their client URLs.
func startEtcdMembers(t *testing.T, n int) []string {
	t.Helper()
	cfgs := make([]etcd.Config, n)
	var initial []string
	for i := range cfgs {
		cfgs[i] = etcdtest.Config(t, fmt.Sprintf("m%d", i))
		cfgs[i].Log = nil
		initial = append(initial, cfgs[i].Name+"="+cfgs[i].PeerURL)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	servers := make([]*etcd.Server, n)
	for i := range cfgs {
		cfgs[i].InitialCluster = strings.Join(initial, ",")
		wg.Add(1)
		go func() { // a new cluster starts when a majority of it is up
			defer wg.Done()
			servers[i], errs[i] = etcd.StartEmbedded(context.Background(), cfgs[i])
		}()
	}
	wg.Wait()
	var urls []string
	for i, s := range servers {
		if s != nil {
			t.Cleanup(s.Stop)
		}
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		urls = append(urls, cfgs[i].ClientURL)
	}
	return urls
}

// benchStoreWrites creates ConfigMaps with 64 writers straight into a
// store: bbolt (endpoints nil) or etcd.
func benchStoreWrites(t *testing.T, endpoints []string) (perSec float64, lat []time.Duration, n int) {
	t.Helper()
	ctx := context.Background()
	var st store.Store
	if endpoints == nil {
		b, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		st = b
	} else {
		cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		s, err := etcdstore.New(ctx, cli, etcdstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		st = s
	}
	defer st.Close()
	const writers, perWriter = 64, 47 // 3,008 writes
	elapsed, all := concurrently(t, writers, perWriter, func(w int) (func(i int) error, error) {
		return func(j int) error {
			cm := &api.ConfigMap{ObjectMeta: api.ObjectMeta{Namespace: "bench-store", Name: fmt.Sprintf("cm-%d-%d", w, j)},
				Data: map[string]string{"k": strings.Repeat("v", 256)}}
			_, err := st.Create(ctx, cm)
			return err
		}, nil
	})
	return float64(len(all)) / elapsed.Seconds(), all, len(all)
}

// benchAPICreates runs TestBenchAPI's create part against a control plane
// on bbolt (endpoints nil) or on the etcd at endpoints.
func benchAPICreates(t *testing.T, endpoints []string) (perSec float64, lat []time.Duration) {
	t.Helper()
	cp, _ := startControlPlane(t, func(cfg *controlplane.Config) {
		cfg.Scheduler = false
		if endpoints != nil {
			ec := controlplane.DefaultEtcdConfig()
			ec.Endpoints = endpoints
			cfg.Etcd = ec
		}
	})
	elapsed, all := benchCreates(t, cp)
	return float64(len(all)) / elapsed.Seconds(), all
}
