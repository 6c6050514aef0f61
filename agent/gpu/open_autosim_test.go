package gpu

import (
	"context"
	"strings"
	"testing"
)

// Without a driver, auto-sim (skiff up's default) gives a simulated DGX A100
// and says so; plain auto gives none.
func TestOpenAutoSimWithoutDriver(t *testing.T) {
	if src, err := NewNVML(nil); err == nil {
		src.Close()
		t.Skip("a real NVIDIA driver is present: auto-sim uses it")
	}
	src, msg, err := Open("auto-sim", Options{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	devs, err := src.Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !src.Simulated() || len(devs) != 8 || devs[0].Product() != "NVIDIA-A100-SXM4-40GB" {
		t.Fatalf("auto-sim: simulated=%v, %d devices, product %q; want a simulated DGX A100", src.Simulated(), len(devs), devs[0].Product())
	}
	if !strings.Contains(msg, "simulated") || !strings.Contains(msg, "--gpus") {
		t.Fatalf("message %q must say the GPUs are simulated and how to choose others", msg)
	}
	none, _, err := Open("auto", Options{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	if d, _ := none.Devices(context.Background()); len(d) != 0 {
		t.Fatalf("auto without a driver gave %d GPUs; it must never simulate unless asked", len(d))
	}
}
