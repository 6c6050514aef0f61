// Command benchab runs skiff's benchmarks against two builds, A (a
// reference commit) and B (the working tree), back to back, alternating
// which goes first, over several rounds, and prints each figure with its
// min / median / max per build, the B/A ratio of the medians, and the
// min / median / max of each round's own B/A (results.go, byRound).
// hack/bench-ab.sh builds the two and calls it; docs/performance.md has
// the tables it printed.
//
// A build is a directory holding:
//
//	skiff            the binary (`skiff up` for the memory benchmark)
//	target           hack/benchab/target built from that tree (the API
//	                 server and the store writes, in process)
//	bench-scheduler  hack/bench-scheduler built from that tree
//	features         optional, one word a line: "dra" when the build has
//	                 the dra scheduler variant, "spread" when it has the
//	                 spread one, "secure" when it has RBAC, quota and Pod
//	                 Security admission and the CertificateSigningRequest
//	                 API (api-secure)
//
// Both builds carry the same harness source (bench-ab.sh copies it into
// the reference tree), and everything that makes load (API clients, the
// memory benchmark's Deployments) is this program, so both builds meet
// the same load. Nothing here asserts a time: it measures and prints.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// build is one side of the comparison.
type build struct {
	label    string // "A" or "B"
	name     string // what it is: a commit, "working tree"
	dir      string
	features map[string]bool
}

func (b build) bin(name string) string { return filepath.Join(b.dir, name) }

// command is exec.Command of the build's binary name, with the binary's
// pages dropped from the page cache first, so that both builds load theirs
// alike. How a file's pages came into the cache seems to decide how many
// the kernel maps at each fault (likely: a binary just written by the
// linker sits in large folios, one read back from disk in smaller ones;
// not checked further): the skiff binary built last showed 7-18 MiB more
// file pages in its RSS than the same code built earlier, which the
// memory benchmark's "file pages" reported as a difference between the
// builds. After a drop both binaries showed the same 59 MiB.
func (b build) command(name string, args ...string) *exec.Cmd {
	path := b.bin(name)
	if f, err := os.Open(path); err == nil {
		// A page still dirty is not dropped: write it first.
		if f.Sync() == nil {
			_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		}
		f.Close()
	}
	return exec.Command(path, args...)
}

// options are the sizes and switches of one invocation.
type options struct {
	rounds     int
	profileDir string
	// execTrace: the profiled runs also write a runtime execution trace
	// (the API benchmarks' server, the scheduler benchmarks).
	execTrace bool
	work      string // scratch directory

	apiClients, apiPerClient int
	storeWriters, storeN     int
	storeSingleN             int
	schedNodes, schedPods    int
	draNodes, draPods        int
	schedCreators            int
	memNodes, memDeploys     int
	memReplicas              int
	memSettle                time.Duration
	timeout                  time.Duration
}

// a bench runs once against one build and returns its figures.
type bench struct {
	name string
	run  func(o *options, b build, profile string) (figures, error)
	// needs is a feature the build must list (else the bench is n/a).
	needs string
	// vs is the benchmark whose A figures this one's B figures are also
	// compared with (api-secure against A's plain api: the goal
	// "with RBAC, quota and Pod Security on, still ≥ 1.0× the old build").
	vs string
}

