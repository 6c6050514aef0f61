// Package gcpace paces a server's garbage collector by how fast it
// allocates, so that a burst of work does not spend its CPU collecting a
// small heap over and over, while a server at rest keeps a heap smaller
// than Go's default (GOGC=100) gives it.
//
// With GOGC=100 the collector runs each time the heap has grown by as
// much as was live after the last collection. A control plane with a
// few thousand objects has a live heap of a few tens of MB; a burst of
// creates allocates about 35 KB each (docs/performance.md), so at
// thousands of creates a second it collected ten times a second, and
// on a 2-core machine a running collection takes a quarter of the CPU
// and leaves the requests waiting for it (the API benchmark's slowest
// creates spent more time runnable than running).
//
// The pacer looks at the runtime's count of collections every 50 ms. After
// each collection it measures the allocation rate since the one before
// and sets GOGC so that the next collection comes about Interval later: a
// heap goal of rate × Interval, never more than MaxGoal. Once no
// collection came for two Intervals it lowers GOGC again from the rate
// since the last one.
//
// At rest it goes below GOGC=100: a server at rest allocates little, and
// GOGC=100 would let the heap grow to twice its live data before the next
// collection. Where the rate would take more than RestInterval to grow
// the heap by GOGC=100's share, GOGC is the share it grows by in
// RestInterval, never below RestPercent: a smaller heap for at most one
// collection per RestInterval more than GOGC=100 makes. When GOGC comes
// down below 100 (a burst is over, or the server came to rest) the pacer
// collects at once and returns the free heap to the system
// (debug.FreeOSMemory).
//
// What it costs: under a burst the heap may reach MaxGoal where GOGC=100
// kept it at twice the live heap (docs/performance.md, sixteenth
// sitting: the scheduler benchmarks' peak RSS 1.10–1.15× for 1.09–1.17×
// their pods/s). What rest gives back: a server with 20,000 pods at rest
// holds 0.73× the anonymous memory, 0.82× the RSS (seventeenth sitting).
//
// The pacer leaves the collector alone when GOGC is set in the
// environment. A memory limit (GOMEMLIMIT, `skiff server
// --memory-limit`) still bounds the heap: the runtime collects at
// whichever goal is lower.
package gcpace

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Config is what the pacer aims for.
type Config struct {
	// Interval is the time between collections it aims for under load.
	Interval time.Duration
	// MaxGoal bounds the heap goal it sets, in bytes: what a burst may
	// cost in memory.
	MaxGoal uint64
	// RestInterval is the time between collections at rest: below
	// GOGC=100 the heap grows by what the rate allocates in RestInterval.
	RestInterval time.Duration
	// RestPercent is the lowest GOGC at rest; zero keeps GOGC=100 at
	// rest.
	RestPercent int
}

// Default is the control plane's pacing: at most one collection a second
// under load, for a heap of at most 256 MiB (the heap at rest of a
// control plane with 20,000 pods is larger: there a burst's goal is
// GOGC=100's); at rest, a heap a quarter larger than its live data, for at
// most one more collection every ten seconds.
var Default = Config{Interval: time.Second, MaxGoal: 256 << 20, RestInterval: 10 * time.Second, RestPercent: 25}

var started sync.Once

// Start paces the process's collector with Default, unless GOGC is set
// in the environment; the first call starts it, later calls do nothing.
// It runs for the life of the process.
func Start() {
	started.Do(func() {
		if _, set := os.LookupEnv("GOGC"); set {
			return
		}
		start(Default)
	})
}

// pacer is the running state, owned by its loop.
type pacer struct {
	cfg     Config
	cycles  uint64    // collections, ever, when it last looked
	lastGC  time.Time // when it saw the last one
	allocs  uint64    // bytes allocated, ever, then
	heap    heap      // what that one left
	percent int       // the GOGC set now
}

// start starts a pacer; stop (once or more) ends it and sets GOGC back
// to 100.
func start(cfg Config) (stop func()) {
	r := read()
	p := &pacer{cfg: cfg, cycles: r.cycles, lastGC: time.Now(), allocs: r.allocs, heap: r.heap, percent: 100}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		p.run(done)
	}()
	return sync.OnceFunc(func() {
		close(done)
		<-finished
		debug.SetGCPercent(100)
	})
}

