package apiserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/testwait"
)

// Tests of the limits under load (inflight.go, server.go): they run the
// server as it runs for real (startTLSServer: Run on a loopback port),
// since the connection timeouts live in http.Server.

// newClient is one client: connections of its own, closed at the end.
func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 256, TLSClientConfig: testCA(t).ClientTLS(nil)}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// send sends one request with the token and returns the response, its
// body read.
func (s *tlsServer) send(c *http.Client, method, path, body string) (*http.Response, []byte, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.base+path, r)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// inflightNow reads apiserver_current_inflight_requests{request_kind=kind}
// from the server's metrics (in process: GET /metrics would itself take a
// read slot).
func (s *tlsServer) inflightNow(t testing.TB, kind string) int {
	t.Helper()
	rec := httptest.NewRecorder()
	s.Metrics().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	prefix := `apiserver_current_inflight_requests{request_kind="` + kind + `"} `
	for line := range strings.Lines(rec.Body.String()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("metric %s%s: %v", prefix, v, err)
			}
			return n
		}
	}
	return 0 // not observed yet
}

// gate is a /skiff/ handler that holds every request until opened, so a
// test knows exactly how many requests are being served.
type gate struct {
	entered atomic.Int32
	open    chan struct{}
	once    sync.Once
}

func newGate(t *testing.T) *gate {
	g := &gate{open: make(chan struct{})}
	t.Cleanup(g.release) // before the server's shutdown (cleanups run last first)
	return g
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.entered.Add(1)
	if r.URL.Query().Has("begin") {
		// Begin the answer before blocking.
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
	}
	<-g.open
	io.WriteString(w, "done")
}

// checkTooMany checks a 429 as kube-apiserver's: Retry-After 1 and its words.
func checkTooMany(t testing.TB, resp *http.Response, b []byte) {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("got %d, want 429: %s", resp.StatusCode, b)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "1" {
		t.Fatalf("Retry-After %q, want 1", ra)
	}
	st := status(t, b, http.StatusTooManyRequests, api.ReasonTooManyRequests)
	if st.Message != "Too many requests, please try again later." {
		t.Fatalf("message %q", st.Message)
	}
	if st.Details == nil || st.Details.RetryAfterSeconds != 1 {
		t.Fatalf("details %+v, want retryAfterSeconds 1", st.Details)
	}
}

func TestConfigValidateLimits(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string // every problem is named
	}{
		{"defaults", func(*Config) {}, nil},
		{"no limits", func(c *Config) { c.MaxReadOnlyInflight, c.MaxMutatingInflight = 0, 0 }, nil},
		{"negative limits", func(c *Config) { c.MaxReadOnlyInflight, c.MaxMutatingInflight = -1, -2 },
			[]string{"max read-only inflight -1", "max mutating inflight -2"}},
		{"timeouts", func(c *Config) { c.RequestTimeout, c.ReadHeaderTimeout, c.IdleTimeout = 0, -time.Second, 0 },
			[]string{"request timeout 0s", "read header timeout -1s", "idle timeout 0s"}},
		{"headers", func(c *Config) { c.MaxHeaderBytes = 0 }, []string{"max header bytes 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Token = testToken
			tc.mutate(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %v; want it to name %q", err, w)
				}
			}
		})
	}
}

