package scheduler

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/controlplane/scheduler/config"
)

// The course's Python extender (examples/scheduler/extender), run by the
// real python3 with the example's own scheduler-config.yaml (only its
// urlPrefix pointed at the port the script chose). Two nodes of four free
// GPUs: on "pcie" no two are joined by NVLink, on "nvlink" 0-1 and 2-3
// are. A 2-GPU pod that prefers zone a, where "pcie" is (node affinity,
// weight 100): without the extender it goes there; with it, the extender
// filters "pcie" out with its reason and scores "nvlink", and the pod goes
// to "nvlink". The explanation (describe pod, trace pod) shows both.
func TestPythonNVLinkExtender(t *testing.T) {
	url := startPythonExtender(t)
	raw, err := os.ReadFile("../../examples/scheduler/extender/scheduler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "urlPrefix: http://127.0.0.1:8888\n") {
		t.Fatal("scheduler-config.yaml no longer names http://127.0.0.1:8888: update this test")
	}
	cfg := parseConfig(t, strings.Replace(string(raw), "http://127.0.0.1:8888", url, 1))
	nodes := func() []*api.Node {
		return []*api.Node{
			nvlinkNode(t, "nvlink", [][2]int{{0, 1}, {2, 3}}),
			nvlinkNode(t, "pcie", nil, labels("topology.kubernetes.io/zone", "a")),
		}
	}
	pod := func() *api.Pod {
		return gpuPod("p", 2, func(p *api.Pod) {
			p.Spec.Affinity = &api.Affinity{NodeAffinity: &api.NodeAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []api.PreferredSchedulingTerm{{Weight: 100, Preference: api.NodeSelectorTerm{
					MatchExpressions: []api.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: "In", Values: []string{"a"}}},
				}}},
			}}
		})
	}

	without := newFixture(t, config.Default(), nodes()[0], nodes()[1], pod())
	if res := without.step(); res.SelectedNode != "pcie" {
		t.Fatalf("without the extender the pod went to %q; the test needs a case where the extender changes the placement (want pcie)\n%s", res.SelectedNode, Explain(res))
	}

	f := newFixture(t, cfg, nodes()[0], nodes()[1], pod())
	res := f.step()
	out := Explain(res)
	if res.SelectedNode != "nvlink" {
		t.Fatalf("with the Python extender the pod went to %q, want nvlink\n%s", res.SelectedNode, out)
	}
	for _, want := range []string{
		"pcie    no      extender " + url + "  node(s) had fewer than 2 free NVLink-connected GPUs",
		"extender " + url,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explanation lacks %q:\n%s", want, out)
		}
	}
	// Its score: the largest free NVLink group (2 of 8 → 2) × 10 × weight 5.
	if !strings.Contains(out, "2    20          5       100") {
		t.Errorf("explanation lacks the extender's score 2 (×10 ×5 = 100) for nvlink:\n%s", out)
	}
	tr, err := f.c.GetTrace(f.ctx, "gpu-demo", "p")
	if err != nil {
		t.Fatal(err)
	}
	if got := api.ExplainSchedulingTrace("gpu-demo/p", tr.Spans); got != out {
		t.Errorf("the trace's explanation (describe pod, trace pod) differs:\n%s\n---\n%s", got, out)
	}

	// A pod without GPUs is not the extender's (managedResources): it is
	// not asked, and the pod is scheduled by the plugins alone.
	f.add(gpuPod("cpu-only", 0))
	if res := f.step(); res.SelectedNode == "" || strings.Contains(Explain(res), "extender ") {
		t.Errorf("a pod without GPUs: selected %q, explanation:\n%s", res.SelectedNode, Explain(res))
	}
}

// startPythonExtender runs nvlink_extender.py on a free port and returns
// its URL once it listens (the script prints it).
func startPythonExtender(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3 missing: run hack/ci-deps.sh")
		}
		t.Skipf("python3 missing: the Python extender example cannot run")
	}
	cmd := exec.Command(py, "../../examples/scheduler/extender/nvlink_extender.py", "--port", "0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &logWriter{t: t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// The first line says where it listens; it is printed once the socket
	// is bound, so no polling.
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the extender exited before listening: %v", err)
	}
	_, url, ok := strings.Cut(strings.TrimSpace(line), "listening on ")
	if !ok {
		t.Fatalf("the extender printed %q", line)
	}
	return url
}

// logWriter sends the extender's request log to the test's log.
type logWriter struct{ t *testing.T }

func (w *logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// nvlinkNode is a node of four free GPUs whose annotation joins the
// given pairs by NVLink (NV12) and everything else through PCIe (PIX).
func nvlinkNode(t *testing.T, name string, pairs [][2]int, edit ...func(*api.Node)) *api.Node {
	topo := gputopology.NewTopology(4)
	for i := range 4 {
		for j := i + 1; j < 4; j++ {
			topo.Set(i, j, gputopology.Link{PCIe: gputopology.PIX})
		}
	}
	for _, p := range pairs {
		topo.Set(p[0], p[1], gputopology.Link{NVLinks: 12, PCIe: gputopology.PIX})
	}
	ng := gputopology.NodeGPUs{Topology: topo, Healthy: []int{0, 1, 2, 3}, Free: []int{0, 1, 2, 3}}
	for i := range 4 {
		ng.Devices = append(ng.Devices, gputopology.NodeGPU{Index: i, UUID: name + "-gpu-" + string(rune('0'+i)), Name: "NVIDIA A100-SXM4-40GB", Healthy: true})
	}
	b, err := json.Marshal(ng)
	if err != nil {
		t.Fatal(err)
	}
	return gpuNode(name, 4, append(edit, func(n *api.Node) {
		n.Annotations = map[string]string{gputopology.AnnotationTopology: string(b)}
	})...)
}
