package proxy

import (
	"context"
	"io"
	"net/http"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/agent/network/netnstest"
)

// TestMeasureNodePort compares HTTP requests through localhost:NODEPORT
// (DNAT + masquerade by the proxy's rules) with requests straight to the
// pod IP, in throwaway namespaces: fixed concurrency and request count,
// keep-alive off (each request is a new connection, so every one crosses
// the NAT rules' first-packet path). Run with SKIFF_MEASURE=1; the numbers
// go to docs/performance.md (Networking).
func TestMeasureNodePort(t *testing.T) {
	if os.Getenv("SKIFF_MEASURE") == "" {
		t.Skip("set SKIFF_MEASURE=1 to measure")
	}
	netnstest.Require(t)
	node := netnstest.New(t, "skiff-msnode")
	pod := netnstest.New(t, "skiff-mspod")
	netnstest.Link(t, node, pod, "10.244.0.1/24", "10.244.0.2/24")
	pod.MustRun(t, "ip", "route", "add", "default", "via", "10.244.0.1")
	ln, err := pod.Listen("tcp", "10.244.0.2:8080")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello\n") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	ctx := context.Background()
	wrap := node.Wrap()
	if _, err := run(ctx, wrap, nil, "sysctl", "-q", "-w", "net.ipv4.conf.all.route_localnet=1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Cleanup(context.Background(), wrap) })
	if err := Apply(ctx, wrap, []ServicePort{{Name: "default/web:http", ClusterIP: "10.96.0.10", Port: 80, NodePort: 30080, Protocol: "tcp",
		Endpoints: []Endpoint{{"10.244.0.2", 8080}}}}); err != nil {
		t.Fatal(err)
	}
	const concurrency, requests = 16, 20000
	load := func(url string) (rps float64, p99 time.Duration) {
		tr := &http.Transport{DialContext: netnstest.Dialer(node.Path()), DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
		lat := make([]time.Duration, requests)
		var next int
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := time.Now()
		for range concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					mu.Lock()
					i := next
					next++
					mu.Unlock()
					if i >= requests {
						return
					}
					t0 := time.Now()
					resp, err := c.Get(url)
					if err != nil {
						t.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					lat[i] = time.Since(t0)
				}
			}()
		}
		wg.Wait()
		el := time.Since(start)
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return float64(requests) / el.Seconds(), lat[requests*99/100]
	}
	load("http://10.244.0.2:8080/") // warm up
	directRPS, directP99 := load("http://10.244.0.2:8080/")
	npRPS, npP99 := load("http://127.0.0.1:30080/")
	t.Logf("%d requests, concurrency %d, new connection per request", requests, concurrency)
	t.Logf("pod IP direct:        %8.0f req/s  p99 %v", directRPS, directP99)
	t.Logf("localhost:NODEPORT:   %8.0f req/s  p99 %v", npRPS, npP99)
	t.Logf("ratio NodePort/direct: throughput %.2f, p99 %.2f", npRPS/directRPS, float64(npP99)/float64(directP99))
}