// TestSlowLoris: connections that never finish their headers, or sit idle,
// are closed by the server after its timeout, while a normal client's
// requests keep succeeding. Each case has a server of its own whose other
// timeout is long, so the one under test is what closes the connection
// (with both short, a loaded machine could let the header timeout cut the
// idle case's request before it was read).
func TestSlowLoris(t *testing.T) {
	const headerTimeout, idleTimeout, long = 300 * time.Millisecond, 400 * time.Millisecond, time.Minute
	e := newEnv(t)
	headerServer := startTLSServer(t, e, func(c *Config) { c.ReadHeaderTimeout, c.IdleTimeout = headerTimeout, long })
	idleServer := startTLSServer(t, e, func(c *Config) { c.ReadHeaderTimeout, c.IdleTimeout = long, idleTimeout })
	tests := []struct {
		name    string
		timeout time.Duration // the one that closes it
		attack  func(t *testing.T, c net.Conn)
	}{
		{"silent", headerTimeout, func(*testing.T, net.Conn) {}},
		{"dribbled header", headerTimeout, func(t *testing.T, c net.Conn) {
			if _, err := io.WriteString(c, "GET /api/v1/namespaces HTTP/1.1\r\nHost: skiff\r\n"); err != nil {
				t.Error(err)
				return
			}
			go func() { // one header byte every 20ms, until the server hangs up
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for range tick.C {
					if _, err := io.WriteString(c, "X"); err != nil {
						return
					}
				}
			}()
		}},
		{"idle keep-alive", idleTimeout, func(t *testing.T, c net.Conn) {
			io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: skiff\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := headerServer
			if tc.timeout == idleTimeout {
				s = idleServer
			}
			// Many connections at once, and a normal client meanwhile.
			const conns = 50
			var closed atomic.Int32
			var wg sync.WaitGroup
			for range conns {
				start := time.Now() // before the server can start its clock
				c, err := tls.Dial("tcp", s.Addr(), testCA(t).ClientTLS(nil))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				tc.attack(t, c)
				wg.Add(1)
				go func() {
					defer wg.Done()
					c.SetReadDeadline(time.Now().Add(20 * time.Second)) // a bound, not a measurement
					_, err := io.Copy(io.Discard, c)                    // until the server closes
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						t.Errorf("connection still open after 20s")
						return
					}
					// EOF or a reset: the server hung up, and not before its timeout.
					if d := time.Since(start); d < tc.timeout {
						t.Errorf("closed after %v, before the %v timeout", d, tc.timeout)
					}
					closed.Add(1)
				}()
			}
			normal := newClient(t)
			ok := 0
			testwait.Until(t, 20*time.Second, func() (bool, string) {
				resp, b, err := s.send(normal, "GET", "/api/v1/namespaces", "")
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("normal client during the attack: %v %v %s", err, resp, b)
				}
				ok++
				n := closed.Load()
				return n == conns, strconv.Itoa(int(n)) + " of " + strconv.Itoa(conns) + " connections closed"
			})
			wg.Wait()
			t.Logf("%d requests of a normal client succeeded while %d connections were closed", ok, conns)
		})
	}
}

