package network

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// NetNSPath is the path of the network namespace pod uid gets (whether or
// not it exists: a host-network pod has none).
func (n *Node) NetNSPath(uid string) string {
	return filepath.Join(netnsDir, n.template.NetNSPrefix+uid)
}

// DialNetNS connects to addr from inside the network namespace at path,
// as `skiff port-forward` reaches a pod: the socket is made on an OS
// thread that has entered the namespace and stays there after the thread
// returns to its own (a socket belongs to the namespace it was made in).
// The thread is locked for the switch and, should returning fail, ended
// rather than reused.
func DialNetNS(ctx context.Context, path, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("open own network namespace: %w", err)}
			return
		}
		defer orig.Close()
		target, err := os.Open(path)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("open network namespace: %w", err)}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("enter network namespace %s: %w", path, err)}
			return
		}
		var d net.Dialer
		c, derr := d.DialContext(ctx, network, addr)
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Stay locked: the runtime ends the thread instead of
			// reusing one in the wrong namespace.
			if c != nil {
				c.Close()
			}
			ch <- result{err: fmt.Errorf("leave network namespace %s: %w", path, err)}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{c, derr}
	}()
	r := <-ch
	return r.c, r.err
}
