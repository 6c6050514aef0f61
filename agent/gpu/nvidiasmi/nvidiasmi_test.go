package nvidiasmi

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/api/gputopology"
)

// shells are the POSIX shells the script must run under: dash (/bin/sh on
// Debian) and busybox sh (containers in the integration tests).
func shells(t *testing.T) [][]string {
	var out [][]string
	if p, err := exec.LookPath("sh"); err == nil {
		out = append(out, []string{p})
	}
	if p, err := exec.LookPath("busybox"); err == nil {
		out = append(out, []string{p, "sh"})
	}
	if len(out) == 0 {
		t.Skip("no sh")
	}
	return out
}

// allocated returns host GPUs 2 and 5 of a simulated DGX A100, and the host matrix.
func allocated(t *testing.T, profile string, idx ...int) ([]gpu.Device, *gputopology.Topology) {
	t.Helper()
	p, err := gpu.BuiltinProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gpu.NewSim(p, "node-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	devs, _ := s.Devices(t.Context())
	topo, _ := s.Topology(t.Context())
	var out []gpu.Device
	for _, i := range idx {
		out = append(out, devs[i])
	}
	return out, topo
}

// run executes script with args under shell and returns stdout.
func run(t *testing.T, shell []string, script string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(shell[0], append(append(shell[1:], script), args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out) + stderr.String(), code
}

func TestScript(t *testing.T) {
	devs, topo := allocated(t, "dgxa100", 5, 2) // given out of order: shown in host order
	path := filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.WriteFile(path, Script(devs, topo, "", ""), 0o755); err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, path, devs[1], devs[0])
}

func TestDirScript(t *testing.T) {
	devs, topo := allocated(t, "dgxa100", 2, 5)
	dir := t.TempDir()
	for _, d := range devs {
		if err := os.WriteFile(filepath.Join(dir, RecordName(d.Index)), Record(d, topo, "", ""), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.WriteFile(path, DirScript(dir, ""), 0o755); err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, path, devs[0], devs[1])

	empty := filepath.Join(t.TempDir(), "nvidia-smi")
	os.WriteFile(empty, DirScript(t.TempDir(), ""), 0o755)
	for _, sh := range shells(t) {
		if out, code := run(t, sh, empty); code != 6 || !strings.Contains(out, "No devices were found") {
			t.Errorf("%v no GPUs: %d %q", sh, code, out)
		}
	}
}

// checkOutputs runs every supported command; a and b are host GPUs 2 and 5.
func checkOutputs(t *testing.T, path string, a, b gpu.Device) {
	for _, sh := range shells(t) {
		t.Run(filepath.Base(sh[0]), func(t *testing.T) {
			out, code := run(t, sh, path)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, out)
			}
			lines := strings.Split(out, "\n")
			if lines[0] != Banner {
				t.Errorf("first line %q", lines[0])
			}
			if n := strings.Count(out, "NVIDIA A100-SXM4-40GB"); n != 2 {
				t.Errorf("%d GPU blocks, want 2:\n%s", n, out)
			}
			for _, want := range []string{
				"| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |",
				"|   0  NVIDIA A100-SXM4-40GB          On  |   " + a.PCIBusID + " Off |                    0 |",
				"|   1  NVIDIA A100-SXM4-40GB          On  |   " + b.PCIBusID + " Off |                    0 |",
				"|       0MiB /  40960MiB |",
				"No running processes found",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("table lacks %q:\n%s", want, out)
				}
			}
			for _, l := range lines[2:] { // after banner and date, every box line is 91 wide
				if strings.HasPrefix(l, "|") || strings.HasPrefix(l, "+") {
					if len(l) != 91 {
						t.Errorf("line of %d chars: %q", len(l), l)
					}
				}
			}

			out, _ = run(t, sh, path, "-L")
			want := "GPU 0: NVIDIA A100-SXM4-40GB (UUID: " + a.UUID + ")\nGPU 1: NVIDIA A100-SXM4-40GB (UUID: " + b.UUID + ")\n"
			if out != want {
				t.Errorf("-L:\n%s\nwant\n%s", out, want)
			}

			out, _ = run(t, sh, path, "topo", "-m")
			for _, want := range []string{
				Banner + "\n\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n",
				"GPU0\t X \tNV12\t0-63,128-191\t0\tN/A\n",
				"GPU1\tNV12\t X \t64-127,192-255\t1\tN/A\n",
				"NV#  = Connection traversing a bonded set of # NVLinks",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("topo -m lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "GPU2") {
				t.Errorf("topo -m shows more than the allocated GPUs:\n%s", out)
			}

			for _, q := range []struct {
				args []string
				want string
			}{
				{[]string{"--query-gpu=index,name,memory.total,memory.free", "--format=csv"},
					"index, name, memory.total [MiB], memory.free [MiB]\n0, NVIDIA A100-SXM4-40GB, 40960 MiB, 40960 MiB\n1, NVIDIA A100-SXM4-40GB, 40960 MiB, 40960 MiB\n"},
				{[]string{"--query-gpu=uuid,pci.bus_id,utilization.gpu", "--format=csv,noheader,nounits"},
					a.UUID + ", " + a.PCIBusID + ", 0\n" + b.UUID + ", " + b.PCIBusID + ", 0\n"},
				{[]string{"--query-gpu=driver_version,count", "--format=csv,noheader"}, "550.54.15, 2\n550.54.15, 2\n"},
			} {
				if out, code := run(t, sh, path, q.args...); out != q.want || code != 0 {
					t.Errorf("%v: exit %d\n%s\nwant\n%s", q.args, code, out, q.want)
				}
			}
			if out, code := run(t, sh, path, "--query-gpu=bogus", "--format=csv"); code != 2 || !strings.Contains(out, `Field "bogus" is not a valid field`) {
				t.Errorf("bogus field: %d %q", code, out)
			}
		})
	}
}
