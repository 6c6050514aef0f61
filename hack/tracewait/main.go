// Command tracewait reads a Go execution trace (runtime/trace, e.g.
// `bench-scheduler -trace FILE`) and says where the time of each kind of
// goroutine went: running, waiting for a CPU (runnable), in a system call,
// or blocked, and on what. A CPU profile says what the CPUs did; this says
// what a goroutine on the critical path waited for while they did it.
// docs/performance.md ("The scheduling loop stops waiting, twenty-fifth
// sitting") found its steps with it:
//
//	GOMAXPROCS=2 bench-scheduler -variant gpu -trace /tmp/gpu.trace
//	go run ./hack/tracewait -role schedloop=scheduleOne /tmp/gpu.trace
//
// A goroutine takes the first role whose function appears in the stack
// it blocks with (-role NAME=FUNC, repeatable; the defaults name the
// scheduler benchmark's goroutines), else "other". For the roles asked
// for with -blocked, it lists the stacks they blocked at, longest first.
// The last lines say how long the Ps ran and how long goroutines ran: a P
// held by a goroutine in a system call (fdatasync, say) is busy without
// running Go code until sysmon takes it back.
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// defaultRoles name the goroutines of hack/bench-scheduler.
var defaultRoles = []role{
	{"schedloop", "scheduler.(*Scheduler).scheduleOne"},
	{"schedloop", "scheduler.(*Queue).Pop"},
	{"binder", "scheduler.(*Scheduler).bind"},
	{"commit", "store.(*Bolt).commitLoop"},
	{"creator", "main.createPods"},
	{"informer", "client.(*Informer)"},
	{"gc", "runtime.gcBgMarkWorker"},
}

type role struct{ name, fn string }

type roleFlag []role

func (r *roleFlag) String() string { return fmt.Sprint(*r) }

func (r *roleFlag) Set(v string) error {
	name, fn, ok := strings.Cut(v, "=")
	if !ok || name == "" || fn == "" {
		return fmt.Errorf("-role %q: want NAME=FUNC", v)
	}
	*r = append(*r, role{name, fn})
	return nil
}

func main() {
	var roles roleFlag
	flag.Var(&roles, "role", "NAME=FUNC: a goroutine that blocks with FUNC (a substring of a function name) in its stack has role NAME; repeatable, tried in order before the defaults")
	blocked := flag.String("blocked", "schedloop", "comma-separated roles whose blocking stacks to list")
	top := flag.Int("top", 8, "stacks to list for each role in -blocked")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: tracewait [-role NAME=FUNC]... [-blocked ROLES] [-top N] TRACE")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracewait:", err)
		os.Exit(1)
	}
	defer f.Close()
	rep, err := read(f, append(roles, defaultRoles...))
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracewait:", err)
		os.Exit(1)
	}
	rep.print(os.Stdout, strings.Split(*blocked, ","), *top)
}

// report is what read found.
type report struct {
	wall time.Duration
	// states: role → state ("running", "runnable", "syscall",
	// "blocked: REASON") → time, summed over the role's goroutines.
	states map[string]map[string]time.Duration
	// stacks: role → where its goroutines blocked → time blocked there.
	stacks map[string]map[string]time.Duration
	// procRunning and procIdle: the Ps' time, summed.
	procRunning, procIdle time.Duration
}

type goroutine struct {
	state trace.GoState
	since trace.Time
	why   string // the reason it blocked
	stack string // the stack it blocked with
	role  string
}

type proc struct {
	state trace.ProcState
	since trace.Time
}

