package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testwait"
)

// memBenchResult is TestBenchMemory's JSON line (docs/performance.md,
// "Memory at scale").
type memBenchResult struct {
	Nodes         int     `json:"nodes"`
	Pods          int     `json:"pods"`
	CreateSec     float64 `json:"create_s"`
	RunningSec    float64 `json:"running_s"`
	DeleteSec     float64 `json:"delete_s"`
	IdleRSSMiB    float64 `json:"idle_rss_mib"`    // nodes registered, no pods
	PlateauRSSMiB float64 `json:"plateau_rss_mib"` // every pod Running, settled
	PlateauHWMMiB float64 `json:"plateau_hwm_mib"` // VmHWM then: the peak of creating
	DeletePeakMiB float64 `json:"delete_peak_rss_mib"`
	AfterRSSMiB   float64 `json:"after_rss_mib"` // namespace gone, settled
	StoreMiB      float64 `json:"store_mib"`     // state.db's size at the plateau
	// Where the plateau's RSS is: anonymous memory (the Go heap and
	// runtime) and file pages (bbolt's mmap of state.db, the binary), and
	// the server's Go heap in use and its next GC goal (GOGC's headroom).
	PlateauAnonMiB float64 `json:"plateau_rss_anon_mib"`
	PlateauFileMiB float64 `json:"plateau_rss_file_mib"`
	HeapInuseMiB   float64 `json:"plateau_heap_inuse_mib"`
	NextGCMiB      float64 `json:"plateau_next_gc_mib"`
}

