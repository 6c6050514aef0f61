package main

import (
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// profiler holds a running CPU profile (and execution trace); stop writes
// them and the allocation, block and mutex profiles next to them.
type profiler struct {
	prefix string
	cpu    *os.File
	trace  *os.File
}

// startProfiles starts the CPU profile and samples blocking and lock
// contention; with execTrace also an execution trace, PREFIXtrace.out. It
// writes the allocations so far to PREFIXallocs-start.pprof: the
// allocation profile counts from the process's start, so what the load
// allocated is `go tool pprof -base PREFIXallocs-start.pprof
// PREFIXallocs.pprof`. It collects first: the profile holds what was
// allocated up to the last collection, and the start's allocations since
// would otherwise count as the load's (the OpenAPI document's encode, tens
// of MB). So a profiled run starts from a collection, where a measured
// run starts with the start's garbage.
func startProfiles(prefix string, execTrace bool) (*profiler, error) {
	runtime.GC()
	if err := writeProfile("allocs", prefix+"allocs-start.pprof"); err != nil {
		return nil, err
	}
	f, err := os.Create(prefix + "cpu.pprof")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	p := &profiler{prefix: prefix, cpu: f}
	if execTrace {
		if p.trace, err = os.Create(prefix + "trace.out"); err != nil {
			return nil, err
		}
		if err := trace.Start(p.trace); err != nil {
			return nil, err
		}
	}
	runtime.SetBlockProfileRate(10_000) // blocking events of ~10 µs and more
	runtime.SetMutexProfileFraction(10)
	return p, nil
}

func (p *profiler) stop() error {
	pprof.StopCPUProfile()
	if err := p.cpu.Close(); err != nil {
		return err
	}
	if p.trace != nil {
		trace.Stop()
		if err := p.trace.Close(); err != nil {
			return err
		}
	}
	runtime.SetBlockProfileRate(0)
	runtime.SetMutexProfileFraction(0)
	// A collection, after the CPU profile and the trace stopped, so that
	// the allocation profile's in-use figures are the heap live at the end
	// of the load (they are those of the last collection).
	runtime.GC()
	for _, name := range []string{"allocs", "block", "mutex"} {
		if err := writeProfile(name, p.prefix+name+".pprof"); err != nil {
			return err
		}
	}
	return nil
}

// writeProfile writes the named runtime profile to path.
func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = pprof.Lookup(name).WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
