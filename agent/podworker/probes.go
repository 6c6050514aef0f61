package podworker

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/runtime"
)

// Probes: the kubelet's prober, small.
//
// Each running container with a probe gets a timer per probe kind; a check
// runs when it fires (exec in the container, an HTTP GET or a TCP connect
// to the pod), and the result goes through the thresholds:
//
//	startup   — until it succeeds, liveness and readiness do not run and the
//	            container is not Started; failing it restarts the container.
//	liveness  — failureThreshold failures in a row: the container is killed
//	            and restarted by its restartPolicy.
//	readiness — decides the container's Ready, hence the pod's Ready
//	            condition, hence whether Services send it traffic.
//
// A change of result calls Config.Enqueue (the agent enqueues the
// pod), so Sync reads results; it never waits for a probe.
//
// On a simulated node (Config.Simulated) no process runs, so nothing
// could answer: every probe passes, unless the pod's
// api.AnnotationSimulatedProbeFailure fault names its kind (as KWOK
// simulates probes). The fault is read again at every sync, so
// `kubectl annotate pod P skiff.dev/simulated-probe-failure=liveness`
// makes a running container fail its liveness probe and restart.

type probeKind string

const (
	probeStartup   probeKind = "startup"
	probeLiveness  probeKind = "liveness"
	probeReadiness probeKind = "readiness"
)

type probeResult int

const (
	resultUnknown probeResult = iota
	resultSuccess
	resultFailure
)

type probeEntry struct {
	podUID, podNS, podName string
	container              string
	containerID            string
	kind                   probeKind
	probe                  api.Probe
	podIP                  string
	ports                  []api.ContainerPort

	// simFail: on a simulated node, this probe fails (the pod's fault
	// annotation names its kind); set by ensure at every sync.
	simFail bool

	timer     *time.Timer
	successes int32
	failures  int32
	result    probeResult
	message   string
	stopped   bool
}

type prober struct {
	w *Worker

	mu      sync.Mutex
	entries map[string]*probeEntry // containerID/kind
}

func newProber(w *Worker) *prober { return &prober{w: w, entries: map[string]*probeEntry{}} }

func probeOf(c *api.Container, k probeKind) *api.Probe {
	switch k {
	case probeStartup:
		return c.StartupProbe
	case probeLiveness:
		return c.LivenessProbe
	}
	return c.ReadinessProbe
}

// ensure starts the probes of a running container once.
// podIP is where httpGet and tcpSocket probes go (the pod's own IP, or the
// node's for host-network pods).
func (p *prober) ensure(pod *api.Pod, c *api.Container, cs runtime.ContainerStatus, podIP string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	faults := api.SimulatedProbeFailures(pod.Annotations)
	for _, k := range []probeKind{probeStartup, probeLiveness, probeReadiness} {
		pr := probeOf(c, k)
		if pr == nil {
			continue
		}
		key := cs.ID + "/" + string(k)
		if e, ok := p.entries[key]; ok {
			e.simFail = faults[string(k)]
			continue
		}
		e := &probeEntry{podUID: pod.UID, podNS: pod.Namespace, podName: pod.Name, container: c.Name,
			containerID: cs.ID, kind: k, probe: *pr, podIP: podIP, ports: c.Ports, simFail: faults[string(k)]}
		p.entries[key] = e
		delay := time.Duration(pr.InitialDelaySeconds) * time.Second
		// The delay counts from the container's start, as the kubelet's does.
		if !cs.StartedAt.IsZero() {
			delay -= p.w.cfg.Now().Sub(cs.StartedAt)
		}
		e.timer = time.AfterFunc(max(delay, 0), func() { p.run(e) })
	}
}

// forget stops the probes of containers not in live (by container ID).
func (p *prober) forget(podUID string, live map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, e := range p.entries {
		if e.podUID == podUID && !live[e.containerID] {
			e.stopped = true
			e.timer.Stop()
			delete(p.entries, key)
		}
	}
}

// forgetContainer stops the probes of one container.
func (p *prober) forgetContainer(containerID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, e := range p.entries {
		if e.containerID == containerID {
			e.stopped = true
			e.timer.Stop()
			delete(p.entries, key)
		}
	}
}

// stopAll stops every probe (agent shutdown).
func (p *prober) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, e := range p.entries {
		e.stopped = true
		e.timer.Stop()
		delete(p.entries, key)
	}
}

// result returns a probe's current result and last message.
func (p *prober) result(containerID string, k probeKind) (probeResult, string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.entries[containerID+"/"+string(k)]
	if !ok {
		return resultUnknown, "", false
	}
	return e.result, e.message, true
}

