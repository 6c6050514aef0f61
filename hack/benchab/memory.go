package main

import (
	"bufio"
	"encoding/json"
	"errors"
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
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// runMemory is the issue's memory measurement: `skiff up --runtime fake
// --sim-nodes N` in a process of its own (a local node on the simulated
// runtime plus N simulated nodes), D Deployments of R replicas created
// over the API, every pod ready; the server's RSS at the plateau (after
// settling), its peak while creating (VmHWM then), and the peak over
// deleting the namespace too. It also reads the server's store watch
// streams and API watch streams at the plateau from /metrics.
func runMemory(o *options, b build, profile string) (figures, error) {
	dir, err := os.MkdirTemp(o.work, "mem-"+b.label+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	data := filepath.Join(dir, "data")
	args := []string{"up", "--runtime", "fake", "--network", "none", "--no-gossip", "--data-dir", data,
		"--listen", freeAddr(), "--sim-nodes", strconv.Itoa(o.memNodes)}
	pprofAddr := ""
	if profile != "" && supportsFlag(b.bin("skiff"), "up", "--pprof-listen") {
		pprofAddr = freeAddr()
		args = append(args, "--pprof-listen", pprofAddr)
	}
	cmd := b.command("skiff", args...)
	cmd.Env = append(os.Environ(), "HOME="+dir) // up writes $HOME/.skiff and merges ~/.kube/config
	logf, err := os.Create(filepath.Join(dir, "up.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	fail := func(err error) (figures, error) {
		out, _ := os.ReadFile(logf.Name())
		return nil, fmt.Errorf("%w\nskiff up's log (tail):\n%s", err, tailOf(string(out), 3000))
	}
	pid := cmd.Process.Pid
	deadline := time.Now().Add(o.timeout)

	// Up once it wrote its client config and lists every simulated node.
	cfg, hc, err := waitUp(data, o.memNodes, exited, deadline)
	if err != nil {
		return fail(err)
	}

	const ns = "bench-mem"
	if _, err := cfg.do(hc, "POST", "/api/v1/namespaces", fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, ns), http.StatusCreated); err != nil {
		return fail(err)
	}
	var cpuProf sync.WaitGroup
	if pprofAddr != "" { // the first 30 s of creating
		cpuProf.Go(func() { savePprof(pprofAddr, "profile?seconds=30", profile+"cpu.pprof") })
	}
	start := time.Now()
	if err := createDeployments(cfg, ns, o.memDeploys, o.memReplicas); err != nil {
		return fail(err)
	}
	want := o.memDeploys * o.memReplicas
	for {
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("not every pod ready after %s", o.timeout))
		}
		time.Sleep(time.Second)
		ready, err := readyReplicas(cfg, hc, ns)
		if err != nil {
			return fail(err)
		}
		if ready >= want {
			break
		}
	}
	f := figures{"ready_s": time.Since(start).Seconds()}
	time.Sleep(o.memSettle) // the bursts are over; heartbeats go on
	f["plateau_mib"] = procStatusMiB(pid, "VmRSS:")
	f["creating_peak_mib"] = procStatusMiB(pid, "VmHWM:")
	// What the plateau's RSS is made of: anonymous pages (the Go heap, its
	// freed but not yet returned spans, stacks, the runtime) and file pages
	// (the binary's text and data, bbolt's mmap of state.db).
	f["plateau_anon_mib"] = procStatusMiB(pid, "RssAnon:")
	f["plateau_file_mib"] = procStatusMiB(pid, "RssFile:")
	if m, err := cfg.do(hc, "GET", "/metrics", nil, http.StatusOK); err == nil {
		f["store_watchers"] = metricSum(string(m), "skiff_store_watchers")
		f["api_watchers"] = metricSum(string(m), "apiserver_watchers")
		// The Go runtime's view (Prometheus' Go collector, every build):
		// the heap's spans in use, and what the next collection waits for.
		const mib = 1 << 20
		f["heap_inuse_mib"] = metricSum(string(m), "go_memstats_heap_inuse_bytes") / mib
		f["next_gc_mib"] = metricSum(string(m), "go_memstats_next_gc_bytes") / mib
	}
	cpuProf.Wait()
	if pprofAddr != "" {
		savePprof(pprofAddr, "heap", profile+"heap.pprof")
		savePprof(pprofAddr, "allocs", profile+"allocs.pprof")
	}

	start = time.Now()
	if err := deleteNamespace(cfg, hc, ns, deadline, o.timeout); err != nil {
		return fail(err)
	}
	f["delete_s"] = time.Since(start).Seconds()
	f["peak_mib"] = procStatusMiB(pid, "VmHWM:")
	return f, nil
}