// TestInflightLimit: with limits of 2 reads and 1 write, exactly that many
// run; one more of the same kind gets 429 at once while the other kind and
// long-running requests go on.
func TestInflightLimit(t *testing.T) {
	tests := []struct {
		name, method, kind string
		limit              int
		other              [3]string // a request of the other kind that must succeed: method, path, body
	}{
		{"reads", "GET", readOnlyKind, 2, [3]string{"POST", "/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"w"}}`}},
		{"writes", "POST", mutatingKind, 1, [3]string{"GET", "/api/v1/namespaces/default", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			g := newGate(t)
			s := startTLSServer(t, e, func(c *Config) {
				c.MaxReadOnlyInflight, c.MaxMutatingInflight = 2, 1
				c.Skiff = g
			})
			var wg sync.WaitGroup
			for range tc.limit {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, b, err := s.send(newClient(t), tc.method, "/skiff/held", "")
					if err != nil || resp.StatusCode != http.StatusOK {
						t.Errorf("held request: %v %v %s", err, resp, b)
					}
				}()
			}
			testwait.For(t, 10*time.Second, "the held requests to enter", func() bool { return int(g.entered.Load()) == tc.limit })
			if n := s.inflightNow(t, tc.kind); n != tc.limit {
				t.Fatalf("%s in flight: %d, want %d", tc.kind, n, tc.limit)
			}

			c := newClient(t)
			for range 3 { // past the limit, every one is refused
				resp, b, err := s.send(c, tc.method, "/skiff/held", "")
				if err != nil {
					t.Fatal(err)
				}
				checkTooMany(t, resp, b)
			}
			if got := int(g.entered.Load()); got != tc.limit {
				t.Fatalf("%d requests entered the handler, want exactly %d", got, tc.limit)
			}
			resp, b, err := s.send(c, tc.other[0], tc.other[1], tc.other[2])
			if err != nil || resp.StatusCode/100 != 2 {
				t.Fatalf("the other kind while %s are full: %v %v %s", tc.name, err, resp, b)
			}
			// Not counted: health, an unauthenticated request (401 first, as
			// kube-apiserver authenticates before the filter) and
			// long-running requests.
			for _, ex := range []struct {
				path  string
				token bool
				want  int
			}{
				{"/healthz", false, 200},
				{"/api/v1/namespaces", false, 401},
				{"/api/v1/namespaces/default/pods/nope/log", true, 404},
				{"/api/v1/nodes/nope/proxy/", true, 404},
			} {
				req, _ := http.NewRequest("GET", s.base+ex.path, nil)
				if ex.token {
					req.Header.Set("Authorization", "Bearer "+testToken)
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != ex.want {
					t.Errorf("GET %s while full: %d, want %d", ex.path, resp.StatusCode, ex.want)
				}
			}
			// A watch is long-running: it opens, streams and is not counted.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", s.base+"/api/v1/namespaces/default/configmaps?watch=true", nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			wresp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer wresp.Body.Close()
			if wresp.StatusCode != http.StatusOK {
				t.Fatalf("watch while full: %d", wresp.StatusCode)
			}
			if n := s.inflightNow(t, readOnlyKind); tc.kind == readOnlyKind && n != tc.limit {
				t.Fatalf("read-only in flight with a watch open: %d, want %d", n, tc.limit)
			}

			g.release()
			wg.Wait()
			testwait.For(t, 10*time.Second, "the slots to be free", func() bool { return s.inflightNow(t, tc.kind) == 0 })
			resp, b, err = s.send(c, tc.method, "/skiff/held", "")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("after the held requests ended: %v %v %s", err, resp, b)
			}
		})
	}
}

// TestRequestTimeout: a request that is not long-running gets kube's 504
// after RequestTimeout even when its handler is stuck, which keeps its
// slot until it ends; one whose answer had begun is cut.
func TestRequestTimeout(t *testing.T) {
	e := newEnv(t)
	g := newGate(t)
	s := startTLSServer(t, e, func(c *Config) {
		c.RequestTimeout = 200 * time.Millisecond
		c.MaxReadOnlyInflight = 1
		c.Skiff = g
	})
	c := newClient(t)
	resp, b, err := s.send(c, "GET", "/skiff/stuck", "")
	if err != nil {
		t.Fatal(err)
	}
	st := status(t, b, http.StatusGatewayTimeout, api.ReasonTimeout)
	if st.Message != "Timeout: request did not complete within the allotted timeout" {
		t.Fatalf("message %q", st.Message)
	}
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("code %d", resp.StatusCode)
	}
	// The stuck handler still holds the only read slot.
	resp, b, err = s.send(c, "GET", "/api/v1/namespaces", "")
	if err != nil {
		t.Fatal(err)
	}
	checkTooMany(t, resp, b)
	g.release()
	testwait.For(t, 10*time.Second, "the stuck handler's slot to be freed", func() bool { return s.inflightNow(t, readOnlyKind) == 0 })

	// An answer begun, then stuck: the connection is cut, not left open.
	g2 := newGate(t)
	s2 := startTLSServer(t, e, func(c *Config) {
		c.RequestTimeout = 200 * time.Millisecond
		c.Skiff = g2
	})
	_, _, err = s2.send(newClient(t), "GET", "/skiff/stuck?begin", "")
	if err == nil {
		t.Fatal("a begun answer past the timeout read as complete")
	}

	// A body dribbled slower than the timeout: 504, nothing created.
	pr, pw := io.Pipe()
	defer pw.Close()
	go io.WriteString(pw, `{"metadata":{"name":"slow"`) // and never the rest
	req, _ := http.NewRequest("POST", s.base+"/api/v1/namespaces/default/configmaps", pr)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	status(t, b, http.StatusGatewayTimeout, api.ReasonTimeout)
	e.must(404, "GET", "/api/v1/namespaces/default/configmaps/slow", nil)
}

