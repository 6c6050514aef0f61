package main

import (
	"os"
	"runtime"
	"runtime/pprof"
)

// profiler holds a running CPU profile; stop writes it and the allocation,
// block and mutex profiles next to it.
type profiler struct {
	prefix string
	cpu    *os.File
}

func startProfiles(prefix string) (*profiler, error) {
	f, err := os.Create(prefix + "cpu.pprof")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	runtime.SetBlockProfileRate(10_000) // blocking events of ~10 µs and more
	runtime.SetMutexProfileFraction(10)
	return &profiler{prefix: prefix, cpu: f}, nil
}

func (p *profiler) stop() error {
	pprof.StopCPUProfile()
	if err := p.cpu.Close(); err != nil {
		return err
	}
	runtime.SetBlockProfileRate(0)
	runtime.SetMutexProfileFraction(0)
	for _, name := range []string{"allocs", "block", "mutex"} {
		f, err := os.Create(p.prefix + name + ".pprof")
		if err != nil {
			return err
		}
		err = pprof.Lookup(name).WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