// gated reports whether a startup probe has not succeeded yet.
func (p *prober) gated(containerID string) bool {
	r, _, ok := p.result(containerID, probeStartup)
	return ok && r != resultSuccess
}

func (p *prober) run(e *probeEntry) {
	p.mu.Lock()
	if e.stopped {
		p.mu.Unlock()
		return
	}
	gatedByStartup := e.kind != probeStartup && p.startupPendingLocked(e.containerID)
	simFail := e.simFail
	p.mu.Unlock()

	period := time.Duration(max(e.probe.PeriodSeconds, 1)) * time.Second
	if !gatedByStartup {
		var ok bool
		var msg string
		if p.w.cfg.Simulated {
			ok = !simFail
			if !ok {
				msg = fmt.Sprintf("simulated failure (annotation %s)", api.AnnotationSimulatedProbeFailure)
			}
		} else {
			ok, msg = p.check(e)
		}
		p.record(e, ok, msg)
	}
	p.mu.Lock()
	if !e.stopped {
		e.timer.Reset(period)
	}
	p.mu.Unlock()
}

func (p *prober) startupPendingLocked(containerID string) bool {
	e, ok := p.entries[containerID+"/"+string(probeStartup)]
	return ok && e.result != resultSuccess
}

// record applies the thresholds and reports a change.
func (p *prober) record(e *probeEntry, ok bool, msg string) {
	p.mu.Lock()
	succT, failT := max(e.probe.SuccessThreshold, 1), max(e.probe.FailureThreshold, 1)
	prev := e.result
	if ok {
		e.successes++
		e.failures = 0
		if e.successes >= succT {
			e.result = resultSuccess
		}
	} else {
		e.failures++
		e.successes = 0
		e.message = msg
		if e.failures >= failT {
			e.result = resultFailure
		}
	}
	changed := prev != e.result
	stopped := e.stopped
	p.mu.Unlock()
	if !ok && !stopped && p.w.cfg.Recorder != nil {
		pod := &api.Pod{}
		pod.Name, pod.Namespace, pod.UID = e.podName, e.podNS, e.podUID
		api.SetTypeMeta(pod)
		kind := strings.ToUpper(string(e.kind[:1])) + string(e.kind[1:])
		p.w.cfg.Recorder.Eventf(context.Background(), pod, api.EventWarning, "Unhealthy", "%s probe failed: %s", kind, msg)
	}
	if changed && !stopped && p.w.cfg.Enqueue != nil {
		p.w.cfg.Enqueue(e.podNS, e.podName)
	}
}

// check runs one probe once.
func (p *prober) check(e *probeEntry) (bool, string) {
	timeout := time.Duration(max(e.probe.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pr := e.probe
	switch {
	case pr.Exec != nil:
		var out bytes.Buffer
		code, err := p.w.cfg.Runtime.Exec(ctx, e.containerID, runtime.ExecOptions{Cmd: pr.Exec.Command, Stdout: &out, Stderr: &out})
		if err != nil {
			return false, fmt.Sprintf("exec %v: %v", pr.Exec.Command, err)
		}
		if code != 0 {
			return false, fmt.Sprintf("command %v exited with %d: %s", pr.Exec.Command, code, strings.TrimSpace(out.String()))
		}
		return true, ""
	case pr.HTTPGet != nil:
		g := pr.HTTPGet
		host := g.Host
		if host == "" {
			host = e.podIP
		}
		port, err := p.port(e, g.Port)
		if err != nil {
			return false, err.Error()
		}
		scheme := strings.ToLower(g.Scheme)
		if scheme == "" {
			scheme = "http"
		}
		path := g.Path
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), path)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err.Error()
		}
		for _, h := range g.HTTPHeaders {
			req.Header.Add(h.Name, h.Value)
		}
		req.Header.Set("User-Agent", "skiff-probe/1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, fmt.Sprintf("Get %q: %v", url, err)
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return false, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
		}
		return true, ""
	case pr.TCPSocket != nil:
		host := pr.TCPSocket.Host
		if host == "" {
			host = e.podIP
		}
		port, err := p.port(e, pr.TCPSocket.Port)
		if err != nil {
			return false, err.Error()
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false, fmt.Sprintf("dial tcp %s: %v", net.JoinHostPort(host, strconv.Itoa(port)), err)
		}
		conn.Close()
		return true, ""
	}
	return false, "probe has no handler"
}

// port resolves a probe port given by number or by container port name.
func (p *prober) port(e *probeEntry, port api.IntOrString) (int, error) {
	if port.Type == 0 { // intstr.Int
		return int(port.IntVal), nil
	}
	for _, cp := range e.ports {
		if cp.Name == port.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("container %s has no port named %q", e.container, port.StrVal)
}