// read walks the trace's state transitions.
func read(r io.Reader, roles []role) (*report, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, err
	}
	rep := &report{states: map[string]map[string]time.Duration{}, stacks: map[string]map[string]time.Duration{}}
	add := func(m map[string]map[string]time.Duration, role, k string, d time.Duration) {
		if m[role] == nil {
			m[role] = map[string]time.Duration{}
		}
		m[role][k] += d
	}
	// procTime and goTime count a P's or goroutine's time in its state
	// from since until t.
	procTime := func(p *proc, t trace.Time) {
		d := time.Duration(t - p.since)
		switch p.state {
		case trace.ProcRunning:
			rep.procRunning += d
		case trace.ProcIdle:
			rep.procIdle += d
		}
	}
	goTime := func(g *goroutine, t trace.Time) {
		name := g.role
		if name == "" {
			name = "other"
		}
		d := time.Duration(t - g.since)
		switch g.state {
		case trace.GoRunning:
			add(rep.states, name, "running", d)
		case trace.GoRunnable:
			add(rep.states, name, "runnable", d)
		case trace.GoSyscall:
			add(rep.states, name, "syscall", d)
		case trace.GoWaiting:
			add(rep.states, name, "blocked: "+g.why, d)
			add(rep.stacks, name, g.why+" at "+g.stack, d)
		}
	}
	gs := map[trace.GoID]*goroutine{}
	ps := map[trace.ProcID]*proc{}
	var first, last trace.Time
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if first == 0 {
			first = ev.Time()
		}
		last = ev.Time()
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		switch st.Resource.Kind {
		case trace.ResourceProc:
			id := st.Resource.Proc()
			from, to := st.Proc()
			p := ps[id]
			if p == nil {
				p = &proc{state: from, since: ev.Time()}
				ps[id] = p
			}
			procTime(p, ev.Time())
			p.state, p.since = to, ev.Time()
		case trace.ResourceGoroutine:
			id := st.Resource.Goroutine()
			from, to := st.Goroutine()
			g := gs[id]
			if g == nil {
				g = &goroutine{state: from, since: ev.Time()}
				gs[id] = g
			}
			own := ev.Goroutine() == id // the stack is g's, not a waker's
			if own && to == trace.GoWaiting {
				g.stack = stackOf(ev.Stack())
				if g.role == "" {
					g.role = roleOf(ev.Stack(), roles)
				}
			}
			goTime(g, ev.Time())
			g.state, g.since, g.why = to, ev.Time(), st.Reason
		}
	}
	// What is still in a state at the end counts until the end.
	for _, p := range ps {
		procTime(p, last)
	}
	for _, g := range gs {
		goTime(g, last)
	}
	rep.wall = time.Duration(last - first)
	return rep, nil
}

// roleOf is the first of roles whose function is in s: in the order of
// roles, so that -role wins over a default that matches a deeper frame.
func roleOf(s trace.Stack, roles []role) string {
	var funcs []string
	for fr := range s.Frames() {
		funcs = append(funcs, fr.Func)
	}
	return firstRole(funcs, roles)
}

// firstRole is the first of roles whose function is a substring of one of
// funcs, or "".
func firstRole(funcs []string, roles []role) string {
	for _, r := range roles {
		for _, f := range funcs {
			if strings.Contains(f, r.fn) {
				return r.name
			}
		}
	}
	return ""
}

// stackOf is the first frames of s, package paths cut.
func stackOf(s trace.Stack) string {
	var b strings.Builder
	n := 0
	for fr := range s.Frames() {
		if n == 6 {
			break
		}
		if n > 0 {
			b.WriteString(" < ")
		}
		fmt.Fprintf(&b, "%s:%d", fr.Func[strings.LastIndex(fr.Func, "/")+1:], fr.Line)
		n++
	}
	return b.String()
}

func (rep *report) print(w io.Writer, blocked []string, top int) {
	fmt.Fprintf(w, "trace: %v\n", rep.wall.Round(time.Millisecond))
	for _, name := range slices.Sorted(maps.Keys(rep.states)) {
		fmt.Fprintf(w, "%-10s", name)
		for _, k := range longest(rep.states[name], 6) {
			fmt.Fprintf(w, "  %s %v", k, rep.states[name][k].Round(time.Millisecond))
		}
		fmt.Fprintln(w)
	}
	for _, name := range blocked {
		if len(rep.stacks[name]) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s blocked at:\n", name)
		for _, k := range longest(rep.stacks[name], top) {
			fmt.Fprintf(w, "  %8v  %s\n", rep.stacks[name][k].Round(time.Millisecond), k)
		}
	}
	var running, syscall time.Duration
	for _, m := range rep.states {
		running += m["running"]
		syscall += m["syscall"]
	}
	fmt.Fprintf(w, "Ps running %v, idle %v; goroutines running %v, in system calls %v (a P whose goroutine is in a system call counts as running until sysmon takes it back)\n",
		rep.procRunning.Round(time.Millisecond), rep.procIdle.Round(time.Millisecond), running.Round(time.Millisecond), syscall.Round(time.Millisecond))
}

// longest is m's n keys with the longest times, longest first.
func longest(m map[string]time.Duration, n int) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(m[b], m[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return keys[:min(n, len(keys))]
}