// pollEvery bounds how late the pacer sees a collection: Go has no call
// for a collection's end (a finalizer or cleanup runs when its object's
// span is swept, which can be much later), so it reads the runtime's count
// of collections this often. Until it sees one, the runtime's goal is the
// old GOGC's over the new live heap: at most pollEvery of allocation
// beyond the one it aims for.
func pollEvery(cfg Config) time.Duration { return min(50*time.Millisecond, cfg.Interval/4) }

func (p *pacer) run(done <-chan struct{}) {
	t := time.NewTicker(pollEvery(p.cfg))
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			p.poll(now)
		}
	}
}

// poll sets GOGC after a collection from the allocation rate since the
// one before; and lowers it when no collection came for two Intervals
// (the rate since the last one is lower than the one it was set for).
func (p *pacer) poll(now time.Time) {
	r := read()
	if r.cycles != p.cycles {
		p.set(percent(r.heap, r.allocs-p.allocs, now.Sub(p.lastGC), p.cfg))
		p.cycles, p.lastGC, p.allocs, p.heap = r.cycles, now, r.allocs, r.heap
		return
	}
	if since := now.Sub(p.lastGC); since >= 2*p.cfg.Interval {
		if next := percent(p.heap, r.allocs-p.allocs, since, p.cfg); next < p.percent {
			p.set(next)
		}
	}
}

// set sets GOGC. When that brings it below 100 from 100 or more (a burst
// is over, or the server came to rest) it collects at once and gives the
// free heap back to the system, rather than keep it until the next
// collection and the scavenger's slow return (the next poll takes that
// collection as one).
func (p *pacer) set(pct int) {
	if pct == p.percent {
		return
	}
	rest := pct < 100 && p.percent >= 100
	debug.SetGCPercent(pct)
	p.percent = pct
	if rest {
		debug.FreeOSMemory()
	}
}

// heap is what a collection left, as the runtime's pacer reads it: the
// live heap, and the stacks and globals it scans besides (GOGC's share is
// of all three: the goal is live + (live + roots) × GOGC/100).
type heap struct{ live, roots uint64 }

// percent is the GOGC that puts the next collection Interval after the
// last at the rate of allocated bytes in elapsed: a heap goal of
// rate × Interval (at most MaxGoal). Below GOGC=100's goal, the share of
// the scanned heap the rate allocates in RestInterval, between
// RestPercent and 100.
func percent(h heap, allocated uint64, elapsed time.Duration, cfg Config) int {
	if elapsed <= 0 || h.live == 0 {
		return 100
	}
	rate := float64(allocated) / elapsed.Seconds()
	scanned := float64(h.live + h.roots)
	if goal := min(rate*cfg.Interval.Seconds(), float64(cfg.MaxGoal)); goal > float64(h.live)+scanned {
		// The runtime's smallest goal is 4 MB × GOGC/100 (heapMinimum):
		// over a heap of a few MB, a GOGC that large would pass MaxGoal.
		return min(int(math.Ceil((goal-float64(h.live))/scanned*100)), int(cfg.MaxGoal/minHeap*100))
	}
	if cfg.RestPercent <= 0 {
		return 100
	}
	return max(cfg.RestPercent, min(100, int(math.Ceil(rate*cfg.RestInterval.Seconds()/scanned*100))))
}

// minHeap is the Go runtime's smallest heap goal at GOGC=100
// (runtime.defaultHeapMinimum); it scales with GOGC.
const minHeap = 4 << 20

// reading is what a poll reads of the runtime, at one moment.
type reading struct {
	cycles uint64 // collections, ever
	allocs uint64 // bytes allocated on the heap, ever
	heap   heap   // what the last collection left
}

// read reads the runtime's metrics a poll needs, in one metrics.Read.
func read() reading {
	s := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
	}
	metrics.Read(s)
	v := func(i int) uint64 { return sampleUint(s[i]) }
	return reading{cycles: v(0), allocs: v(1), heap: heap{live: v(2), roots: v(3) + v(4)}}
}

// Percent is the GOGC the collector runs with now.
func Percent() int { return int(readUint("/gc/gogc:percent")) }

// readUint reads one metric (0 when the runtime has no such one).
func readUint(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return sampleUint(s[0])
}

func sampleUint(s metrics.Sample) uint64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s.Value.Uint64()
}
