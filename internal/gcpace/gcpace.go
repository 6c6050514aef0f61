// Package gcpace paces a server's garbage collector by how fast it
// allocates, so that a burst of work does not spend its CPU collecting a
// small heap over and over, while an idle server keeps the heap Go's
// default (GOGC=100) gives it.
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
// After each collection the pacer measures the allocation rate since the
// one before and sets GOGC so that the next collection comes about
// Interval later: a heap goal of rate × Interval, never more than
// MaxGoal, never less than what GOGC=100 gives. An idle server allocates
// little: its goal stays GOGC=100's. When a burst ends, a check every
// Interval lowers GOGC again once no collection came for two Intervals,
// from the rate since the last one; when that is back to GOGC=100 the
// burst is over, and the pacer collects at once and returns the free heap
// to the system (debug.FreeOSMemory).
//
// The pacer leaves the collector alone when GOGC is set in the
// environment. A memory limit (GOMEMLIMIT, `skiff server
// --memory-limit`) still bounds the heap: the runtime collects at
// whichever goal is lower.
package gcpace

import (
	"math"
	"os"
	"runtime"
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
}

// Default is the control plane's pacing: at most one collection a second
// under load, for a heap of at most 256 MiB (the heap at rest of a
// control plane with 20,000 pods is larger: there the pacer changes
// nothing).
var Default = Config{Interval: time.Second, MaxGoal: 256 << 20}

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

// pacer is the running state.
type pacer struct {
	cfg  Config
	stop chan struct{}

	mu      sync.Mutex
	stopped bool
	lastGC  time.Time // when the last collection's cleanup ran
	allocs  uint64    // bytes allocated, ever, then
	heap    heap      // what it left
	percent int       // the GOGC set now
}

// start starts a pacer; stop (once or more) ends it and sets GOGC back
// to 100.
func start(cfg Config) (stop func()) {
	p := &pacer{cfg: cfg, stop: make(chan struct{}), percent: 100}
	p.mu.Lock()
	p.lastGC, p.allocs, p.heap = time.Now(), readAllocs(), readHeap()
	p.mu.Unlock()
	p.arm()
	go p.watchIdle()
	return sync.OnceFunc(func() {
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		close(p.stop)
		debug.SetGCPercent(100)
	})
}

// arm has the next collection call collected: an object only this
// cleanup refers to becomes garbage at once, so the collection after
// now runs the cleanup, which arms the next.
func (p *pacer) arm() {
	runtime.AddCleanup(new(sentinel), func(p *pacer) {
		p.collected()
	}, p)
}

// sentinel is the object whose cleanup marks a collection: big enough
// not to share a block with other small objects (which would delay it).
type sentinel struct{ _ [32]byte }

// collected runs after each collection: it sets GOGC from the
// allocation rate since the one before.
func (p *pacer) collected() {
	now, allocs, h := time.Now(), readAllocs(), readHeap()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.setLocked(percent(h, allocs-p.allocs, now.Sub(p.lastGC), p.cfg))
	p.lastGC, p.allocs, p.heap = now, allocs, h
	p.arm()
}

// watchIdle lowers GOGC when no collection came for two Intervals: the
// allocation rate since the last one is lower than the one it was set for.
func (p *pacer) watchIdle() {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			allocs := readAllocs()
			p.mu.Lock()
			ended := false
			if since := now.Sub(p.lastGC); !p.stopped && since >= 2*p.cfg.Interval {
				if next := percent(p.heap, allocs-p.allocs, since, p.cfg); next < p.percent {
					ended = next == 100
					p.setLocked(next)
				}
			}
			p.mu.Unlock()
			if ended {
				// The burst is over: collect now and give its heap back
				// to the system, rather than keep it until the next
				// collection and the scavenger's slow return.
				debug.FreeOSMemory()
			}
		}
	}
}

// setLocked sets GOGC. p.mu is held.
func (p *pacer) setLocked(pct int) {
	if pct != p.percent {
		debug.SetGCPercent(pct)
		p.percent = pct
	}
}

// heap is what a collection left, as the runtime's pacer reads it: the
// live heap, and the stacks and globals it scans besides (GOGC's share is
// of all three: the goal is live + (live + roots) × GOGC/100).
type heap struct{ live, roots uint64 }

// percent is the GOGC that puts the next collection Interval after the
// last at the rate of allocated bytes in elapsed: a heap goal of
// rate × Interval (at most MaxGoal), never below GOGC=100's.
func percent(h heap, allocated uint64, elapsed time.Duration, cfg Config) int {
	scanned := float64(h.live + h.roots)
	if h.live == 0 || elapsed <= 0 {
		return 100
	}
	goal := min(float64(allocated)/elapsed.Seconds()*cfg.Interval.Seconds(), float64(cfg.MaxGoal))
	if goal <= float64(h.live)+scanned {
		return 100
	}
	// The runtime's smallest goal is 4 MB × GOGC/100 (heapMinimum): over
	// a heap of a few MB, a GOGC that large would pass MaxGoal.
	return min(int(math.Ceil((goal-float64(h.live))/scanned*100)), int(cfg.MaxGoal/minHeap*100))
}

// minHeap is the Go runtime's smallest heap goal at GOGC=100
// (runtime.defaultHeapMinimum); it scales with GOGC.
const minHeap = 4 << 20

var metricNames = struct{ allocs, live, stacks, globals, gogc string }{
	"/gc/heap/allocs:bytes", "/gc/heap/live:bytes", "/gc/scan/stack:bytes", "/gc/scan/globals:bytes", "/gc/gogc:percent"}

// readAllocs is the bytes the process has allocated on the heap, ever.
func readAllocs() uint64 { return readUint(metricNames.allocs) }

// readHeap is what the last collection left.
func readHeap() heap {
	return heap{live: readUint(metricNames.live), roots: readUint(metricNames.stacks) + readUint(metricNames.globals)}
}

// Percent is the GOGC the collector runs with now.
func Percent() int { return int(readUint(metricNames.gogc)) }

func readUint(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