// TestBodyLimitWords: 413 in kube-apiserver's words for every body a
// request may carry, and nothing changes.
func TestBodyLimitWords(t *testing.T) {
	e := newEnv(t)
	e.must(201, "POST", cmPath, configMap("", "small"))
	big := `{"metadata":{"name":"big"},"data":{"k":"` + strings.Repeat("x", 3<<20) + `"}}`
	bigPatch := `{"data":{"k":"` + strings.Repeat("x", 3<<20) + `"}}`
	tests := []struct {
		name, method, path, body, contentType string
	}{
		{"create", "POST", cmPath, big, "application/json"},
		{"update", "PUT", cmPath + "/small", strings.Replace(big, `"big"`, `"small"`, 1), "application/json"},
		{"merge patch", "PATCH", cmPath + "/small", bigPatch, "application/merge-patch+json"},
		{"strategic merge patch", "PATCH", cmPath + "/small", bigPatch, "application/strategic-merge-patch+json"},
		{"json patch", "PATCH", cmPath + "/small", `[{"op":"add","path":"/data/k","value":"` + strings.Repeat("x", 3<<20) + `"}]`, "application/json-patch+json"},
		{"delete options", "DELETE", cmPath + "/small", `{"gracePeriodSeconds":0,"x":"` + strings.Repeat("x", 3<<20) + `"}`, "application/json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, b := e.do(tc.method, tc.path, tc.body, "Content-Type", tc.contentType)
			if code != http.StatusRequestEntityTooLarge {
				t.Fatalf("got %d: %.200s", code, b)
			}
			st := status(t, b, http.StatusRequestEntityTooLarge, api.ReasonTooLarge)
			if want := "Request entity too large: limit is 3145728"; st.Message != want {
				t.Fatalf("message %q, want %q", st.Message, want)
			}
		})
	}
	cm := decode[api.ConfigMap](t, e.must(200, "GET", cmPath+"/small", nil))
	if cm.Data["k"] != "v" {
		t.Fatalf("the configmap changed: %v", cm.Data)
	}
	e.must(404, "GET", cmPath+"/big", nil)
}

// TestFlood: one client floods one kind of request past its limit; it
// gets 429s, and another client's requests of the other kind, and a watch
// it opens during the flood, all succeed. (Within one kind the limit is
// shared: kube-apiserver's answer to that is API Priority and Fairness,
// which skiff does not have. The latency figure is TestFloodLatency's.)
func TestFlood(t *testing.T) {
	tests := []struct {
		name  string
		flood func(i int) (method, path, body string)
		other func(i int) (method, path, body string)
	}{
		{"reads flood, writes go on",
			func(int) (string, string, string) { return "GET", "/api/v1/namespaces/default/configmaps", "" },
			func(i int) (string, string, string) {
				return "POST", "/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"other-` + strconv.Itoa(i) + `"}}`
			}},
		{"writes flood, reads go on",
			func(i int) (string, string, string) {
				return "POST", "/api/v1/namespaces/default/configmaps", `{"metadata":{"generateName":"flood-"}}`
			},
			func(int) (string, string, string) { return "GET", "/api/v1/namespaces/default", "" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			s := startTLSServer(t, e, func(c *Config) { c.MaxReadOnlyInflight, c.MaxMutatingInflight = 2, 2 })
			var tooMany, served atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			flooder := newClient(t)
			for w := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						m, p, b := tc.flood(w*1_000_000 + i)
						resp, body, err := s.send(flooder, m, p, b)
						switch {
						case err != nil:
							t.Errorf("flooder: %v", err)
							return
						case resp.StatusCode == http.StatusTooManyRequests:
							checkTooMany(t, resp, body)
							tooMany.Add(1)
						case resp.StatusCode/100 == 2:
							served.Add(1)
						default:
							t.Errorf("flooder: %d %s", resp.StatusCode, body)
							return
						}
					}
				}()
			}
			defer func() { close(stop); wg.Wait() }()
			testwait.For(t, 20*time.Second, "the flood to be refused", func() bool { return tooMany.Load() > 0 })

			other := newClient(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", s.base+"/api/v1/namespaces/default/configmaps?watch=true", nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			wresp, err := other.Do(req)
			if err != nil || wresp.StatusCode != http.StatusOK {
				t.Fatalf("other client's watch during the flood: %v %v", err, wresp)
			}
			defer wresp.Body.Close()
			const n = 30
			lat := make([]time.Duration, 0, n)
			for i := range n {
				m, p, b := tc.other(i)
				t0 := time.Now()
				resp, body, err := s.send(other, m, p, b)
				if err != nil || resp.StatusCode/100 != 2 {
					t.Fatalf("other client, request %d during the flood: %v %v %s", i, err, resp, body)
				}
				lat = append(lat, time.Since(t0))
			}
			t.Logf("flooder: %d served, %d refused with 429; other client: %d of %d ok, slowest %v",
				served.Load(), tooMany.Load(), len(lat), n, maxDuration(lat))
		})
	}
}

