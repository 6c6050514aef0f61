package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/internal/testwait"
)

// The configured scheduler on the real stack (issue 24's "Done when"): a
// KubeSchedulerConfiguration file (--scheduler-config,
// examples/scheduler/extender/two-profiles.yaml) with a second
// profile, binpack-scheduler (MostAllocated), and the course's Python
// NVLink extender (examples/scheduler/extender, run by python3); two
// nodes on real containerd, a simulated DGX A100 (eight GPUs joined by
// NVLink) and a workstation of four RTX 4090s (PCIe only). Pods applied
// by the real kubectl pick a profile with spec.schedulerName:
//   - one naming no profile stays Pending, untouched (as in Kubernetes);
//   - two CPU pods (not the extender's: it manages nvidia.com/gpu) beside
//     a pod holding half a CPU on dgx: the default profile spreads to
//     rtx, binpack-scheduler packs onto dgx;
//   - a 2-GPU pod preferring rtx: the extender filters rtx out (no two
//     NVLink-connected GPUs), the pod runs on dgx, and describe pod shows
//     the extender's answer beside the plugins';
//   - the extender stopped (ignorable: false): a GPU pod stays Pending,
//     PodScheduled False, SchedulerError with the connection error.
func TestConfiguredScheduler(t *testing.T) {
	e := newCtrdEnv(t)
	gpuImportImage(t, e.runtime(t))
	ext, url := startNVLinkExtender(t)
	// The lab's file, its urlPrefix pointed at the port the script chose.
	raw, err := os.ReadFile("../examples/scheduler/extender/two-profiles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "urlPrefix: http://127.0.0.1:8888\n") {
		t.Fatal("two-profiles.yaml no longer names http://127.0.0.1:8888: update this test")
	}
	cfgFile := filepath.Join(t.TempDir(), "scheduler-config.yaml")
	if err := os.WriteFile(cfgFile, []byte(strings.Replace(string(raw), "http://127.0.0.1:8888", url, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cp, c := startControlPlane(t, func(cfg *controlplane.Config) { cfg.SchedulerConfig = cfgFile })
	gangStartNode(t, cp, e, "dgx", "sim:dgxa100", nil)
	gangStartNode(t, cp, e, "rtx", "sim:rtx4090x4", nil)
	gangWaitGPUs(t, c, "dgx", 8)
	gangWaitGPUs(t, c, "rtx", 4)
	k := kubectlFor(t, cp)
	sk := skiffCLI(t, cp)

	k.Must(t, schedPod("nobody", "no-such-scheduler", "", "100m", 0, ""), "apply", "-f", "-")
	k.Must(t, schedPod("anchor", "", "dgx", "500m", 0, ""), "apply", "-f", "-")
	waitRunning(t, c, "anchor")
	k.Must(t, schedPod("spread", "default-scheduler", "", "100m", 0, "")+"---\n"+
		schedPod("pack", "binpack-scheduler", "", "100m", 0, ""), "apply", "-f", "-")
	if n := waitRunning(t, c, "spread").Spec.NodeName; n != "rtx" {
		t.Errorf("default-scheduler (LeastAllocated) put spread on %q, want rtx", n)
	}
	if n := waitRunning(t, c, "pack").Spec.NodeName; n != "dgx" {
		t.Errorf("binpack-scheduler (MostAllocated) put pack on %q, want dgx beside anchor", n)
	}
	// Created before the others were scheduled: by now any profile would
	// have answered it. None did, as in Kubernetes.
	if p := podNamed(t, c, "nobody"); p.Spec.NodeName != "" || len(p.Status.Conditions) != 0 || len(eventsFor(t, c, gpuNS, "nobody")) != 0 {
		t.Errorf("a pod naming no profile was touched: node %q conditions %+v", p.Spec.NodeName, p.Status.Conditions)
	}

	k.Must(t, schedPod("nvlink", "", "", "100m", 2, "rtx"), "apply", "-f", "-")
	if n := waitRunning(t, c, "nvlink").Spec.NodeName; n != "dgx" {
		t.Errorf("the extender's filter did not keep nvlink off rtx: on %q", n)
	}
	out, err := sk("describe", "pod", "nvlink")
	if err != nil {
		t.Fatalf("describe pod: %v\n%s", err, out)
	}
	for _, want := range []string{
		"extender " + url + "  node(s) had fewer than 2 free NVLink-connected GPUs",
		"Selected node: dgx",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe pod nvlink lacks %q:\n%s", want, out)
		}
	}

	// The extender goes away; ignorable: false keeps GPU pods waiting.
	if err := ext.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = ext.Wait()
	k.Must(t, schedPod("stranded", "", "", "100m", 1, ""), "apply", "-f", "-")
	want := fmt.Sprintf(`Post "%s/filter": dial tcp %s: connect: connection refused`, url, strings.TrimPrefix(url, "http://"))
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		p := podNamed(t, c, "stranded")
		for _, cond := range p.Status.Conditions {
			if cond.Type == api.PodScheduled {
				return cond.Status == api.ConditionFalse && cond.Reason == "SchedulerError" && cond.Message == want && p.Spec.NodeName == "",
					fmt.Sprintf("node %q, PodScheduled %s %s %q", p.Spec.NodeName, cond.Status, cond.Reason, cond.Message)
			}
		}
		return false, "no PodScheduled condition yet"
	})
}

// schedPod is a pod for kubectl apply: schedulerName ("" the default),
// nodeName ("" scheduled), a CPU request, GPUs, and a node it prefers.
func schedPod(name, scheduler, node, cpu string, gpus int, prefer string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 1\n", name, gpuNS)
	if scheduler != "" {
		fmt.Fprintf(&b, "  schedulerName: %s\n", scheduler)
	}
	if node != "" {
		fmt.Fprintf(&b, "  nodeName: %s\n", node)
	}
	if prefer != "" {
		fmt.Fprintf(&b, `  affinity:
    nodeAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        preference:
          matchExpressions:
          - {key: kubernetes.io/hostname, operator: In, values: [%s]}
`, prefer)
	}
	image := "busybox:1.36"
	if gpus > 0 {
		image = gpuImage
	}
	fmt.Fprintf(&b, "  containers:\n  - name: main\n    image: %s\n    command: [sh, -c, %q]\n    resources:\n      requests: {cpu: %s}\n", image, gpuSleep, cpu)
	if gpus > 0 {
		fmt.Fprintf(&b, "      limits: {nvidia.com/gpu: %d}\n", gpus)
	}
	return b.String()
}

func podNamed(t *testing.T, c client.Interface, name string) *api.Pod {
	t.Helper()
	p, err := client.Get[*api.Pod](context.Background(), c, gpuNS, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func waitRunning(t *testing.T, c *client.Client, name string) *api.Pod {
	t.Helper()
	return draWaitPhase(t, c, gpuNS, name, api.PodRunning, 30*time.Second)
}

// startNVLinkExtender runs the course's Python extender on a free port
// (it prints where it listens once bound) until the test ends.
func startNVLinkExtender(t *testing.T) (*exec.Cmd, string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 missing: run hack/ci-deps.sh")
		}
		t.Skip("python3 missing: the Python extender example cannot run")
	}
	cmd := exec.Command(py, "../examples/scheduler/extender/nvlink_extender.py", "--port", "0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the extender exited before listening: %v", err)
	}
	_, url, ok := strings.Cut(strings.TrimSpace(line), "listening on ")
	if !ok {
		t.Fatalf("the extender printed %q", line)
	}
	return cmd, url
}
