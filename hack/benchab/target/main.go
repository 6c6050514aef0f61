// Command target is the side of hack/bench-ab.sh that is built from each
// of the two trees it compares (hack/bench-ab.sh copies this directory
// into the other tree before building it), so it uses only what every
// compared build has: controlplane.Start, the bbolt store and client.Config.
// The load itself comes from hack/benchab, built once from the working
// tree, so both builds meet the very same load.
//
//	target serve -dir D [-scheduler]     a control plane (bbolt, fsync on,
//	                                     scheduler off unless asked) on a
//	                                     loopback port; prints its client
//	                                     config as one JSON line and runs
//	                                     until stdin closes
//	target store -dir D -writers N -n M  M ConfigMaps written straight into
//	                                     the store by N goroutines; prints
//	                                     one JSON line
//
// serve reads commands on stdin: "profile-start PREFIX [trace]" starts the
// CPU profile (and with trace an execution trace) and samples blocking and
// lock contention, "profile-stop" writes PREFIXcpu.pprof,
// PREFIXallocs.pprof, PREFIXblock.pprof, PREFIXmutex.pprof (and
// PREFIXtrace.out), "gc-count" answers the collections so far,
// "heap-allocs" the bytes allocated on the heap so far, and "live-heap"
// collects (the allocation profile is then up to date) and answers the
// live heap in bytes: "ok gc-count N", "ok heap-allocs N", "ok live-heap N".
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/controlplane/store"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: target serve|store [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "store":
		err = storeWrites(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q: want serve or store", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "target:", err)
		os.Exit(1)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	dir := fs.String("dir", "", "data directory (created)")
	sched := fs.Bool("scheduler", false, "run the scheduler (off: the API and store alone, as TestBenchAPI)")
	_ = fs.Parse(args)
	if *dir == "" {
		return fmt.Errorf("-dir is required")
	}
	cfg := controlplane.DefaultConfig(*dir)
	cfg.API.Listen = "127.0.0.1:0"
	cfg.Scheduler = *sched
	cp, err := controlplane.Start(context.Background(), cfg)
	if err != nil {
		return err
	}
	defer cp.Stop()
	line, err := json.Marshal(map[string]any{"config": cp.ClientConfig(), "pid": os.Getpid()})
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	var prof *profiler
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		switch cmd {
		case "profile-start":
			prefix, opt, _ := strings.Cut(arg, " ")
			if prof, err = startProfiles(prefix, opt == "trace"); err != nil {
				return err
			}
		case "profile-stop":
			if prof != nil {
				if err := prof.stop(); err != nil {
					return err
				}
				prof = nil
			}
		case "gc-count", "heap-allocs", "live-heap":
			name := "/gc/cycles/total:gc-cycles"
			switch cmd {
			case "heap-allocs":
				name = "/gc/heap/allocs:bytes"
			case "live-heap":
				runtime.GC()
				name = "/gc/heap/live:bytes"
			}
			n, err := readMetric(name)
			if err != nil {
				return err
			}
			cmd += fmt.Sprint(" ", n)
		}
		fmt.Println("ok " + cmd) // the driver waits for this
	}
	return nil
}

// storeWrites is TestBenchStores' "store writes": ConfigMaps with a
// 256-byte value created straight into a bbolt store.
func storeWrites(args []string) error {
	fs := flag.NewFlagSet("store", flag.ExitOnError)
	dir := fs.String("dir", "", "directory of state.db")
	writers := fs.Int("writers", 64, "concurrent writers")
	n := fs.Int("n", 3008, "ConfigMaps to create")
	profile := fs.String("profile", "", "write profiles of the writes to PREFIX{cpu,allocs,block,mutex}.pprof")
	_ = fs.Parse(args)
	st, err := store.Open(filepath.Join(*dir, "state.db"), store.DefaultOptions())
	if err != nil {
		return err
	}
	defer st.Close()
	var prof *profiler
	if *profile != "" {
		if prof, err = startProfiles(*profile, false); err != nil {
			return err
		}
	}
	ctx := context.Background()
	value := strings.Repeat("x", 256)
	lats := make([][]time.Duration, *writers)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for w := range *writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= *n {
					return
				}
				cm := &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("cm-%06d", i), Namespace: "default"},
					Data: map[string]string{"v": value}}
				t0 := time.Now()
				if _, err := st.Create(ctx, cm); err != nil {
					failed.Store(err)
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if prof != nil {
		if err := prof.stop(); err != nil {
			return err
		}
	}
	if err, ok := failed.Load().(error); ok {
		return err
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	return json.NewEncoder(os.Stdout).Encode(map[string]float64{
		"writes_per_s": float64(len(all)) / elapsed.Seconds(),
		"p50_ms":       msOf(percentile(all, .5)),
		"p99_ms":       msOf(percentile(all, .99)),
	})
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// readMetric is one of the runtime's uint64 metrics.
func readMetric(name string) (uint64, error) {
	m := []metrics.Sample{{Name: name}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindUint64 {
		return 0, fmt.Errorf("runtime metric %s: not a uint64 this Go has", name)
	}
	return m[0].Value.Uint64(), nil
}
