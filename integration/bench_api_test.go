package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/membership"
)

// Measurements for docs/performance.md. They run only with SKIFF_BENCH=1
// (hack/bench.sh sets it) and print tables; they assert nothing beyond
// "it worked", since the numbers depend on the machine.

func requireBench(t *testing.T) {
	t.Helper()
	if os.Getenv("SKIFF_BENCH") != "1" {
		t.Skip("a measurement: set SKIFF_BENCH=1 (hack/bench.sh)")
	}
}

// percentile of sorted durations (nearest rank).
// benchClients create benchPerClient pods each in benchCreates.
const benchClients, benchPerClient = 50, 40

// benchCreates is the API create benchmark: benchClients clients, each
// with its own connection, create benchPerClient pods each in a row
// through cp's API. It returns the wall time and the sorted latencies.
func benchCreates(t *testing.T, cp *controlplane.ControlPlane) (time.Duration, []time.Duration) {
	t.Helper()
	return concurrently(t, benchClients, benchPerClient, func(worker int) (func(i int) error, error) {
		cc, err := client.New(cp.ClientConfig())
		if err != nil {
			return nil, err
		}
		return func(j int) error {
			_, err := cc.Create(context.Background(), benchPod("default", fmt.Sprintf("p-%d-%d", worker, j)))
			return err
		}, nil
	})
}

// concurrently runs workers goroutines, each doing perWorker operations in
// a row (the function setup returns for it; setup fails the worker), and
// returns the wall time of the whole and every operation's latency,
// sorted. It fails the test unless every operation succeeded.
func concurrently(t *testing.T, workers, perWorker int, setup func(worker int) (func(i int) error, error)) (time.Duration, []time.Duration) {
	t.Helper()
	lats := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			op, err := setup(w)
			if err != nil {
				t.Error(err)
				return
			}
			for i := range perWorker {
				t0 := time.Now()
				if err := op(i); err != nil {
					t.Error(err)
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(lats...)
	slices.Sort(all)
	if len(all) != workers*perWorker {
		t.Fatalf("%d operations succeeded; want %d", len(all), workers*perWorker)
	}
	return elapsed, all
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 2, 64)
}

func benchPod(ns, name string) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "bench"}}}
	p.Spec.Containers = []api.Container{{Name: "main", Image: "busybox:1.36", Command: []string{"sleep", "3600"}}}
	return p
}

// API: create-pod latency with 50 concurrent HTTP clients, and watch
// delivery latency to 100 watchers, against an in-process control plane
// (no scheduler, so only the API server and store are measured).
func TestBenchAPI(t *testing.T) {
	requireBench(t)
	cp, c := startControlPlane(t, func(cfg *controlplane.Config) { cfg.Scheduler = false })
	ctx := context.Background()
	const clients = benchClients
	elapsed, all := benchCreates(t, cp)

	// Watch delivery: 100 watchers on one namespace; one writer creates
	// ConfigMaps one at a time; latency = receipt - the write's return
	// (0 when the event beat the response).
	const watchers, writes = 100, 200
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	returned := make([]time.Time, writes)
	var retMu sync.Mutex
	got := make([][]time.Duration, watchers)
	var ready, done sync.WaitGroup
	for i := range watchers {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			cc, err := client.New(cp.ClientConfig())
			if err != nil {
				t.Error(err)
				ready.Done()
				return
			}
			w, err := cc.Watch(wctx, api.MustKindOf(&api.ConfigMap{}), "bench", api.ListOptions{})
			ready.Done()
			if err != nil {
				t.Error(err)
				return
			}
			defer w.Stop()
			for ev := range w.Events() {
				at := time.Now()
				var k int
				if _, err := fmt.Sscanf(ev.Object.GetObjectMeta().Name, "cm-%d", &k); err != nil {
					continue
				}
				retMu.Lock()
				ret := returned[k]
				retMu.Unlock()
				d := time.Duration(0)
				if !ret.IsZero() && at.After(ret) {
					d = at.Sub(ret)
				}
				got[i] = append(got[i], d)
				if len(got[i]) == writes {
					return
				}
			}
		}()
	}
	if _, err := c.Create(ctx, namespace("bench")); err != nil {
		t.Fatal(err)
	}
	ready.Wait()
	for k := range writes {
		if _, err := c.Create(ctx, &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("cm-%d", k), Namespace: "bench"}}); err != nil {
			t.Fatal(err)
		}
		retMu.Lock()
		returned[k] = time.Now()
		retMu.Unlock()
	}
	waitDone := make(chan struct{})
	go func() { done.Wait(); close(waitDone) }()
	select {
	case <-waitDone:
	case <-time.After(60 * time.Second):
		cancel()
		<-waitDone
	}
	deliveries := slices.Concat(got...)
	slices.Sort(deliveries)
	if len(deliveries) != watchers*writes {
		t.Errorf("%d deliveries; want %d", len(deliveries), watchers*writes)
	}

	fmt.Printf("\nAPI (in-process control plane over HTTP, loopback)\n")
	fmt.Printf("| measurement | n | p50 ms | p99 ms | max ms | throughput |\n|---|---|---|---|---|---|\n")
	fmt.Printf("| create pod, %d concurrent clients | %d | %s | %s | %s | %.0f creates/s |\n",
		clients, len(all), ms(percentile(all, .5)), ms(percentile(all, .99)), ms(all[len(all)-1]), float64(len(all))/elapsed.Seconds())
	if len(deliveries) > 0 {
		fmt.Printf("| watch delivery, %d watchers × %d writes | %d | %s | %s | %s | |\n",
			watchers, writes, len(deliveries), ms(percentile(deliveries, .5)), ms(percentile(deliveries, .99)), ms(deliveries[len(deliveries)-1]))
	}
}

