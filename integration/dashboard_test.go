package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/testwait"
)

// The dashboard in a real browser (issue 14's "Done when"): headless
// Chromium driven by chromedp against the labs cluster (three nodes, two
// simulated DGX A100 and one without GPUs, real containers): the
// one-time URL, the chain view of a GPU pod step by step against its
// trace, the gRPC sequence with a fault's health change, a scaled
// Deployment's pods arriving live, the control-loop lines, and not one
// request outside the API server. Screenshots go to $SKIFF_TEST_ARTIFACTS
// or the test's artifact directory (go test -artifacts -outputdir DIR).

// chromiumPath finds Debian's chromium (hack/ci-deps.sh installs it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatal("CI is set but chromium is not installed (hack/ci-deps.sh installs it)")
	}
	t.Skip("chromium is not installed (apt-get install chromium, or hack/ci-deps.sh)")
	return ""
}

func artifactDir(t *testing.T) string {
	if d := os.Getenv("SKIFF_TEST_ARTIFACTS"); d != "" {
		d = filepath.Join(d, t.Name())
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.ArtifactDir()
}

// fmtMicros is the page's duration format (app.js fmtMicros).
func fmtMicros(us int64) string {
	neg := ""
	if us < 0 {
		neg, us = "-", -us
	}
	tenths := (us + 50) / 100
	return fmt.Sprintf("%s%d.%dms", neg, tenths/10, tenths%10)
}

func spanMicros(s api.TraceSpan) int64 {
	end := s.End.Time
	if end.IsZero() {
		end = s.Start.Time
	}
	return end.Sub(s.Start.Time).Microseconds()
}

type filterRow struct {
	Node    string   `json:"node"`
	Fit     bool     `json:"fit"`
	Reasons []string `json:"reasons"`
}

func lastSpan(spans []api.TraceSpan, component, step string) (api.TraceSpan, bool) {
	for i := len(spans) - 1; i >= 0; i-- {
		if spans[i].Component == component && spans[i].Step == step {
			return spans[i], true
		}
	}
	return api.TraceSpan{}, false
}

func TestDashboardBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	// The autoscalers sync every 2 s and scale down after a 6 s window
	// (kube-controller-manager's flags), for the autoscaler view and the
	// docs' walkthrough, whose image the nodes pull from a local mirror
	// of registry.k8s.io (phpApacheMirror).
	mirror, hostsDir := phpApacheMirror(t)
	l := startLabsClusterWith(t, labsOptions{gpus: "sim:dgxa100,sim:dgxa100,none", hostIP: labsHostIP, nodeIP: labsNodeIP, nsPrefix: "skl",
		args: []string{"--horizontal-pod-autoscaler-sync-period=" + gpuHPASync.String(), "--horizontal-pod-autoscaler-downscale-stabilization=" + gpuHPAWindow.String(),
			"--registry-hosts-dir=" + hostsDir}})
	art := artifactDir(t)
	bg := context.Background()
	l.sk(t, "apply", "-f", "../examples/lab1-nginx.yaml")
	l.sk(t, "apply", "-f", "../examples/lab2-gpu-pod.yaml")
	l.until(t, 60*time.Second, func(o string) bool { return strings.Contains(o, "Completed") }, "get", "pod", "gpu-test", "-n", labsNS)
	tr, err := l.c.GetTrace(bg, labsNS, "gpu-test")
	if err != nil {
		t.Fatal(err)
	}
	// The agent's start span comes after the container started: wait for it.
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		tr, err = l.c.GetTrace(bg, labsNS, "gpu-test")
		_, ok := lastSpan(tr.Spans, "agent", "start")
		return err == nil && ok, fmt.Sprintf("trace without the start span: %v %+v", err, tr)
	})

	loginURL := strings.TrimSpace(l.sk(t, "dashboard", "pod/gpu-test", "-n", labsNS, "--no-browser"))
	lu, err := url.Parse(loginURL)
	if err != nil || lu.Host != labsNodeIP+":7443" {
		t.Fatalf("skiff dashboard printed %q", loginURL)
	}
	server := lu.Scheme + "://" + lu.Host

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1600, 1000),
		// The cluster CA is not in the browser's store; a student's
		// browser shows the usual warning once.
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.UserDataDir(t.TempDir()),
		// Its own temporary files too (org.chromium.Chromium.*), which a
		// killed browser leaves behind.
		chromedp.Env("TMPDIR="+t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(bg, opts...)
	defer cancelA()
	ctx, cancelC := chromedp.NewContext(actx)
	defer cancelC()
	ctx, cancelT := context.WithTimeout(ctx, 150*time.Second)
	defer cancelT()

	var mu sync.Mutex
	var requests []string
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requests = append(requests, e.Request.URL)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("start the browser: %v", err)
	}
	// run, shot and eval fail the test they are given: a subtest's, inside
	// a subtest (FailNow on the parent from a subtest is a Goexit).
	run := func(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	shot := func(t *testing.T, name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		p := filepath.Join(art, name+".png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	eval := func(t *testing.T, js string, out any) {
		t.Helper()
		if err := evalJS(ctx, js, out); err != nil {
			t.Fatalf("evaluate %s: %v", js, err)
		}
	}
	// waitJS polls js until it is true; on a timeout it says what the
	// page showed (the main element's text).
	waitJS := func(t *testing.T, what, js string, timeout time.Duration) {
		t.Helper()
		testwait.Until(t, timeout, func() (bool, string) {
			var ok bool
			if err := evalJS(ctx, js, &ok); err != nil {
				return false, err.Error()
			}
			var text string
			_ = evalJS(ctx, `document.getElementById("main").innerText.slice(0, 3000)`, &text)
			return ok, what + "; the page shows:\n" + text
		})
	}

	start := time.Now()
	run(t, "open the login URL", chromedp.Navigate(loginURL), chromedp.WaitVisible(chromedp.CSS(`[data-step="0"].shown`)))
	var loc string
	eval(t, `location.href`, &loc)
	if strings.Contains(loc, "code=") || !strings.HasSuffix(loc, "/dashboard/#/chain/gpu-demo/gpu-test") {
		t.Errorf("landed on %q: want the chain view without the code", loc)
	}
	var pageLoad struct {
		LoadMs    float64 `json:"loadMs"`
		Bytes     float64 `json:"bytes"`
		Resources int     `json:"resources"`
	}
	eval(t, `(() => { const n = performance.getEntriesByType("navigation")[0]; const r = performance.getEntriesByType("resource").filter((e) => !e.name.includes("api/"));
		return { loadMs: n.loadEventEnd - n.startTime, bytes: n.encodedBodySize + r.reduce((a, e) => a + e.encodedBodySize, 0), resources: r.length }; })()`, &pageLoad)
	t.Logf("page load: %.1f ms (login redirect included), %.0f bytes in %d files besides the page", pageLoad.LoadMs, pageLoad.Bytes, pageLoad.Resources)

	t.Run("ChainView", func(t *testing.T) {
		// Every span the page shows: its duration and node as the trace's.
		type shown struct {
			Index int    `json:"index"`
			Dur   string `json:"dur"`
			Node  string `json:"node"`
		}
		var spans []shown
		eval(t, `[...document.querySelectorAll("[data-span]")].map((e) => ({index: +e.dataset.span, dur: e.querySelector("[data-duration]").textContent, node: e.querySelector("[data-node]")?.dataset.node || ""}))`, &spans)
		seen := map[string]bool{}
		for _, s := range spans {
			if s.Index < 0 || s.Index >= len(tr.Spans) {
				t.Fatalf("span %d shown; the trace has %d", s.Index, len(tr.Spans))
			}
			want := tr.Spans[s.Index]
			if s.Dur != fmtMicros(spanMicros(want)) || s.Node != want.Node {
				t.Errorf("span %d (%s %s): page %s on %q, trace %s on %q", s.Index, want.Component, want.Step, s.Dur, s.Node, fmtMicros(spanMicros(want)), want.Node)
			}
			seen[want.Component+"/"+want.Step] = true
		}
		for _, w := range []string{"apiserver/create", "scheduler/filter", "scheduler/score", "scheduler/bind", "agent/create", "agent/start"} {
			if !seen[w] {
				t.Errorf("the chain shows no %s span (shown: %v)", w, seen)
			}
		}
		bind, _ := lastSpan(tr.Spans, "scheduler", "bind")
		filter, _ := lastSpan(tr.Spans, "scheduler", "filter")
		var rows []filterRow
		b, _ := json.Marshal(filter.Details["nodes"])
		if err := json.Unmarshal(b, &rows); err != nil || len(rows) != 3 {
			t.Fatalf("the trace's filter rows %s (%v): want 3", b, err)
		}
		create, _ := lastSpan(tr.Spans, "agent", "create")
		var alloc map[string]struct {
			Request []string `json:"request"`
		}
		b, _ = json.Marshal(create.Details["allocate"])
		if err := json.Unmarshal(b, &alloc); err != nil || len(alloc["nvidia.com/gpu"].Request) != 1 {
			t.Fatalf("the trace's allocation %s (%v): want one GPU", b, err)
		}
		wantIDs := alloc["nvidia.com/gpu"].Request

		// Walk the seven steps with the keyboard and the Next button.
		for i := 0; i < 7; i++ {
			if i > 0 {
				if i%2 == 1 {
					run(t, "next (arrow key)", chromedp.KeyEvent(kb.ArrowRight))
				} else {
					run(t, "next (button)", chromedp.Click(chromedp.CSS(`#next`)))
				}
			}
			run(t, fmt.Sprintf("step %d", i+1), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-step="%d"].shown`, i))))
			var explain string
			eval(t, `document.getElementById("explain").textContent`, &explain)
			if len(explain) < 40 {
				t.Errorf("step %d: side panel %q", i+1, explain)
			}
			switch i {
			case 1:
				var rv string
				eval(t, `document.querySelector("[data-step='1'] [data-rv]").textContent`, &rv)
				if rv != tr.Spans[0].Details["resourceVersion"] || rv == "" {
					t.Errorf("step 2: resourceVersion %q, trace %v", rv, tr.Spans[0].Details["resourceVersion"])
				}
			case 2:
				type cand struct {
					Node    string   `json:"node"`
					Fit     bool     `json:"fit"`
					Chosen  bool     `json:"chosen"`
					Reasons []string `json:"reasons"`
				}
				var cands []cand
				eval(t, `[...document.querySelectorAll("[data-candidate]")].map((e) => ({node: e.dataset.candidate, fit: e.dataset.fit === "true", chosen: e.dataset.chosen === "true", reasons: [...e.querySelectorAll("[data-reason]")].map((r) => r.textContent)}))`, &cands)
				if len(cands) != 3 {
					t.Fatalf("step 3: %d candidate nodes, want 3: %+v", len(cands), cands)
				}
				for j, c := range cands {
					r := rows[j]
					if c.Node != r.Node || c.Fit != r.Fit || c.Chosen != (r.Node == bind.Node) || !slices.Equal(c.Reasons, r.Reasons) && len(r.Reasons) > 0 {
						t.Errorf("step 3: candidate %+v, trace %+v (bound to %s)", c, r, bind.Node)
					}
				}
				fits := 0
				for _, c := range cands {
					if c.Fit {
						fits++
					}
				}
				if fits != 2 {
					t.Errorf("step 3: %d nodes fit, want the two DGX: %+v", fits, cands)
				}
				shot(t, "chain-scheduler")
			case 4:
				var ids []string
				eval(t, `[...document.querySelectorAll("[data-step='4'] [data-device]")].map((e) => e.dataset.device)`, &ids)
				if !slices.Equal(ids, wantIDs) {
					t.Errorf("step 5: devices %v, trace %v", ids, wantIDs)
				}
				shot(t, "chain-device-plugin")
			case 5:
				var cdi string
				eval(t, `document.querySelector("[data-step='5']").textContent`, &cdi)
				if !strings.Contains(cdi, "/dev/nvidia") {
					t.Errorf("step 6: no device nodes in the CDI edits: %.300s", cdi)
				}
			}
		}
		first, last := tr.Spans[0].Start.Time, tr.Spans[0].Start.Time
		for _, s := range tr.Spans {
			if s.Start.Before(first) {
				first = s.Start.Time
			}
			e := s.End.Time
			if e.IsZero() {
				e = s.Start.Time
			}
			if e.After(last) {
				last = e
			}
		}
		var e2e string
		eval(t, `document.getElementById("e2e").textContent`, &e2e)
		if e2e != fmtMicros(last.Sub(first).Microseconds()) {
			t.Errorf("footer end to end %q, trace %s", e2e, fmtMicros(last.Sub(first).Microseconds()))
		}
		t.Logf("gpu-test end to end: %s (the course says 1-5 s)", e2e)
		shot(t, "chain-start")
	})

	bind, _ := lastSpan(tr.Spans, "scheduler", "bind")
	t.Cleanup(func() { _, _ = l.try("gpu", "fault", bind.Node, "3", "--clear") })
	t.Run("SequenceView", func(t *testing.T) {
		eval(t, `location.hash = "#/sequence/`+bind.Node+`"`, nil)
		run(t, "sequence",
			chromedp.WaitVisible(chromedp.CSS(`.msg[data-method="Allocate"]`)))
		var methods []string
		eval(t, `[...new Set([...document.querySelectorAll(".msg[data-method]")].map((e) => e.dataset.method).filter(Boolean))]`, &methods)
		for _, m := range []string{"Register", "GetDevicePluginOptions", "ListAndWatch", "Allocate"} {
			if !slices.Contains(methods, m) {
				t.Errorf("sequence of %s lacks %s: %v", bind.Node, m, methods)
			}
		}
		run(t, "walk", chromedp.Click(chromedp.CSS(`#next`)), chromedp.KeyEvent(kb.ArrowRight), chromedp.KeyEvent(kb.ArrowLeft))
		l.sk(t, "gpu", "fault", bind.Node, "3", "--xid", "79")
		waitJS(t, "the fault's health change on the page", `[...document.querySelectorAll(".msg.health")].some((e) => e.textContent.includes("Unhealthy"))`, 20*time.Second)
		eval(t, `currentPlayer.show((currentPlayer.i = currentPlayer.n - 1)), true`, nil)
		shot(t, "sequence-fault")
	})

	t.Run("ClusterLive", func(t *testing.T) {
		eval(t, `location.hash = "#/cluster"`, nil)
		run(t, "cluster", chromedp.WaitVisible(chromedp.CSS(`[data-node-card]`)))
		var nodes int
		eval(t, `document.querySelectorAll("[data-node-card]").length`, &nodes)
		if nodes != 3 {
			t.Errorf("%d nodes on the page, want 3", nodes)
		}
		waitJS(t, "an unhealthy GPU on the page", `document.querySelectorAll("[data-gpu][data-healthy='false']").length >= 1`, 20*time.Second)
		count := `[...document.querySelectorAll("[data-pod^='gpu-demo/nginx-demo-']")].length`
		var before int
		eval(t, count, &before)
		l.sk(t, "scale", "deployment", "nginx-demo", "-n", labsNS, "--replicas=5")
		waitJS(t, "five nginx-demo pods on the page", count+" === 5", 30*time.Second)
		shot(t, "cluster")
		t.Logf("nginx-demo pods on the page: %d, then 5 after the scale", before)

		// GPU sharing: lab-2's GPUs time-sliced 4 ways, each GPU card split
		// into its replicas (issue 22).
		l.sk(t, "apply", "-f", "../examples/gpu-sharing/nvidia-device-plugin-config.yaml")
		l.sk(t, "label", "node", "lab-2", "nvidia.com/device-plugin.config=time-sliced-4")
		waitJS(t, "lab-2's GPUs split into 32 replicas on the page",
			`document.querySelectorAll("[data-node-card='lab-2'] [data-subdevice]").length === 32`, 30*time.Second)
		shot(t, "cluster-time-sliced")
		l.sk(t, "label", "node", "lab-2", "nvidia.com/device-plugin.config-")
		waitJS(t, "lab-2's GPUs whole again", `document.querySelectorAll("[data-node-card='lab-2'] [data-subdevice]").length === 0`, 30*time.Second)
	})

	t.Run("ControlLoops", func(t *testing.T) {
		eval(t, `location.hash = "#/loops"`, nil)
		// Ready, not visible: on a long-lived cluster the newest records may
		// all be other controllers' (hidden here), leaving the list empty
		// until the scale below.
		run(t, "loops", chromedp.WaitReady(chromedp.CSS(`#recs`)))
		var seq float64
		eval(t, `Math.max(0, ...[...document.querySelectorAll("[data-rec]")].map((e) => +e.dataset.rec))`, &seq)
		l.sk(t, "scale", "deployment", "nginx-demo", "-n", labsNS, "--replicas=2")
		waitJS(t, "the replicaset controller's line for the scale down",
			fmt.Sprintf(`[...document.querySelectorAll("[data-rec][data-controller='replicaset-controller']")].some((e) => +e.dataset.rec > %v && e.dataset.desired === "2" && e.dataset.acted === "true")`, seq), 20*time.Second)
		waitJS(t, "the deployment controller's line",
			fmt.Sprintf(`[...document.querySelectorAll("[data-rec][data-controller='deployment-controller']")].some((e) => +e.dataset.rec > %v)`, seq), 20*time.Second)
		shot(t, "loops")
	})

	t.Run("HPAView", func(t *testing.T) {
		// gpu_hpa_test.go's inference Deployment (pods at 90 % GPU) and its
		// autoscaler on DCGM_FI_DEV_GPU_UTIL (AverageValue 70, max 2).
		hpaStart := time.Now()
		f := filepath.Join(t.TempDir(), "infer.yaml")
		if err := os.WriteFile(f, []byte(gpuHPAApp), 0o644); err != nil {
			t.Fatal(err)
		}
		l.sk(t, "apply", "-f", f, "-n", labsNS)
		defer l.try("delete", "-f", f, "-n", labsNS) //nolint:errcheck // cleanup
		eval(t, `location.hash = "#/hpa"`, nil)
		// Found and clicked in one step in the page: the list is redrawn as
		// the autoscaler's status changes, and chromedp.Click's node, found
		// one round trip before its click, may be gone by then.
		waitJS(t, "the autoscaler in the view's list, clicked",
			`(() => { const a = document.querySelector("[data-hpa='gpu-demo/infer'] a"); if (a) a.click(); return !!a; })()`, 20*time.Second)
		// Each pod's GPU utilisation as points, above the target line, and
		// the scale-up marked on the replica plot, with its reason on hover.
		waitJS(t, "the plot of the scale-up",
			`[...document.querySelectorAll("svg[data-plot='metric'] circle[data-point^='infer-']")].some((c) => +c.dataset.value > 70) &&
			[...document.querySelectorAll("svg[data-plot='replicas'] [data-decision-mark][data-from='1'][data-to='2']")].some((m) => m.textContent.includes("scaled 1 -> 2 (pods metric DCGM_FI_DEV_GPU_UTIL above target)"))`, 40*time.Second)
		var before struct{ Points, Syncs, Marks int }
		const counts = `({ points: document.querySelectorAll("svg[data-plot='metric'] circle[data-point]").length,
			syncs: document.querySelectorAll("svg[data-plot='replicas'] circle[data-replicas]").length,
			marks: document.querySelectorAll("svg[data-plot='metric'] line.mark").length })`
		eval(t, counts, &before)
		if before.Marks < 1 || before.Syncs < 2 {
			t.Errorf("the plot: %+v, want a rescale marked and at least two syncs", before)
		}
		// Every mark is a sync that rescaled (its steps end in "scaled"),
		// never one whose metric was not there yet.
		var unscaled []string
		eval(t, `[...document.querySelectorAll("svg [data-decision-mark], svg line.mark")].map((m) => m.textContent).filter((s) => !/\nscaled \d+ -> \d+ \(/.test(s))`, &unscaled)
		if len(unscaled) > 0 {
			t.Errorf("marks of syncs that did not rescale: %q", unscaled)
		}
		// Live: the next syncs arrive on the page without a reload, every
		// one a point, as many as the controller's decisions.
		waitJS(t, "more syncs on the plot", fmt.Sprintf(`document.querySelectorAll("svg[data-plot='replicas'] circle[data-replicas]").length > %d`, before.Syncs), 20*time.Second)
		shot(t, "hpa")
		var page struct{ Syncs int }
		eval(t, `({ syncs: document.querySelectorAll("[data-decision]").length })`, &page)
		tr, err := l.c.GetObjectTrace(bg, api.MustKindOf(&api.HorizontalPodAutoscaler{}), labsNS, "infer")
		if err != nil {
			t.Fatal(err)
		}
		if n := len(api.HPADecisions(tr.Spans)); page.Syncs < 2 || page.Syncs > n {
			t.Errorf("%d decisions listed on the page, the autoscaler's trace has %d", page.Syncs, n)
		}
		t.Logf("MEASURE the autoscaler view: apply → scale-up plotted and marked, and a later sync drawn live, in %v", time.Since(hpaStart).Round(time.Millisecond))
	})

	t.Run("PHPApacheWalkthrough", func(t *testing.T) { phpApacheWalkthrough(t, l, mirror) }) // hpa_php_apache_test.go

	t.Run("WriteToPage", func(t *testing.T) { measureWriteToPage(t, l, ctx, eval) })

	mu.Lock()
	defer mu.Unlock()
	var outside []string
	for _, r := range requests {
		u, err := url.Parse(r)
		if err != nil || (u.Scheme != "data" && u.Scheme+"://"+u.Host != server) {
			outside = append(outside, r)
		}
	}
	if len(outside) > 0 {
		t.Errorf("the page made requests outside the server: %v", outside)
	}
	if len(requests) == 0 {
		t.Error("no requests recorded: the network listener saw nothing")
	}
	t.Logf("%d requests, all to %s; browser part took %s", len(requests), server, time.Since(start).Round(time.Millisecond))
}

// evalJS runs js in the page and decodes its result into out (nil: dropped).
func evalJS(ctx context.Context, js string, out any) error {
	v, err := chromedp.Run(ctx, chromedp.Evaluate[any](js))
	if err != nil || out == nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// measureWriteToPage creates pods (Pending: a node selector no node has)
// and times each from the API write to its arrival at a watcher (what
// `skiff get -w` does) and to its element on the page, in the same run.
func measureWriteToPage(t *testing.T, l *labsCluster, ctx context.Context, eval func(*testing.T, string, any)) {
	bg := context.Background()
	w, err := l.c.Watch(bg, api.MustKindOf(&api.Pod{}), labsNS, api.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	arrived := make(chan string, 64)
	go func() {
		for ev := range w.Events() {
			if ev.Type == api.Added && ev.Object != nil {
				arrived <- ev.Object.GetObjectMeta().Name
			}
		}
	}()
	if err := evalJS(ctx, `location.hash = "#/cluster"`, nil); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-node-card]`))); err != nil {
		t.Fatal(err)
	}
	// The page notes when each pod's element first appears.
	eval(t, `(() => { window.seenAt = {}; new MutationObserver(() => { for (const e of document.querySelectorAll("[data-pod]")) if (!(e.dataset.pod in seenAt)) seenAt[e.dataset.pod] = Date.now(); }).observe(document.body, {subtree: true, childList: true}); return true; })()`, nil)
	const n = 5
	var toWatch, toPage []time.Duration
	for i := range n {
		name := fmt.Sprintf("dash-latency-%d", i)
		pod := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: labsNS},
			Spec: api.PodSpec{NodeSelector: map[string]string{"skiff.dev/no-such-node": "x"}, Containers: []api.Container{{Name: "c", Image: "busybox"}}}}
		t0 := time.Now()
		if _, err := l.c.Create(bg, pod); err != nil {
			t.Fatal(err)
		}
		var tw time.Time
		testwait.Until(t, 10*time.Second, func() (bool, string) {
			select {
			case got := <-arrived:
				if got == name {
					tw = time.Now()
					return true, ""
				}
			case <-time.After(100 * time.Millisecond):
			}
			return false, "watch event for " + name
		})
		var ms float64
		testwait.Until(t, 10*time.Second, func() (bool, string) {
			eval(t, fmt.Sprintf(`seenAt[%q] || 0`, labsNS+"/"+name), &ms)
			return ms > 0, name + " on the page"
		})
		tp := time.UnixMilli(int64(ms))
		toWatch = append(toWatch, tw.Sub(t0))
		toPage = append(toPage, tp.Sub(t0))
	}
	med := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	t.Logf("API write → watcher (skiff get -w's path): median %s %v", med(toWatch).Round(100*time.Microsecond), toWatch)
	t.Logf("API write → page element (SSE, render debounce 30 ms): median %s %v", med(toPage).Round(time.Millisecond), toPage)
	for i := range n {
		_ = l.c.Delete(bg, api.MustKindOf(&api.Pod{}), labsNS, fmt.Sprintf("dash-latency-%d", i), api.DeleteOptions{})
	}
}