// TestBenchMemory measures the API server's memory at scale, as the
// server runs for a class: `skiff server --no-agent --sim-nodes 200` in its
// own process (so its RSS is the server's alone), 20,000 pods created over
// HTTP in one namespace, bound by the scheduler and Running on the
// simulated nodes; then the namespace is deleted (the namespace controller
// deletes every pod, the simulated nodes finish each deletion). It prints
// the server's VmRSS when idle, at the plateau and its peak while
// deleting (sampled every 100 ms). SKIFF_BENCH_MEM_PODS and
// SKIFF_BENCH_MEM_NODES change the size; SKIFF_BENCH_PROFILES=DIR saves
// heap profiles of the server (plateau.heap, deleting.heap) through its
// --pprof-listen. Opt-in: SKIFF_BENCH=1.
func TestBenchMemory(t *testing.T) {
	requireBench(t)
	pods, nodes := envInt(t, "SKIFF_BENCH_MEM_PODS", 20000), envInt(t, "SKIFF_BENCH_MEM_NODES", 200)
	profDir := os.Getenv("SKIFF_BENCH_PROFILES")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	bin := skiffBinary(t)
	dir := t.TempDir()
	apiAddr, pprofAddr := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "server", "--no-agent", "--no-gossip", "--data-dir", filepath.Join(dir, "data"),
		"--listen", apiAddr, "--pprof-listen", pprofAddr, "--sim-nodes", strconv.Itoa(nodes))
	cmd.Env = append(os.Environ(), "HOME="+dir) // the server writes $HOME/.skiff/kubeconfig
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			out, _ := os.ReadFile(logf.Name())
			t.Logf("server log (tail):\n%s", tail(string(out), 4000))
		}
	})
	pid := cmd.Process.Pid
	rss := func(field string) float64 { return procStatusMiB(pid, field) }

	// The server is up once it wrote the CLI config and answers.
	var c *client.Client
	testwait.For(t, 2*time.Minute, "the server to answer", func() bool {
		cfg, err := client.LoadKubeconfig(filepath.Join(dir, "data", "kubeconfig"))
		if err != nil {
			return false
		}
		if c, err = client.New(cfg); err != nil {
			return false
		}
		n, _, err := c.List(ctx, api.MustKindOf(&api.Node{}), "", api.ListOptions{})
		return err == nil && len(n) == nodes
	})
	cfg, err := client.LoadKubeconfig(filepath.Join(dir, "data", "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	res := memBenchResult{Nodes: nodes, Pods: pods, IdleRSSMiB: rss("VmRSS:")}

	// The harness follows the pods through an informer of its own (its
	// memory is this process's, not the server's).
	const ns = "bench-mem"
	if _, err := c.Create(ctx, namespace(ns)); err != nil {
		t.Fatal(err)
	}
	inf := client.NewInformer(c, api.MustKindOf(&api.Pod{}), ns, api.ListOptions{}, nil)
	infCtx, infCancel := context.WithCancel(ctx)
	var infDone sync.WaitGroup
	infDone.Go(func() { inf.Run(infCtx) })
	defer func() { infCancel(); infDone.Wait() }()
	if !inf.WaitForSync(ctx) {
		t.Fatal("informer never synced")
	}
	running := func() (n int) {
		for _, o := range inf.List() {
			if o.(*api.Pod).Status.Phase == api.PodRunning {
				n++
			}
		}
		return n
	}

	start := time.Now()
	const creators = 32
	var next atomic.Int64
	concurrently(t, creators, 1, func(int) (func(int) error, error) {
		cc, err := client.New(cfg)
		if err != nil {
			return nil, err
		}
		return func(int) error {
			for {
				i := int(next.Add(1)) - 1
				if i >= pods {
					return nil
				}
				if _, err := cc.Create(ctx, benchPod(ns, fmt.Sprintf("pod-%05d", i))); err != nil {
					return err
				}
			}
		}, nil
	})
	res.CreateSec = time.Since(start).Seconds()
	testwait.ForEvery(t, 500*time.Millisecond, 20*time.Minute, "every pod Running", func() bool { return running() == pods })
	res.RunningSec = time.Since(start).Seconds()
	// Settled: heartbeats and events go on, the bursts are over.
	time.Sleep(10 * time.Second) //nolint:forbidigo // a measurement's settle time, not synchronisation
	res.PlateauRSSMiB, res.PlateauHWMMiB = rss("VmRSS:"), rss("VmHWM:")
	res.PlateauAnonMiB, res.PlateauFileMiB = rss("RssAnon:"), rss("RssFile:")
	res.HeapInuseMiB, res.NextGCMiB = heapStat(t, pprofAddr, "HeapInuse"), heapStat(t, pprofAddr, "NextGC")
	if fi, err := os.Stat(filepath.Join(dir, "data", "state.db")); err == nil {
		res.StoreMiB = float64(fi.Size()) / (1 << 20)
	}
	saveHeap(t, pprofAddr, profDir, "plateau.heap")

	// Delete: sample RSS until the namespace is gone.
	start = time.Now()
	if err := c.Delete(ctx, api.MustKindOf(&api.Namespace{}), "", ns, api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var peak float64
	profiled := false
	testwait.ForEvery(t, 100*time.Millisecond, 20*time.Minute, "the namespace and its pods to be gone", func() bool {
		peak = max(peak, rss("VmRSS:"))
		if left := len(inf.List()); !profiled && left <= pods/2 {
			profiled = true
			saveHeap(t, pprofAddr, profDir, "deleting.heap")
		}
		_, err := c.Get(ctx, api.MustKindOf(&api.Namespace{}), "", ns)
		return api.IsNotFound(err) && len(inf.List()) == 0
	})
	res.DeleteSec = time.Since(start).Seconds()
	res.DeletePeakMiB = peak
	time.Sleep(10 * time.Second) //nolint:forbidigo // settle time of a measurement
	res.AfterRSSMiB = rss("VmRSS:")

	line, _ := json.Marshal(res)
	t.Logf("%s", line)
	t.Logf("plateau RSS: %.0f MiB anonymous, %.0f MiB file pages; Go heap in use %.0f MiB, next GC at %.0f MiB",
		res.PlateauAnonMiB, res.PlateauFileMiB, res.HeapInuseMiB, res.NextGCMiB)
	t.Logf("server RSS: idle %.0f MiB (%d nodes), %d pods Running %.0f MiB (creating peak %.0f MiB), deleting peak %.0f MiB, after %.0f MiB; created in %.1f s, Running after %.1f s, deleted in %.1f s; state.db %.0f MiB",
		res.IdleRSSMiB, nodes, pods, res.PlateauRSSMiB, res.PlateauHWMMiB, res.DeletePeakMiB, res.AfterRSSMiB, res.CreateSec, res.RunningSec, res.DeleteSec, res.StoreMiB)
}

// envInt reads a positive integer from the environment, or def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// freeAddr returns a loopback address with a port free just now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// procStatusMiB reads a kB field of /proc/PID/status, in MiB (0 when absent).
func procStatusMiB(pid int, field string) float64 {
	st, err := readProcStatus(pid)
	if err != nil {
		return 0
	}
	return float64(st[field]) / 1024
}

// saveHeap fetches the server's heap profile into dir/name (nothing when
// dir is empty).
func saveHeap(t *testing.T, addr, dir, name string) {
	t.Helper()
	if dir == "" {
		return
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap")
	if err != nil {
		t.Errorf("heap profile: %v", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Errorf("heap profile: %v", err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		t.Errorf("heap profile: %v", err)
	}
}

// heapStat reads one runtime.MemStats field (bytes) from the server's
// heap profile in text form ("# HeapInuse = 123"), in MiB; 0 when absent.
func heapStat(t *testing.T, addr, field string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Errorf("heap stats: %v", err)
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# "+field+" = "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n / (1 << 20)
		}
	}
	return 0
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
