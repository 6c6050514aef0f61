package testwait

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	if len(args) > 1 {
		r.failed = args[1].(string)
	}
}

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	r := &recorder{TB: t}
	For(r, time.Minute, "three polls", func() bool { return calls.Add(1) == 3 })
	if r.failed != "" || calls.Load() != 3 {
		t.Fatalf("failed=%q after %d calls, want success after 3", r.failed, calls.Load())
	}
}

func TestUntilFailsWithTheLastExplanation(t *testing.T) {
	n := 0
	r := &recorder{TB: t}
	Until(r, 30*time.Millisecond, func() (bool, string) {
		n++
		if r.failed != "" {
			return true, "" // Fatalf was recorded: stop the loop the real one would have ended
		}
		return false, "state " + strings.Repeat("x", n)
	})
	if !strings.HasPrefix(r.failed, "state x") || n < 2 {
		t.Fatalf("failure %q after %d polls, want the last state after at least 2", r.failed, n)
	}
}