func maxDuration(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// TestFloodLatency measures what TestFlood asserts structurally: another
// client's latency alone and under a flood of LISTs from 64 connections,
// in the same run, for several limits. A measurement, not a check: opt in
// with SKIFF_BENCH=1 (docs/reliability.md records a run).
func TestFloodLatency(t *testing.T) {
	if os.Getenv("SKIFF_BENCH") != "1" {
		t.Skip("a measurement: set SKIFF_BENCH=1")
	}
	const flooders, n = 64, 300
	e := newEnv(t)
	for i := range 100 { // a LIST of 100 ConfigMaps is the flood's work
		e.must(201, "POST", cmPath, configMap("", "seed-"+strconv.Itoa(i)))
	}
	others := []struct {
		name string
		req  func(i int) (method, path, body string)
	}{
		{"writes (create)", func(i int) (string, string, string) {
			return "POST", "/api/v1/namespaces/default/configmaps", `{"metadata":{"generateName":"other-"}}`
		}},
		{"reads (get)", func(int) (string, string, string) { return "GET", "/api/v1/namespaces/default", "" }},
	}
	limits := []struct {
		name             string
		readOnly, mutate int
	}{
		{"no limits", 0, 0},
		{"defaults 400/200", 400, 200},
		{"reads 8, writes 200", 8, 200},
	}
	for _, lim := range limits {
		s := startTLSServer(t, e, func(c *Config) { c.MaxReadOnlyInflight, c.MaxMutatingInflight = lim.readOnly, lim.mutate })
		for _, o := range others {
			measure := func() (p50, p99 time.Duration, refused int) {
				c := newClient(t)
				var lat []time.Duration
				for i := range n {
					m, p, b := o.req(i)
					t0 := time.Now()
					resp, body, err := s.send(c, m, p, b)
					d := time.Since(t0)
					switch {
					case err != nil:
						t.Fatal(err)
					case resp.StatusCode == http.StatusTooManyRequests:
						refused++
					case resp.StatusCode/100 != 2:
						t.Fatalf("%d %s", resp.StatusCode, body)
					default:
						lat = append(lat, d)
					}
				}
				slices.Sort(lat)
				return nearestRank(lat, 0.50), nearestRank(lat, 0.99), refused
			}
			a50, a99, _ := measure()
			var served, tooMany atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			fc := newClient(t)
			for range flooders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						resp, _, err := s.send(fc, "GET", "/api/v1/namespaces/default/configmaps", "")
						if err != nil {
							t.Error(err)
							return
						}
						if resp.StatusCode == http.StatusTooManyRequests {
							tooMany.Add(1)
						} else {
							served.Add(1)
						}
					}
				}()
			}
			testwait.For(t, 20*time.Second, "the flood to start", func() bool { return served.Load()+tooMany.Load() > 200 })
			start := time.Now()
			f50, f99, refused := measure()
			el := time.Since(start).Seconds()
			close(stop)
			wg.Wait()
			t.Logf("%-20s other client %-16s alone p50 %6s p99 %6s | under flood p50 %6s p99 %6s (p99 x%.1f), other refused %d/%d | flood %.0f served/s, %.0f refused/s",
				lim.name, o.name, ms(a50), ms(a99), ms(f50), ms(f99), float64(f99)/float64(a99), refused, n,
				float64(served.Load())/el, float64(tooMany.Load())/el)
		}
	}
}

// nearestRank is the p-th percentile of sorted durations.
func nearestRank(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 2, 64) + "ms"
}
