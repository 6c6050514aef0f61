package backoff_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"skiff.dev/skiff/client/backoff"
	"skiff.dev/skiff/internal/testwait"
)

func TestPolicyDelay(t *testing.T) {
	kubelet := backoff.Policy{Initial: 10 * time.Second, Max: 5 * time.Minute}
	scheduler := backoff.Policy{Initial: time.Second, Max: 10 * time.Second}
	for _, tc := range []struct {
		name     string
		policy   backoff.Policy
		failures int
		want     time.Duration
	}{
		{"no failure, no wait", kubelet, 0, 0},
		{"negative count, no wait", kubelet, -3, 0},
		{"first failure waits Initial", kubelet, 1, 10 * time.Second},
		{"second doubles", kubelet, 2, 20 * time.Second},
		{"third doubles again", kubelet, 3, 40 * time.Second},
		{"fifth", kubelet, 5, 160 * time.Second},
		{"sixth would be 320s: capped at 5m", kubelet, 6, 5 * time.Minute},
		{"stays at the cap", kubelet, 40, 5 * time.Minute},
		{"huge count does not overflow", kubelet, math.MaxInt, 5 * time.Minute},
		{"scheduler 1s", scheduler, 1, time.Second},
		{"scheduler 8s", scheduler, 4, 8 * time.Second},
		{"scheduler capped at 10s", scheduler, 5, 10 * time.Second},
		{"cap not a power of two of Initial", backoff.Policy{Initial: 10 * time.Millisecond, Max: 35 * time.Millisecond}, 3, 35 * time.Millisecond},
		{"Max below Initial counts as Initial", backoff.Policy{Initial: time.Second, Max: time.Millisecond}, 3, time.Second},
		{"zero Max counts as Initial", backoff.Policy{Initial: time.Second}, 2, time.Second},
		{"zero Initial, no wait", backoff.Policy{Max: time.Minute}, 3, 0},
		{"1ns doubled to the largest Duration", backoff.Policy{Initial: 1, Max: math.MaxInt64}, 100, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.policy.Delay(tc.failures); got != tc.want {
				t.Errorf("%+v.Delay(%d) = %v, want %v", tc.policy, tc.failures, got, tc.want)
			}
		})
	}
}

func TestBackoffNextAndReset(t *testing.T) {
	b := backoff.Backoff{Policy: backoff.Policy{Initial: 100 * time.Millisecond, Max: 500 * time.Millisecond}}
	for _, step := range []struct {
		reset bool
		want  time.Duration
	}{
		{want: 100 * time.Millisecond},
		{want: 200 * time.Millisecond},
		{want: 400 * time.Millisecond},
		{want: 500 * time.Millisecond},
		{want: 500 * time.Millisecond},
		{reset: true, want: 100 * time.Millisecond},
		{want: 200 * time.Millisecond},
	} {
		if step.reset {
			b.Reset()
			if b.Failures() != 0 {
				t.Fatalf("after Reset: %d failures, want 0", b.Failures())
			}
		}
		before := b.Failures()
		if got := b.Next(); got != step.want {
			t.Errorf("failure %d: Next() = %v, want %v", before+1, got, step.want)
		}
		if b.Failures() != before+1 {
			t.Errorf("Failures() = %d after Next, want %d", b.Failures(), before+1)
		}
	}
}

func TestBackoffCountIsBounded(t *testing.T) {
	b := backoff.Backoff{Policy: backoff.Policy{Initial: time.Nanosecond, Max: time.Hour}}
	for range 1000 {
		b.Next()
	}
	if got := b.Next(); got != time.Hour {
		t.Errorf("after 1001 failures Next() = %v, want the cap", got)
	}
	if b.Failures() > 64 {
		t.Errorf("Failures() = %d: the count should stop once every delay is the cap", b.Failures())
	}
}

func TestBackoffWaitSleepsOnTheClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := &backoff.Backoff{Policy: backoff.Policy{Initial: time.Second, Max: 4 * time.Second}, Clock: clk}
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		done := make(chan bool, 1)
		go func() { done <- b.Wait(context.Background()) }()
		testwait.For(t, 5*time.Second, "Sleep to start a timer", clk.HasWaiters)
		clk.Step(want - time.Nanosecond)
		select {
		case <-done:
			t.Fatalf("Wait returned before its %v had passed", want)
		default:
		}
		clk.Step(time.Nanosecond)
		select {
		case ok := <-done:
			if !ok {
				t.Fatalf("Wait = false after its %v passed, want true", want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Wait did not return once its %v had passed", want)
		}
	}
}

func TestBackoffSleepStopsWithContext(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := &backoff.Backoff{Policy: backoff.Policy{Initial: time.Hour, Max: time.Hour}, Clock: clk}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool, 1)
	go func() { done <- b.Wait(ctx) }()
	testwait.For(t, 5*time.Second, "Sleep to start a timer", clk.HasWaiters)
	cancel()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("Wait = true after ctx ended, want false")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return when ctx ended")
	}

	// An ended ctx: no wait at all, even on a clock that never moves.
	if b.Sleep(ctx, time.Hour) {
		t.Fatal("Sleep on an ended ctx = true, want false")
	}
}

// Retry stops at the first success or the first error not to retry, and
// says it gave up when ctx ends between tries.
func TestRetry(t *testing.T) {
	busy := errors.New("busy")
	final := errors.New("refused")
	cases := []struct {
		name      string
		answers   []error
		wantErr   error
		wantTries int
	}{
		{"first try works", []error{nil}, nil, 1},
		{"busy twice, then works", []error{busy, busy, nil}, nil, 3},
		{"busy, then refused", []error{busy, final}, final, 2},
		{"refused at once", []error{final}, final, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &backoff.Backoff{Policy: backoff.Policy{Initial: time.Nanosecond, Max: time.Nanosecond}}
			tries, retried := 0, 0
			err := b.Retry(t.Context(), func(err error) bool { return errors.Is(err, busy) }, func(error) { retried++ },
				func(context.Context) error { tries++; return tc.answers[tries-1] })
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) || tries != tc.wantTries || retried != tries-1 {
				t.Fatalf("err %v after %d tries (%d retried); want %v after %d", err, tries, retried, tc.wantErr, tc.wantTries)
			}
		})
	}
	t.Run("ctx ends while busy", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		b := &backoff.Backoff{Policy: backoff.Policy{Initial: time.Hour, Max: time.Hour}}
		err := b.Retry(ctx, func(error) bool { return true }, func(error) { cancel() },
			func(context.Context) error { return busy })
		if !errors.Is(err, busy) || !strings.Contains(err.Error(), "gave up after") {
			t.Fatalf("err %v; want the last busy error, saying it gave up", err)
		}
	})
}