// Gossip: 100 members in this process on loopback (Fast config): time
// until every member sees all 100 alive, and from a Kill until another
// member sees it dead.
func TestBenchGossip(t *testing.T) {
	requireBench(t)
	const n = 100
	ms_ := make([]*membership.Membership, 0, n)
	t.Cleanup(func() {
		for _, m := range ms_ {
			m.Stop()
		}
	})
	start := time.Now()
	var addrs []string
	for i := range n {
		cfg := membership.DefaultConfig(fmt.Sprintf("m-%03d", i), "bench-token")
		// memberlist's LAN profile, as real agents use (1 s probes): the
		// Fast profile's 50 ms gossip of 100 members saturates 2 cores.
		cfg.BindAddr, cfg.BindPort, cfg.Fast = "127.0.0.1", 0, os.Getenv("SKIFF_BENCH_GOSSIP_FAST") == "1"
		cfg.Meta = membership.Meta{Role: membership.RoleAgent, Node: cfg.Name}
		if i == 0 {
			cfg.Meta.Role = membership.RoleServer
		} else {
			// Through up to three earlier members, as agents joining
			// through different machines would: one seed's TCP
			// push-pull queue is not the thing measured.
			cfg.Join = []string{addrs[i/2], addrs[(i-1)/2], addrs[0]}
		}
		m, err := membership.Start(cfg)
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		addrs = append(addrs, m.LocalAddr())
		ms_ = append(ms_, m)
	}
	joined := time.Since(start)
	alive := func(m *membership.Membership) int {
		k := 0
		for _, mem := range m.Members() {
			if mem.State == membership.Alive || mem.State == membership.Suspect {
				k++
			}
		}
		return k
	}
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		for i, m := range ms_ {
			if a := alive(m); a != n {
				return false, fmt.Sprintf("member %d sees %d alive", i, a)
			}
		}
		return true, ""
	})
	full := time.Since(start)

	victim := ms_[n-1]
	killed := time.Now()
	victim.Kill()
	ms_ = ms_[:n-1]
	var seenDead time.Duration
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		for _, mem := range ms_[0].Members() {
			if mem.Name == fmt.Sprintf("m-%03d", n-1) {
				if mem.State == membership.Dead {
					seenDead = time.Since(killed)
					return true, ""
				}
				return false, "victim is " + string(mem.State)
			}
		}
		return false, "victim not listed"
	})
	profile := "LAN profile"
	if os.Getenv("SKIFF_BENCH_GOSSIP_FAST") == "1" {
		profile = "Fast profile"
	}
	fmt.Printf("\nGossip (%d memberlist members, one process, loopback, %s)\n", n, profile)
	fmt.Printf("| measurement | ms |\n|---|---|\n")
	fmt.Printf("| all %d started and joined (each through earlier members) | %d |\n", n, joined.Milliseconds())
	fmt.Printf("| every member sees all %d alive | %d |\n", n, full.Milliseconds())
	fmt.Printf("| Kill → seed member sees it dead | %d |\n", seenDead.Milliseconds())
}