// figures are one run's numbers by figure name.
type figures map[string]float64

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchab:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		aDir    = flag.String("a", "", "directory of build A (the reference)")
		bDir    = flag.String("b", "", "directory of build B (the working tree)")
		aName   = flag.String("a-name", "A", "what build A is (printed)")
		bName   = flag.String("b-name", "B", "what build B is (printed)")
		benches = flag.String("benches", strings.Join(benchNames(), ","), "benchmarks to run, comma-separated")
		smoke   = flag.Bool("smoke", false, "tiny sizes, one round: checks that the harness works, measures nothing")
		jsonOut = flag.String("json", "", "also write every run's figures here (JSON)")
		o       options
	)
	flag.IntVar(&o.rounds, "rounds", 3, "rounds (each runs every benchmark on A and on B, alternating which goes first)")
	flag.StringVar(&o.profileDir, "profile", "", "after the measured rounds, one more run of each benchmark per build with CPU, allocation, block and mutex profiles written here (the API and scheduler benchmarks also write allocs-start.pprof, the allocations before the load: go tool pprof -base it; the memory benchmark: heap and CPU, where the build serves pprof)")
	flag.BoolVar(&o.execTrace, "exec-trace", false, "with -profile: the API and scheduler benchmarks' profiled runs also write a runtime execution trace, PREFIXtrace.out (go tool trace)")
	flag.IntVar(&o.apiClients, "api-clients", 50, "API benchmark: concurrent clients, each its own connection")
	flag.IntVar(&o.apiPerClient, "api-per-client", 40, "API benchmark: pod creates per client")
	flag.IntVar(&o.storeWriters, "store-writers", 64, "store benchmark: concurrent writers")
	flag.IntVar(&o.storeN, "store-n", 3008, "store benchmark: ConfigMaps written by the concurrent writers")
	flag.IntVar(&o.storeSingleN, "store-single-n", 300, "store benchmark: ConfigMaps written by a single writer")
	flag.IntVar(&o.schedNodes, "sched-nodes", 5000, "scheduler benchmarks: simulated nodes")
	flag.IntVar(&o.schedPods, "sched-pods", 10000, "scheduler benchmarks: pods")
	flag.IntVar(&o.draNodes, "dra-nodes", 5000, "scheduler dra benchmark: simulated nodes, each with a ResourceSlice of 8 GPUs")
	flag.IntVar(&o.draPods, "dra-pods", 2000, "scheduler dra benchmark: pods, each with a claim for one GPU")
	flag.IntVar(&o.schedCreators, "sched-creators", 16, "scheduler benchmarks: concurrent pod creators (bench-scheduler's default)")
	flag.IntVar(&o.memNodes, "mem-nodes", 200, "memory benchmark: simulated nodes")
	flag.IntVar(&o.memDeploys, "mem-deployments", 200, "memory benchmark: Deployments")
	flag.IntVar(&o.memReplicas, "mem-replicas", 100, "memory benchmark: replicas of each Deployment")
	flag.DurationVar(&o.memSettle, "mem-settle", 10*time.Second, "memory benchmark: wait this long after every pod is ready before reading the plateau")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "give up on one run after this long")
	flag.Parse()
	if *aDir == "" || *bDir == "" {
		return fmt.Errorf("-a and -b are required")
	}
	if *smoke {
		o.rounds, o.apiClients, o.apiPerClient = 1, 4, 5
		o.storeWriters, o.storeN, o.storeSingleN = 4, 40, 5
		o.schedNodes, o.schedPods, o.draNodes, o.draPods = 20, 40, 10, 10
		o.memNodes, o.memDeploys, o.memReplicas, o.memSettle = 2, 2, 3, 500*time.Millisecond
		o.timeout = 2 * time.Minute
	}
	work, err := os.MkdirTemp("", "benchab-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	o.work = work

	builds := [2]build{{label: "A", name: *aName, dir: *aDir}, {label: "B", name: *bName, dir: *bDir}}
	for i := range builds {
		builds[i].features = readFeatures(builds[i].dir)
	}
	selected, err := selectBenches(*benches)
	if err != nil {
		return err
	}

	res := newResults()
	fmt.Printf("benchab: A = %s, B = %s; %d round(s); %d cores (GOMAXPROCS=%d); load average %s\n",
		*aName, *bName, o.rounds, runtime.NumCPU(), runtime.GOMAXPROCS(0), loadAvg())
	started := time.Now()
	for round := range o.rounds {
		for k, bn := range selected {
			order := [2]int{0, 1}
			if (round+k)%2 == 1 { // alternate who goes first, across rounds and benchmarks
				order = [2]int{1, 0}
			}
			for _, i := range order {
				b := builds[i]
				if bn.needs != "" && !b.features[bn.needs] {
					continue
				}
				t0 := time.Now()
				f, err := bn.run(&o, b, "")
				if err != nil {
					return fmt.Errorf("round %d, %s on %s (%s): %w", round+1, bn.name, b.label, b.name, err)
				}
				res.add(bn.name, b.label, round, f)
				line, _ := json.Marshal(f)
				fmt.Fprintf(os.Stderr, "round %d %-22s %s %5.1fs load %s %s\n", round+1, bn.name, b.label, time.Since(t0).Seconds(), loadAvg(), line)
			}
		}
	}
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return err
		}
		for _, bn := range selected {
			for i, b := range builds {
				if bn.needs != "" && !b.features[bn.needs] {
					continue
				}
				if i == 1 && b.dir == builds[0].dir {
					continue // A is B (-a and -b the same build): one profile is enough
				}
				prefix := filepath.Join(o.profileDir, bn.name+"-"+b.label+"-")
				t0 := time.Now()
				f, err := bn.run(&o, b, prefix)
				if err != nil {
					return fmt.Errorf("profiled run of %s on %s: %w", bn.name, b.label, err)
				}
				// Its figures are printed, never counted (profiling slows it).
				line, _ := json.Marshal(f)
				fmt.Fprintf(os.Stderr, "profiled %-22s %s %5.1fs load %s %s\n", bn.name, b.label, time.Since(t0).Seconds(), loadAvg(), line)
			}
		}
		fmt.Fprintf(os.Stderr, "profiles in %s (go tool pprof -top FILE)\n", o.profileDir)
	}
	fmt.Printf("took %s; load average after: %s\n\n", time.Since(started).Round(time.Second), loadAvg())
	res.print(os.Stdout, selected, builds)
	if *jsonOut != "" {
		data, err := json.MarshalIndent(res.runs, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(*jsonOut, data, 0o644)
	}
	return nil
}