// waitUp waits until the server in data wrote its client config and lists
// nodes nodes, or its process exited (exited: its Wait's error, put back),
// or deadline passed.
func waitUp(data string, nodes int, exited chan error, deadline time.Time) (serverConfig, *http.Client, error) {
	var hc *http.Client
	for {
		if time.Now().After(deadline) {
			return serverConfig{}, nil, errors.New("skiff up did not come up")
		}
		select {
		case err := <-exited:
			exited <- err
			return serverConfig{}, nil, fmt.Errorf("skiff up exited: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		c, err := loadServerConfig(data)
		if err != nil {
			continue
		}
		if hc == nil {
			if hc, err = c.httpClient(); err != nil {
				return serverConfig{}, nil, err
			}
		}
		var list struct{ Items []json.RawMessage }
		if body, err := c.do(hc, "GET", "/api/v1/nodes", nil, http.StatusOK); err == nil && json.Unmarshal(body, &list) == nil && len(list.Items) >= nodes {
			return c, hc, nil
		}
	}
}

// deleteNamespace deletes ns and waits until it is gone, or deadline
// (timeout is said in the error).
func deleteNamespace(cfg serverConfig, hc *http.Client, ns string, deadline time.Time, timeout time.Duration) error {
	if _, err := cfg.do(hc, "DELETE", "/api/v1/namespaces/"+ns, nil, http.StatusOK, http.StatusAccepted); err != nil {
		return err
	}
	for {
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace not gone after %s", timeout)
		}
		time.Sleep(200 * time.Millisecond)
		if _, err := cfg.do(hc, "GET", "/api/v1/namespaces/"+ns, nil, http.StatusNotFound); err == nil {
			return nil
		}
	}
}

// createDeployments creates n Deployments of replicas pods each (8 at a
// time).
func createDeployments(cfg serverConfig, ns string, n, replicas int) error {
	work := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		hc, err := cfg.httpClient()
		if err != nil {
			return err
		}
		wg.Go(func() {
			for i := range work {
				name := fmt.Sprintf("d-%03d", i)
				body := fmt.Appendf(nil, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%q,"namespace":%q},`+
					`"spec":{"replicas":%d,"selector":{"matchLabels":{"app":%q}},"template":{"metadata":{"labels":{"app":%q}},`+
					`"spec":{"containers":[{"name":"main","image":"busybox:1.36","command":["sleep","3600"]}]}}}}`, name, ns, replicas, name, name)
				if _, err := cfg.do(hc, "POST", "/apis/apps/v1/namespaces/"+ns+"/deployments", body, http.StatusCreated); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
loop:
	for i := range n {
		select {
		case work <- i:
		case err = <-errs:
			break loop
		}
	}
	close(work)
	wg.Wait()
	if err != nil {
		return err
	}
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// readyReplicas sums status.readyReplicas over the namespace's Deployments.
func readyReplicas(cfg serverConfig, hc *http.Client, ns string) (int, error) {
	body, err := cfg.do(hc, "GET", "/apis/apps/v1/namespaces/"+ns+"/deployments", nil, http.StatusOK)
	if err != nil {
		return 0, err
	}
	var list struct {
		Items []struct {
			Status struct {
				ReadyReplicas int `json:"readyReplicas"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return 0, err
	}
	n := 0
	for _, d := range list.Items {
		n += d.Status.ReadyReplicas
	}
	return n, nil
}

// loadServerConfig reads the client config `skiff up` wrote into its data
// dir: the kubeconfig of newer builds, or the older YAML config (server
// and token).
func loadServerConfig(dataDir string) (serverConfig, error) {
	if kc, err := clientcmd.LoadFromFile(filepath.Join(dataDir, "kubeconfig")); err == nil {
		ctx := kc.Contexts[kc.CurrentContext]
		if ctx == nil || kc.Clusters[ctx.Cluster] == nil || kc.AuthInfos[ctx.AuthInfo] == nil {
			return serverConfig{}, errors.New("kubeconfig: no current context")
		}
		cl, user := kc.Clusters[ctx.Cluster], kc.AuthInfos[ctx.AuthInfo]
		return serverConfig{Server: cl.Server, Token: user.Token, CAData: cl.CertificateAuthorityData}, nil
	}
	data, err := os.ReadFile(filepath.Join(dataDir, "config"))
	if err != nil {
		return serverConfig{}, err
	}
	var c serverConfig
	if err := yaml.Unmarshal(data, &c); err != nil {
		return serverConfig{}, err
	}
	if c.Server == "" {
		return serverConfig{}, errors.New("config: no server")
	}
	return c, nil
}

// supportsFlag reports whether `bin sub --help` mentions flag.
func supportsFlag(bin, sub, flag string) bool {
	out, _ := exec.Command(bin, sub, "--help").CombinedOutput()
	return strings.Contains(string(out), flag)
}

// freeAddr is a loopback address whose port was free just now.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer ln.Close()
	return ln.Addr().String()
}

// procStatusMiB reads a kB field of /proc/PID/status in MiB (0 when absent).
func procStatusMiB(pid int, field string) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// userHZ is the unit of /proc/PID/stat's CPU times: USER_HZ, 100 on every
// architecture Linux runs Go on (the kernel's ABI, whatever its own tick).
const userHZ = 100

// procCPU is a process's CPU time so far, user and system, every thread's
// (those that ended too): /proc/PID/stat's utime and stime.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(data))
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line. The command name (field 2) is in parentheses and
// may hold spaces and parentheses itself, so the fields are counted from
// the last ')'.
func parseStatCPU(line string) (time.Duration, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat line without a command name: %q", line)
	}
	fields := strings.Fields(line[i+1:]) // from field 3, the state
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc stat line with %d fields after the command name, want at least 13", len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat CPU time %q: %w", f, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// selfCPU is this process's CPU time so far, user and system.
func selfCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// metricSum adds every sample of a metric in Prometheus' text format.
func metricSum(text, name string) float64 {
	sum := 0.0
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue // another metric whose name starts the same
		}
		fields := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// savePprof fetches a profile from a server's --pprof-listen into path.
func savePprof(addr, profile, path string) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/" + profile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchab: profile:", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchab: profile:", err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}
