package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"skiff.dev/skiff/api/gputopology"
)

// Options of Open.
type Options struct {
	// NodeName seeds the UUIDs of simulated GPUs (stable per node).
	NodeName string
	// Logger for the source's own goroutines; nil discards.
	Logger *slog.Logger
}

// Open turns the agent flag --gpus into a Source, and says in one line
// which GPUs the agent has, for the agent's log:
//
//	auto          the real GPUs when the NVIDIA driver loads, otherwise none
//	nvml          the real GPUs; an error without a driver
//	none          no GPUs
//	sim:NAME      a builtin simulated server (BuiltinProfiles: dgxa100, ...)
//	sim:FILE.yaml a simulated server from a profile file
//
// Simulated GPUs only come when asked for: auto never simulates.
func Open(spec string, opts Options) (Source, string, error) {
	switch {
	case spec == "" || spec == "auto":
		src, err := NewNVML(opts.Logger)
		if err != nil {
			msg := fmt.Sprintf("GPUs: none (%v; for simulated GPUs use --gpus sim:dgxa100)", err)
			if !errors.Is(err, ErrNoDriver) {
				msg = fmt.Sprintf("GPUs: none (NVML failed: %v)", err)
			}
			return None(), msg, nil
		}
		return src, describe(src), nil
	case spec == "auto-sim":
		// skiff up's default: the machine's real GPUs when the driver
		// loads, otherwise a simulated DGX A100 so that every lab works
		// on a laptop. Agents and servers default to plain auto, which
		// never simulates unless asked.
		if src, err := NewNVML(opts.Logger); err == nil {
			return src, describe(src), nil
		}
		src, msg, err := Open("sim:dgxa100", opts)
		if err != nil {
			return nil, "", err
		}
		return src, msg + " — no NVIDIA driver here, so simulated; choose with --gpus sim:dgxh100|sim:rtx4090x4|none", nil
	case spec == "nvml":
		src, err := NewNVML(opts.Logger)
		if err != nil {
			return nil, "", fmt.Errorf("--gpus nvml: %w", err)
		}
		return src, describe(src), nil
	case spec == "none":
		return None(), "GPUs: none (--gpus none)", nil
	case strings.HasPrefix(spec, "sim:"):
		name := strings.TrimPrefix(spec, "sim:")
		var p *Profile
		var err error
		if strings.ContainsRune(name, filepath.Separator) || strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") {
			p, err = LoadProfile(name)
		} else {
			p, err = BuiltinProfile(name)
		}
		if err != nil {
			return nil, "", fmt.Errorf("--gpus %s: %w", spec, err)
		}
		src, err := NewSim(p, opts.NodeName, opts.Logger)
		if err != nil {
			return nil, "", fmt.Errorf("--gpus %s: %w", spec, err)
		}
		return src, describe(src), nil
	}
	return nil, "", fmt.Errorf("--gpus %q: want auto, auto-sim, nvml, none, sim:NAME (%s) or sim:FILE.yaml",
		spec, strings.Join(BuiltinProfiles(), ", "))
}

// describe is the one-line summary of a source: "GPUs: 8x NVIDIA
// A100-SXM4-40GB (simulated, sim:dgxa100)".
func describe(src Source) string {
	devs, err := src.Devices(context.Background())
	if err != nil || len(devs) == 0 {
		return fmt.Sprintf("GPUs: none found (%s)", src.Name())
	}
	kind := "real"
	if src.Simulated() {
		kind = "simulated"
	}
	models := map[string]int{}
	var order []string
	for _, d := range devs {
		if models[d.Name] == 0 {
			order = append(order, d.Name)
		}
		models[d.Name]++
	}
	var parts []string
	for _, m := range order {
		parts = append(parts, fmt.Sprintf("%dx %s", models[m], m))
	}
	return fmt.Sprintf("GPUs: %s (%s, %s, driver %s, CUDA %s)", strings.Join(parts, ", "), kind,
		src.Name(), devs[0].DriverVersion, devs[0].CUDAVersion)
}

// None is a Source without GPUs: the agent's source when there is no driver
// and no simulation was asked for.
func None() Source { return &none{health: newHealthHub(0)} }

type none struct{ health *healthHub }

func (*none) Name() string                              { return "none" }
func (*none) Simulated() bool                           { return false }
func (*none) Devices(context.Context) ([]Device, error) { return nil, nil }
func (*none) Topology(context.Context) (*gputopology.Topology, error) {
	return gputopology.NewTopology(0), nil
}
func (n *none) Watch(ctx context.Context) <-chan HealthEvent { return n.health.watch(ctx) }
func (n *none) Close() error                                 { n.health.close(); return nil }
