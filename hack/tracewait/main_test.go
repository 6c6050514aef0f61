package main

import (
	"bytes"
	"runtime/trace"
	"strings"
	"testing"
	"time"
)

// waitHere blocks on ch: the goroutine the test names with a role.
func waitHere(ch <-chan struct{}, done chan<- struct{}) {
	<-ch
	close(done)
}

// A goroutine blocked on a channel while another works is reported as
// blocked there, under its role, for about as long as the work took.
func TestBlockedGoroutineIsReportedWhereItWaited(t *testing.T) {
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("a trace is already running: %v", err)
	}
	ch, done := make(chan struct{}), make(chan struct{})
	go waitHere(ch, done)
	const work = 30 * time.Millisecond
	start := time.Now()
	for n := 0; time.Since(start) < work; n++ { // keeps a P busy while waitHere waits
		_ = strings.Repeat("x", n%64)
	}
	close(ch)
	<-done
	trace.Stop()

	rep, err := read(&buf, append([]role{{"waiter", ".waitHere"}}, defaultRoles...))
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.states["waiter"]["blocked: chan receive"]; got < work/2 || got > time.Since(start) {
		t.Errorf("waiter blocked on chan receive for %v; want about %v (states %v)", got, work, rep.states["waiter"])
	}
	found := false
	for k := range rep.stacks["waiter"] {
		found = found || strings.Contains(k, ".waitHere")
	}
	if !found {
		t.Errorf("waiter's blocking stacks %v lack waitHere", rep.stacks["waiter"])
	}
	if rep.procRunning < work/2 || rep.wall < work {
		t.Errorf("Ps ran %v over a trace of %v; want at least the %v of work", rep.procRunning, rep.wall, work)
	}
	var out bytes.Buffer
	rep.print(&out, []string{"waiter"}, 3)
	if !strings.Contains(out.String(), "waiter blocked at:") {
		t.Errorf("report lacks the waiter's stacks:\n%s", out.String())
	}
}

// A role given with -role wins over a default whose function is nearer
// the top of the stack: roles are tried in order, each against the whole
// stack.
func TestRoleGivenFirstWinsOverADeeperDefault(t *testing.T) {
	funcs := []string{ // a handler blocked in an informer's lister
		"runtime.gopark",
		"skiff.dev/skiff/client.(*Informer).List",
		"skiff.dev/skiff/controlplane/apiserver.(*Registry).create",
		"skiff.dev/skiff/controlplane/apiserver.(*Server).serveResource",
	}
	roles := append([]role{{"handler", "serveResource"}}, defaultRoles...)
	if got := firstRole(funcs, roles); got != "handler" {
		t.Errorf("role %q, want handler", got)
	}
	if got := firstRole(funcs, defaultRoles); got != "informer" {
		t.Errorf("without -role: role %q, want informer", got)
	}
	if got := firstRole(funcs[:1], defaultRoles); got != "" {
		t.Errorf("a stack no role names: role %q, want none", got)
	}
}
