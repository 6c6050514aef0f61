// Package netnstest makes throwaway network namespaces for tests: each one
// a pretend machine ("host") with its own interfaces, routes and iptables,
// so that network code runs as root without touching the real host's
// network. Everything a test creates is removed by t.Cleanup, also when
// the test fails.
package netnstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Require skips the test unless it runs as root with iproute2 and
// iptables; with CI set it fails instead.
func Require(t testing.TB) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, bin := range []string{"ip", "iptables", "iptables-restore", "iptables-save"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	if len(missing) == 0 {
		return
	}
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatalf("network namespace tests need %s", strings.Join(missing, ", "))
	}
	t.Skipf("network namespace tests need %s", strings.Join(missing, ", "))
}

// NS is a named network namespace (/run/netns/NAME).
type NS struct {
	Name string
}

// New creates a namespace named prefix-<random> with lo up; t.Cleanup
// deletes it (and with it every interface, route and rule inside).
func New(t testing.TB, prefix string) *NS {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	ns := &NS{Name: prefix + "-" + hex.EncodeToString(b)}
	MustRun(t, "ip", "netns", "add", ns.Name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", ns.Name).Run() })
	ns.MustRun(t, "ip", "link", "set", "lo", "up")
	return ns
}

// Path of the namespace.
func (ns *NS) Path() string { return filepath.Join("/run/netns", ns.Name) }

// Wrap is the command prefix that runs a command inside ns.
func (ns *NS) Wrap() []string { return []string{"ip", "netns", "exec", ns.Name} }

// Run runs a command inside ns.
func (ns *NS) Run(args ...string) (string, error) {
	full := append(ns.Wrap(), args...)
	out, err := exec.Command(full[0], full[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(full, " "), err, out)
	}
	return string(out), nil
}

// MustRun runs a command inside ns or fails the test.
func (ns *NS) MustRun(t testing.TB, args ...string) string {
	t.Helper()
	out, err := ns.Run(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// MustRun runs a command on the host or fails the test.
func MustRun(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// Link connects a and b with a veth pair, addressed addrA and addrB (CIDR
// notation, e.g. 192.168.77.1/24), both up.
func Link(t testing.TB, a, b *NS, addrA, addrB string) {
	t.Helper()
	ifA, ifB := "v"+a.Name[len(a.Name)-6:], "v"+b.Name[len(b.Name)-6:]
	MustRun(t, "ip", "link", "add", ifA, "netns", a.Name, "type", "veth", "peer", "name", ifB, "netns", b.Name)
	a.MustRun(t, "ip", "addr", "add", addrA, "dev", ifA)
	a.MustRun(t, "ip", "link", "set", ifA, "up")
	b.MustRun(t, "ip", "addr", "add", addrB, "dev", ifB)
	b.MustRun(t, "ip", "link", "set", ifB, "up")
}

// Do runs f on an OS thread that is inside ns. Sockets f creates stay in
// ns after Do returns.
func (ns *NS) Do(f func() error) error {
	return DoPath(ns.Path(), f)
}

// DoPath runs f on an OS thread inside the namespace at path.
func DoPath(path string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open(path)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter %s: %w", path, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: the runtime then ends it rather
			// than reuse a thread in the wrong namespace.
			errc <- fmt.Errorf("return from %s: %w", path, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Dialer dials from inside the namespace at path.
func Dialer(path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := DoPath(path, func() error {
			var d net.Dialer
			var err error
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// Listen listens inside ns.
func (ns *NS) Listen(network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := ns.Do(func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}
