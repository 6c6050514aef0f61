package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/cli"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/apiserver"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/internal/kubectltest"
)

// benchGetPods is how many pods TestBenchKubectlGet lists.
const benchGetPods, benchGetNamespaces = 5000, 10

// TestBenchKubectlGet times `kubectl get pods -A` (the real kubectl 1.32,
// which asks the server for a Table) beside `skiff get pods -A` (the skiff
// CLI in this process, which lists the pods as JSON and renders the same
// columns itself, api/table) over one API server holding benchGetPods
// pods. kubectl's first run also fetches discovery; the later ones read
// it from its cache, as a student's second command would.
func TestBenchKubectlGet(t *testing.T) {
	requireBench(t)
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(filepath.Join(t.TempDir(), "skiff.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := apiserver.NewRegistry(st, logger)
	if err := reg.EnsureDefaults(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := apiserver.DefaultConfig()
	cfg.Token = "bench-token"
	srv, err := apiserver.New(cfg, reg, logger)
	if err != nil {
		t.Fatal(err)
	}
	local := srv.Local()

	start := time.Now()
	for i := range benchGetNamespaces {
		if _, err := local.Create(ctx, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("bench-%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < benchGetPods; i += 16 {
				p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i), Namespace: fmt.Sprintf("bench-%d", i%benchGetNamespaces),
					Labels: map[string]string{"app": "bench"}},
					Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "nginx:1.27"}}}}
				if _, err := local.Create(ctx, p); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("created %d pods in %v", benchGetPods, time.Since(start).Round(time.Millisecond))

	kc := kubectltest.Serve(t, srv.Handler(), cfg.Token)
	plain := httptest.NewServer(srv.Handler())
	t.Cleanup(plain.Close)

	lines := func(out string) int { return strings.Count(out, "\n") }
	kubectl := func() time.Duration {
		t0 := time.Now()
		out := kc.Must(t, "", "get", "pods", "-A")
		d := time.Since(t0)
		if n := lines(out); n != benchGetPods+1 {
			t.Fatalf("kubectl printed %d lines, want %d", n, benchGetPods+1)
		}
		return d
	}
	skiff := func() time.Duration {
		var out, errb bytes.Buffer
		r := cli.NewRoot(&out, &errb)
		r.NewClient = func() (client.Interface, error) {
			return client.New(client.Config{Server: plain.URL, Token: cfg.Token})
		}
		t0 := time.Now()
		if err := r.Execute(ctx, []string{"get", "pods", "-A"}); err != nil {
			t.Fatalf("skiff get: %v: %s", err, errb.String())
		}
		d := time.Since(t0)
		if n := lines(out.String()); n != benchGetPods+1 {
			t.Fatalf("skiff printed %d lines, want %d", n, benchGetPods+1)
		}
		return d
	}
	// The two answers' sizes: a Table (cells and metadata) and a PodList.
	size := func(accept string) int {
		req, _ := http.NewRequest(http.MethodGet, plain.URL+"/api/v1/pods", nil)
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return len(b)
	}

	const runs = 5
	cold := kubectl()
	var kubectlRuns, skiffRuns []time.Duration
	for range runs {
		kubectlRuns = append(kubectlRuns, kubectl())
		skiffRuns = append(skiffRuns, skiff())
	}
	slices.Sort(kubectlRuns)
	slices.Sort(skiffRuns)
	km, sm := kubectlRuns[runs/2], skiffRuns[runs/2]
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	fmt.Printf("\n| %d pods in %d namespaces | median of %d | min | max |\n|---|---|---|---|\n", benchGetPods, benchGetNamespaces, runs)
	fmt.Printf("| kubectl get pods -A (first run, discovery fetched) | %s | | |\n", ms(cold))
	fmt.Printf("| kubectl get pods -A (discovery cached) | %s | %s | %s |\n", ms(km), ms(kubectlRuns[0]), ms(kubectlRuns[runs-1]))
	fmt.Printf("| skiff get pods -A | %s | %s | %s |\n", ms(sm), ms(skiffRuns[0]), ms(skiffRuns[runs-1]))
	fmt.Printf("\nratio kubectl/skiff (medians): %.2f\n", float64(km)/float64(sm))
	fmt.Printf("answer sizes: Table %d bytes, PodList %d bytes\n",
		size("application/json;as=Table;v=v1;g=meta.k8s.io"), size("application/json"))
}
