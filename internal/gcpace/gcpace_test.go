package gcpace

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"skiff.dev/skiff/internal/testwait"
)

func TestPercent(t *testing.T) {
	cfg := Config{Interval: time.Second, MaxGoal: 256 << 20, RestInterval: 10 * time.Second, RestPercent: 25}
	const mb = 1 << 20
	for _, c := range []struct {
		name      string
		h         heap
		allocated uint64
		elapsed   time.Duration
		want      int
	}{
		{"at rest, 1 MB/s on a 20 MB heap: what it allocates in 10 s", heap{20 * mb, 0}, 1 * mb, time.Second, 50},
		{"at rest, 0.1 MB/s on a 100 MB heap: RestPercent", heap{100 * mb, 0}, 1 * mb, 10 * time.Second, 25},
		{"at rest with 10 MB of stacks and globals", heap{15 * mb, 5 * mb}, 1 * mb, time.Second, 50},
		{"2 MB/s on 20 MB: GOGC=100's goal comes in 10 s", heap{20 * mb, 0}, 2 * mb, time.Second, 100},
		{"twice the live heap a second: GOGC=100's goal", heap{20 * mb, 0}, 40 * mb, time.Second, 100},
		{"80 MB/s on 20 MB: a goal of 80 MB", heap{20 * mb, 0}, 40 * mb, time.Second / 2, 300},
		{"the same with 10 MB of stacks and globals", heap{20 * mb, 10 * mb}, 40 * mb, time.Second / 2, 200},
		{"a burst of 1 GB/s: the goal stops at MaxGoal", heap{32 * mb, 0}, 1000 * mb, time.Second, 700},
		{"a live heap past half MaxGoal: GOGC=100", heap{200 * mb, 0}, 1000 * mb, time.Second, 100},
		{"a tiny heap: the runtime's smallest goal (4 MB × GOGC/100) is MaxGoal", heap{1 * mb, 0}, 1000 * mb, time.Second, 6400},
		{"no live heap known", heap{0, 0}, 100 * mb, time.Second, 100},
		{"no time passed", heap{20 * mb, 0}, 100 * mb, 0, 100},
	} {
		if got := percent(c.h, c.allocated, c.elapsed, cfg); got != c.want {
			t.Errorf("%s: GOGC %d, want %d", c.name, got, c.want)
		}
	}
	norest := cfg
	norest.RestPercent = 0
	if got := percent(heap{100 * mb, 0}, 1*mb, 10*time.Second, norest); got != 100 {
		t.Errorf("at rest without RestPercent: GOGC %d, want 100", got)
	}
}

var sink []byte

// churn allocates n bytes of garbage in 8 KB pieces, and returns the
// highest GOGC it saw, looking after every MB.
func churn(n int) (maxPercent int) {
	for i := range n / 8192 {
		sink = make([]byte, 8192)
		if i%128 == 0 {
			maxPercent = max(maxPercent, Percent())
		}
	}
	return maxPercent
}

// collections counts the collections while f runs.
func collections(f func()) uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.NumGC
	f()
	runtime.ReadMemStats(&ms)
	return ms.NumGC - before
}

// Under a stream of garbage over a small live heap the pacer spaces the
// collections out, up to MaxGoal; when the stream stops it sets GOGC
// below 100 within a few Intervals and returns the free heap to the
// system, and stop leaves GOGC at 100.
func TestPacesABurstAndComesBackWhenIdle(t *testing.T) {
	if _, set := os.LookupEnv("GOGC"); set {
		t.Skip("GOGC is set: the collector runs as it says")
	}
	const burst = 1 << 30
	runtime.GC()
	plain := collections(func() { churn(burst) })
	cfg := Config{Interval: 100 * time.Millisecond, MaxGoal: 64 << 20, RestInterval: time.Second, RestPercent: 25}
	stop := start(cfg)
	defer stop()
	// This loop allocates gigabytes a second, far faster than a server:
	// the pacer sees a collection up to pollEvery late, so it first
	// measures the rate on a part of the burst.
	churn(burst / 4)
	var highest int
	paced := collections(func() { highest = churn(burst) })
	t.Logf("collections for %d MB of garbage: %d at GOGC=100, %d paced (GOGC up to %d)", burst>>20, plain, paced, highest)
	// GOGC=100 collects every ~4 MB here (the runtime's smallest goal);
	// paced, every ~64 MB (MaxGoal) once the first collection measured
	// the rate: no fewer collections than that (the goal is bounded).
	// Not a quarter of GOGC=100's, as on an idle machine: where the test
	// waits for the CPU, a collection's mark runs long and counts what the
	// loop allocates meanwhile as live, and over such a live heap the
	// pacer's goal is GOGC=100's for that collection.
	if paced*2 > plain || paced < burst/uint32(cfg.MaxGoal)/2 {
		t.Errorf("%d collections paced, against %d at GOGC=100: want at most half, and at least %d (MaxGoal)", paced, plain, burst/cfg.MaxGoal/2)
	}
	if highest <= 100 {
		t.Errorf("GOGC at most %d during the burst, want it raised", highest)
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		return Percent() < 100, fmt.Sprintf("GOGC is %d, not below 100 at rest after the burst", Percent())
	})
	// The burst's heap (up to MaxGoal) is given back, not kept free.
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		free := readUint("/memory/classes/heap/free:bytes")
		return free < cfg.MaxGoal/4, fmt.Sprintf("%d MB of the heap free and not returned to the system after the burst", free>>20)
	})
	stop()
	if Percent() != 100 {
		t.Errorf("GOGC %d after stop, want 100", Percent())
	}
}