// allBenches in the order they run.
func allBenches() []bench {
	return []bench{
		{name: "api", run: runAPI},
		{name: "api-secure", run: runAPISecure, needs: "secure", vs: "api"},
		{name: "store", run: runStore},
		{name: "sched-plain", run: schedVariant("plain")},
		{name: "sched-gpu", run: schedVariant("gpu")},
		{name: "sched-unschedulable", run: schedVariant("unschedulable")},
		{name: "sched-spread", run: schedVariant("spread"), needs: "spread"},
		{name: "sched-dra", run: schedVariant("dra"), needs: "dra"},
		{name: "memory", run: runMemory},
	}
}

func benchNames() []string {
	var names []string
	for _, b := range allBenches() {
		names = append(names, b.name)
	}
	return names
}

func selectBenches(list string) ([]bench, error) {
	byName := map[string]bench{}
	for _, b := range allBenches() {
		byName[b.name] = b
	}
	var out []bench
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if n == "sched" { // all its variants
			for _, b := range allBenches() {
				if strings.HasPrefix(b.name, "sched-") {
					out = append(out, b)
				}
			}
			continue
		}
		b, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("unknown benchmark %q: want %s (or sched for all its variants)", n, strings.Join(benchNames(), ", "))
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no benchmark selected")
	}
	return out, nil
}

func readFeatures(dir string) map[string]bool {
	f := map[string]bool{}
	data, err := os.ReadFile(filepath.Join(dir, "features"))
	if err != nil {
		return f
	}
	for _, w := range strings.Fields(string(data)) {
		f[w] = true
	}
	return f
}

// loadAvg is the 1, 5 and 15 minute load average ("?" off Linux).
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// jsonLine runs cmd and decodes the last line of its stdout that is a
// JSON object into v; stderr goes into the error when it fails.
func jsonLine(cmd *exec.Cmd, v any) error {
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", filepath.Base(cmd.Path), err, tailOf(stderr.String(), 2000))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "{") {
			return json.Unmarshal([]byte(lines[i]), v)
		}
	}
	return fmt.Errorf("%s printed no JSON line: %s", filepath.Base(cmd.Path), tailOf(string(out), 2000))
}

func tailOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
