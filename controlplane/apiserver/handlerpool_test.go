package apiserver

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// Handlers run at once get a goroutine each; later ones reuse the
// goroutines that finished instead of starting new ones, and every
// handler runs exactly once.
func TestHandlerPoolReusesGoroutines(t *testing.T) {
	var p handlerPool
	const n = 8
	var ran sync.WaitGroup
	counts := make([]int, 3*n)
	for round := range 3 {
		gate := make(chan struct{})
		var started sync.WaitGroup
		for i := range n {
			started.Add(1)
			ran.Add(1)
			p.run(func() {
				defer ran.Done()
				started.Done()
				<-gate // all n at once
				counts[round*n+i]++
			})
		}
		started.Wait()
		close(gate)
		ran.Wait()
		if got := p.started.Load(); got != n {
			t.Fatalf("round %d: %d goroutines started for %d handlers at once, want %d", round, got, n, n)
		}
		// The n goroutines wait for the next round's handlers.
		deadline := time.Now().Add(10 * time.Second)
		for p.waiting() != n {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d goroutines waiting, want %d", round, p.waiting(), n)
			}
			runtime.Gosched()
		}
	}
	for i, c := range counts {
		if c != 1 {
			t.Fatalf("handler %d ran %d times", i, c)
		}
	}
}

// A goroutine that waits longer than idleFor ends; one that run takes
// just as it gives up still runs its handler. Every handler runs once.
func TestHandlerPoolIdleGoroutinesEnd(t *testing.T) {
	p := handlerPool{idleFor: 20 * time.Millisecond}
	done := make(chan struct{})
	p.run(func() { close(done) })
	<-done
	deadline := time.Now().Add(10 * time.Second)
	for p.waiting() != 0 || p.started.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines waiting after idleFor, %d started", p.waiting(), p.started.Load())
		}
		runtime.Gosched()
	}
	done = make(chan struct{})
	p.run(func() { close(done) })
	<-done
	if got := p.started.Load(); got != 2 {
		t.Fatalf("%d goroutines started, want 2: the first had ended", got)
	}

	// Goroutines that give up as run hands them work, many times over.
	q := &handlerPool{idleFor: time.Microsecond}
	var ran sync.WaitGroup
	var mu sync.Mutex
	counts := map[int]int{}
	for i := range 2000 {
		ran.Add(1)
		q.run(func() {
			defer ran.Done()
			mu.Lock()
			counts[i]++
			mu.Unlock()
		})
		if i%7 == 0 {
			runtime.Gosched()
		}
	}
	ran.Wait()
	for i := range 2000 {
		if counts[i] != 1 {
			t.Fatalf("handler %d ran %d times", i, counts[i])
		}
	}
}

// waiting is the number of goroutines waiting for a handler.
func (p *handlerPool) waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}
