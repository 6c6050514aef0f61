package nvidiasmi

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/usage"
	"skiff.dev/skiff/internal/testwait"
)

// container is what one container of a simulated node sees: the records
// of its devices, and the scripts, over a load root shared with its node.
type container struct {
	nvidiaSMI, gpuLoad string
}

func newContainer(t *testing.T, root string, devs []gpu.Device, sds ...gpu.SubDevice) container {
	t.Helper()
	recs := t.TempDir()
	for _, sd := range sds {
		_, topo := allocated(t, "dgxa100")
		if err := os.WriteFile(filepath.Join(recs, SubRecordName(sd)), SubRecord(devs[sd.ParentIndex], sd, topo), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := t.TempDir()
	c := container{nvidiaSMI: filepath.Join(bin, "nvidia-smi"), gpuLoad: filepath.Join(bin, "gpu-load")}
	os.WriteFile(c.nvidiaSMI, DirScript(recs, root), 0o755)
	os.WriteFile(c.gpuLoad, GPULoadScript(recs, root), 0o755)
	return c
}

// start runs gpu-load in the background, in a process group of its own
// (its sleep too), killed whole at cleanup. Output goes to a file: a pipe
// would keep Wait waiting for the sleep.
func start(t *testing.T, sh []string, script string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(sh[0], append(append(sh[1:], script), args...)...)
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			t.Logf("%v: %s", args, b)
		}
	})
	return cmd
}

func gpu0(t *testing.T, m *usage.Meter) usage.GPUSample {
	t.Helper()
	s, err := m.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s.GPUs[0]
}

// TestGPULoadTimeSliced: two containers with replicas of one GPU. Their
// loads share the SMs, each one's nvidia-smi shows the whole GPU busy,
// a third allocation past what is left fails with CUDA's words, a load
// killed -9 is gone at once, and one ended with SIGTERM cleans up.
func TestGPULoadTimeSliced(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(filepath.Base(sh[0]), func(t *testing.T) {
			devs, _ := allocated(t, "dgxa100", 0, 1, 2, 3, 4, 5, 6, 7)
			root := t.TempDir()
			layout, _ := gpu.Replicas(devs, gpu.SharingTimeSlicing, 4, "nvidia.com/gpu")
			if err := usage.PrepareDirs(root, layout); err != nil {
				t.Fatal(err)
			}
			src := simSource(t)
			m, _ := usage.New(usage.Config{Source: src, Root: root, Layout: func() []gpu.SubDevice { return layout }})
			a := newContainer(t, root, devs, layout[0])
			b := newContainer(t, root, devs, layout[1])

			la := start(t, sh, a.gpuLoad, "--util", "60", "--mem", "30000")
			testwait.For(t, 10*time.Second, "container a's load", func() bool { return gpu0(t, m).MemoryUsedMiB == 30000 })
			start(t, sh, b.gpuLoad, "--util=90", "--mem=8000", "--seconds", "600")
			testwait.For(t, 10*time.Second, "container b's load", func() bool { return gpu0(t, m).MemoryUsedMiB == 38000 })
			g := gpu0(t, m)
			if g.UtilPercent != 100 || g.Devices[0].UtilPercent != 40 || g.Devices[1].UtilPercent != 60 {
				t.Errorf("GPU %d%%, replicas %d%% %d%%; want 100, 40, 60", g.UtilPercent, g.Devices[0].UtilPercent, g.Devices[1].UtilPercent)
			}
			out, code := run(t, sh, b.nvidiaSMI, "--query-gpu=utilization.gpu,memory.used,memory.total,power.draw,temperature.gpu", "--format=csv,noheader,nounits")
			want := fmt.Sprintf("100, 38000, 40960, %d.00, %d\n", usage.PowerW(400, 100), usage.TemperatureC(0, 100))
			if code != 0 || out != want {
				t.Errorf("nvidia-smi in b: %d %q, want %q", code, out, want)
			}
			if out, _ := run(t, sh, b.nvidiaSMI); !strings.Contains(out, "38000MiB /  40960MiB") || !strings.Contains(out, "100%") {
				t.Errorf("nvidia-smi table:\n%s", out)
			}

			c := newContainer(t, root, devs, layout[2])
			out, code = run(t, sh, c.gpuLoad, "--util", "10", "--mem", "4000", "--seconds", "1")
			if code != 1 || !strings.HasPrefix(out, OOMMessage+"\n") || !strings.Contains(out, "2960 MiB free of 40960 MiB; others hold 38000 MiB") {
				t.Errorf("third load: exit %d\n%s", code, out)
			}

			la.Process.Signal(syscall.SIGKILL)
			la.Wait()
			testwait.For(t, 10*time.Second, "a's load gone after kill -9", func() bool { return gpu0(t, m).MemoryUsedMiB == 8000 })
			if g := gpu0(t, m); g.UtilPercent != 90 {
				t.Errorf("after a's kill: GPU %d%%, want b's 90", g.UtilPercent)
			}
			out, code = run(t, sh, c.gpuLoad, "--util", "10", "--mem", "4000", "--seconds", "0")
			if code != 0 || !strings.Contains(out, "10% of the SMs, 4000 MiB") {
				t.Errorf("third load after a's death: %d\n%s", code, out)
			}
		})
	}
}

// TestGPULoadMPSLimits: an MPS share caps the SMs and the memory, and the
// container's CUDA_MPS_* environment can only lower them.
func TestGPULoadMPSLimits(t *testing.T) {
	sh := shells(t)[0]
	devs, _ := allocated(t, "dgxa100", 0, 1, 2, 3, 4, 5, 6, 7)
	root := t.TempDir()
	layout, _ := gpu.Replicas(devs, gpu.SharingMPS, 4, "nvidia.com/gpu")
	usage.PrepareDirs(root, layout)
	a := newContainer(t, root, devs, layout[0])
	out, code := run(t, sh, a.gpuLoad, "--util", "80", "--mem", "10241", "--seconds", "0")
	if code != 1 || !strings.Contains(out, OOMMessage) || !strings.Contains(out, "the device allows 10240 MiB") {
		t.Errorf("past the pinned limit: %d\n%s", code, out)
	}
	out, code = run(t, sh, a.gpuLoad, "--util", "80", "--mem", "100", "--seconds", "0")
	if code != 0 || !strings.Contains(out, "25% of the SMs, 100 MiB") {
		t.Errorf("80%% in a 25%% share: %d\n%s", code, out)
	}
	cmd := exec.Command(sh[0], a.gpuLoad, "--util", "80", "--mem", "3000", "--seconds", "0")
	cmd.Env = append(os.Environ(), "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=2048M", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=10")
	b, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(b), "the device allows 2048 MiB") {
		t.Errorf("env limit 2048M: %s", b)
	}
	for _, bad := range [][]string{{"--util", "101"}, {"--util", "x"}, {"--mem", "1", "--util"}, {"--bogus"}} {
		if out, code := run(t, sh, a.gpuLoad, bad...); code != 2 {
			t.Errorf("%v: exit %d %s", bad, code, out)
		}
	}
	none := newContainer(t, root, devs)
	if out, code := run(t, sh, none.gpuLoad, "--util", "1"); code != 100 || !strings.Contains(out, "no CUDA-capable device is detected") {
		t.Errorf("no devices: %d %s", code, out)
	}
}

func simSource(t *testing.T) gpu.Source {
	t.Helper()
	p, _ := gpu.BuiltinProfile("dgxa100")
	s, err := gpu.NewSim(p, "node-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
