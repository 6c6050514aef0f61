package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// serverConfig is how to reach a server: the fields of client.Config
// that every build has (older builds have no CAData and speak plain HTTP;
// encoding/json matches the names case-insensitively, so both a build's
// JSON of client.Config and an old YAML config decode into it).
type serverConfig struct {
	Server string `json:"server"`
	Token  string `json:"token"`
	CAData []byte `json:"caData"`
	// certData and keyData are a client certificate and its key, PEM (a
	// student's, api-secure): set here, never read from the target.
	certData, keyData []byte
}

// httpClient returns a client with a connection of its own (its own TLS
// handshake, then keep-alive), as each of TestBenchAPI's clients has.
func (c serverConfig) httpClient() (*http.Client, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute, ForceAttemptHTTP2: false,
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
	if len(c.CAData) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(c.CAData) {
			return nil, errors.New("server config: caData holds no PEM certificate")
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	if len(c.certData) > 0 {
		cert, err := tls.X509KeyPair(c.certData, c.keyData)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Transport: tr, Timeout: time.Minute}, nil
}

func (c serverConfig) url(path string) string {
	s := strings.TrimSuffix(c.Server, "/")
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	return s + path
}

// do sends one request with the bearer token; a status other than those
// in want is an error carrying the answer.
func (c serverConfig) do(hc *http.Client, method, path string, body []byte, want ...int) ([]byte, error) {
	req, err := http.NewRequest(method, c.url(path), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(want, resp.StatusCode) {
		return nil, fmt.Errorf("%s %s: %d: %s", method, path, resp.StatusCode, tailOf(string(data), 300))
	}
	return data, nil
}

// podJSON is TestBenchAPI's benchPod.
func podJSON(ns, name string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q,"labels":{"app":"bench"}},`+
		`"spec":{"containers":[{"name":"main","image":"busybox:1.36","command":["sleep","3600"]}]}}`, name, ns)
}

// target is a running `target serve`.
type target struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Scanner
	cfg    serverConfig
	stderr *lockedBuffer
}

// lockedBuffer is the target's stderr: written by exec's copier, read
// when a run fails (a handler's panic shows there, the client sees EOF).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startTarget(b build, dir string, args ...string) (*target, error) {
	cmd := b.command("target", append([]string{"serve", "-dir", dir}, args...)...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	t := &target{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout), stderr: stderr}
	if !t.out.Scan() {
		t.stop()
		return nil, fmt.Errorf("target serve did not start: %s", tailOf(stderr.String(), 2000))
	}
	var ready struct {
		Config serverConfig `json:"config"`
	}
	if err := json.Unmarshal(t.out.Bytes(), &ready); err != nil {
		t.stop()
		return nil, fmt.Errorf("target serve: %w: %q", err, t.out.Text())
	}
	t.cfg = ready.Config
	return t, nil
}

// command sends a command and waits for its "ok".
func (t *target) command(line string) error {
	_, err := t.ask(line)
	return err
}

// ask sends a command and returns its answer: "ok COMMAND [VALUE]".
func (t *target) ask(line string) (string, error) {
	if _, err := fmt.Fprintln(t.stdin, line); err != nil {
		return "", err
	}
	if !t.out.Scan() {
		return "", fmt.Errorf("target: no answer to %q: %s", line, tailOf(t.stderr.String(), 2000))
	}
	return t.out.Text(), nil
}

// count asks for a command's number ("gc-count", "live-heap").
func (t *target) count(cmd string) (float64, error) {
	answer, err := t.ask(cmd)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(answer, "ok "+cmd+" "), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("target: answer to %q: %q: %w", cmd, answer, err)
	}
	return float64(n), nil
}

func (t *target) stop() error {
	t.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- t.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		_ = t.cmd.Process.Kill()
		return <-done
	}
}

// runAPI: a control plane alone (scheduler off, bbolt with fsync), and
// apiClients clients creating apiPerClient pods each, in a row, as
// TestBenchAPI does (the admin token, namespace default); over TLS where
// the build serves TLS (older builds speak plain HTTP only).
func runAPI(o *options, b build, profile string) (figures, error) {
	return runAPIAs(o, b, profile, false)
}

// runAPIAs is runAPI, as a classroom's student when secure (secure.go).
func runAPIAs(o *options, b build, profile string, secure bool) (figures, error) {
	name := "api-"
	if secure {
		name = "api-secure-"
	}
	dir, err := os.MkdirTemp(o.work, name+b.label+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	t, err := startTarget(b, filepath.Join(dir, "data"))
	if err != nil {
		return nil, err
	}
	defer t.stop()
	cfg, ns := t.cfg, "default"
	if secure {
		if cfg, ns, err = secureSetup(o, t.cfg, dir); err != nil {
			return nil, fmt.Errorf("%w\ntarget serve's stderr (tail):\n%s", err, tailOf(t.stderr.String(), 3000))
		}
	}
	clients := make([]*http.Client, o.apiClients)
	for i := range clients {
		if clients[i], err = cfg.httpClient(); err != nil {
			return nil, err
		}
	}
	if profile != "" {
		start := "profile-start " + profile
		if o.execTrace {
			start += " trace"
		}
		if err := t.command(start); err != nil {
			return nil, err
		}
	}
	lats := make([][]time.Duration, o.apiClients)
	errs := make([]error, o.apiClients)
	var wg sync.WaitGroup
	gc0, err := t.count("gc-count")
	if err != nil {
		return nil, err
	}
	alloc0, err := t.count("heap-allocs")
	if err != nil {
		return nil, err
	}
	cpu0, err := loadCPU(t.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	for w := range o.apiClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range o.apiPerClient {
				t0 := time.Now()
				if _, err := cfg.do(clients[w], "POST", "/api/v1/namespaces/"+ns+"/pods", podJSON(ns, fmt.Sprintf("p-%d-%d", w, j)), http.StatusCreated); err != nil {
					errs[w] = err
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, err := loadCPU(t.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	gc1, err := t.count("gc-count")
	if err != nil {
		return nil, err
	}
	alloc1, err := t.count("heap-allocs")
	if err != nil {
		return nil, err
	}
	if profile != "" {
		if err := t.command("profile-stop"); err != nil {
			return nil, err
		}
	}
	live, err := t.count("live-heap")
	if err != nil {
		return nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w\ntarget serve's stderr (tail):\n%s", err, tailOf(t.stderr.String(), 3000))
	}
	for _, c := range clients {
		c.CloseIdleConnections()
	}
	f := latencyFigures(lats, elapsed)
	// What a create cost each side in CPU, apart from how long the clients
	// waited: which side's cost a change moved. The rate times the two is
	// the cores the run kept busy (docs/performance.md, "What the API's
	// last goals wait for").
	n := 0
	for _, l := range lats {
		n += len(l)
	}
	if n > 0 {
		f["server_cpu_us"] = float64((cpu1.server - cpu0.server).Microseconds()) / float64(n)
		f["client_cpu_us"] = float64((cpu1.client - cpu0.client).Microseconds()) / float64(n)
		// What a create allocated on the server's heap: whether the load
		// fits under the collector's goal (internal/gcpace's MaxGoal) or
		// meets a collection, exact where a profile samples.
		f["server_alloc_kib"] = (alloc1 - alloc0) / 1024 / float64(n)
	}
	// The server's collections during the load, and the heap live after it
	// (a collection of its own): the collector's marks are where the
	// slowest creates are (docs/performance.md, "The API's p99 and the
	// collector, twenty-seventh sitting"), and how long a mark takes grows
	// with the live heap.
	f["server_gcs"] = gc1 - gc0
	f["server_live_mib"] = live / (1 << 20)
	return f, nil
}

// cpuTimes is the CPU time so far of the server (the target process) and
// of the clients (this process: nothing else in it runs during the load).
type cpuTimes struct{ server, client time.Duration }

func loadCPU(serverPID int) (cpuTimes, error) {
	server, err := procCPU(serverPID)
	if err != nil {
		return cpuTimes{}, fmt.Errorf("the server's CPU time: %w", err)
	}
	client, err := selfCPU()
	if err != nil {
		return cpuTimes{}, fmt.Errorf("the clients' CPU time: %w", err)
	}
	return cpuTimes{server, client}, nil
}

// runStore: the store alone, ConfigMaps written straight into bbolt by
// many writers (group commit) and by one (a commit each).
func runStore(o *options, b build, profile string) (figures, error) {
	f := figures{}
	for _, side := range []struct {
		writers, n int
		prefix     string
	}{{o.storeWriters, o.storeN, ""}, {1, o.storeSingleN, "single_"}} {
		dir, err := os.MkdirTemp(o.work, "store-"+b.label+"-")
		if err != nil {
			return nil, err
		}
		args := []string{"store", "-dir", dir, "-writers", fmt.Sprint(side.writers), "-n", fmt.Sprint(side.n)}
		if profile != "" {
			args = append(args, "-profile", profile+side.prefix)
		}
		var r struct {
			WritesPerS float64 `json:"writes_per_s"`
			P99        float64 `json:"p99_ms"`
		}
		err = jsonLine(b.command("target", args...), &r)
		os.RemoveAll(dir)
		if err != nil {
			return nil, err
		}
		f[side.prefix+"writes_per_s"] = r.WritesPerS
		if side.prefix == "" {
			f["write_p99_ms"] = r.P99
		}
	}
	return f, nil
}

// schedVariant runs hack/bench-scheduler's variant with GOMAXPROCS=2, as
// hack/bench-scheduler.sh does for the "2 cores".
func schedVariant(variant string) func(o *options, b build, profile string) (figures, error) {
	return func(o *options, b build, profile string) (figures, error) {
		nodes, pods := o.schedNodes, o.schedPods
		if variant == "dra" {
			nodes, pods = o.draNodes, o.draPods
		}
		args := []string{"-variant", variant, "-nodes", fmt.Sprint(nodes), "-pods", fmt.Sprint(pods),
			"-creators", fmt.Sprint(o.schedCreators), "-timeout", o.timeout.String()}
		if profile != "" {
			args = append(args, "-cpuprofile", profile+"cpu.pprof", "-memprofile", profile+"allocs.pprof",
				"-blockprofile", profile+"block.pprof", "-mutexprofile", profile+"mutex.pprof")
			if o.execTrace {
				args = append(args, "-trace", profile+"trace.out")
			}
		}
		cmd := b.command("bench-scheduler", args...)
		cmd.Env = append(os.Environ(), "GOMAXPROCS=2")
		cmd.Dir = o.work
		var r struct {
			PodsPerS float64 `json:"pods_per_s"`
			RSS      float64 `json:"rss_mib"`
			Peak     float64 `json:"peak_rss_mib"`
			CPU      float64 `json:"cpu_ms_per_pod"`
			Alloc    float64 `json:"alloc_kib_per_pod"`
			GCs      float64 `json:"gcs"`
			TimedOut bool    `json:"timed_out"`
		}
		if err := jsonLine(cmd, &r); err != nil {
			return nil, err
		}
		if r.TimedOut {
			return nil, fmt.Errorf("bench-scheduler timed out after %s", o.timeout)
		}
		return figures{"pods_per_s": r.PodsPerS, "peak_rss_mib": r.Peak, "cpu_ms_per_pod": r.CPU,
			"alloc_kib_per_pod": r.Alloc, "sched_gcs": r.GCs}, nil
	}
}

// latencyFigures are the API benchmark's figures from each client's
// latencies, in the order it sent its creates, over elapsed.
//
// Each client's first create opens its connection (a TLS handshake, all
// clients' at once): slower than any other, and with 50 clients half of
// the slowest 1 % of 10,000 (docs/performance.md, "Issue 26: where it
// stands", twenty-second sitting). Apart, the p99 of the rest shows what
// the steady creates do.
func latencyFigures(lats [][]time.Duration, elapsed time.Duration) figures {
	var firsts, rest []time.Duration
	for _, l := range lats {
		if len(l) > 0 {
			firsts = append(firsts, l[0])
			rest = append(rest, l[1:]...)
		}
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	slices.Sort(firsts)
	slices.Sort(rest)
	return figures{
		"creates_per_s":      float64(len(all)) / elapsed.Seconds(),
		"p50_ms":             msOf(percentile(all, .5)),
		"p99_ms":             msOf(percentile(all, .99)),
		"first_p50_ms":       msOf(percentile(firsts, .5)),
		"p99_after_first_ms": msOf(percentile(rest, .99)),
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
