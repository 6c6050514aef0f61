package main

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// utime 250 and stime 37 ticks; the command name holds a space and
	// both parentheses, as a process may name itself.
	line := "4242 (tar get) (x)) S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 37 0 0 20 0 9 0 123456 1000000 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	got, err := parseStatCPU(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2870 * time.Millisecond; got != want {
		t.Errorf("parseStatCPU = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "4242 no name S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 1200 0 0 0 2x5 37 0"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("parseStatCPU(%q) gave no error", bad)
		}
	}
}

// TestProcCPUCountsThisProcess reads this process's own /proc stat after
// it has spent CPU, against what getrusage says it spent.
func TestProcCPUCountsThisProcess(t *testing.T) {
	start, err := selfCPU()
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for {
		for i := range 1 << 20 {
			x += i ^ x
		}
		now, err := selfCPU()
		if err != nil {
			t.Fatal(err)
		}
		if now-start >= 200*time.Millisecond {
			break
		}
	}
	proc, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	self, err := selfCPU()
	if err != nil {
		t.Fatal(err)
	}
	// /proc counts in ticks of 10 ms: allow two, and the test's own start.
	if proc < 200*time.Millisecond || proc > self+20*time.Millisecond {
		t.Errorf("/proc says %v of CPU, getrusage %v (at least 200 ms spent here; x=%d)", proc, self, x)
	}
}
