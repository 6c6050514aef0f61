package network

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"golang.org/x/sys/unix"

	"skiff.dev/skiff/api"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr []string
	}{
		{name: "default", change: func(*Config) {}},
		{name: "bad CIDR", change: func(c *Config) { c.PodCIDR = "10.244.1.0" }, wantErr: []string{"pod CIDR"}},
		{name: "IPv6", change: func(c *Config) { c.PodCIDR = "fd00::/64" }, wantErr: []string{"IPv4"}},
		{
			name:    "every problem at once",
			change:  func(c *Config) { c.Bridge = "a-very-long-bridge-name"; c.PluginDirs = nil; c.NetNSPrefix = "" },
			wantErr: []string{"bridge", "plugin directory", "netns prefix"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig("10.244.1.0/24")
			tt.change(&c)
			err := c.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			for _, w := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %v, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestConfList(t *testing.T) {
	c := DefaultConfig("10.244.3.7/24")
	raw, err := c.ConfList()
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		t.Fatalf("libcni rejects the generated config: %v\n%s", err, raw)
	}
	if list.Name != "skiff" || len(list.Plugins) != 2 || list.Plugins[0].Network.Type != "bridge" || list.Plugins[1].Network.Type != "portmap" {
		t.Fatalf("plugins %+v", list.Plugins)
	}
	var bridge struct {
		Bridge    string `json:"bridge"`
		IsGateway bool   `json:"isGateway"`
		IPMasq    bool   `json:"ipMasq"`
		IPAM      struct {
			Type   string                `json:"type"`
			Ranges [][]map[string]string `json:"ranges"`
		} `json:"ipam"`
	}
	if err := json.Unmarshal(list.Plugins[0].Bytes, &bridge); err != nil {
		t.Fatal(err)
	}
	if bridge.Bridge != "skiff0" || !bridge.IsGateway || !bridge.IPMasq || bridge.IPAM.Type != "host-local" ||
		bridge.IPAM.Ranges[0][0]["subnet"] != "10.244.3.0/24" {
		t.Errorf("bridge config %+v", bridge)
	}
}

func TestNewMissingPlugins(t *testing.T) {
	c := DefaultConfig("10.244.1.0/24")
	c.PluginDirs = []string{t.TempDir()}
	if _, err := New(c); err == nil || !strings.Contains(err.Error(), "containernetworking-plugins") {
		t.Fatalf("New: %v, want a missing plugins error", err)
	}
}

// requireRootAndPlugins skips unless the test can change the node's
// network: root, and the CNI plugins installed. With CI=true a root run
// without plugins fails instead.
func requireRootAndPlugins(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, bridges)")
	}
	for _, p := range []string{"bridge", "host-local", "portmap", "loopback"} {
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", p)); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CNI plugin %s missing under /usr/lib/cni (apt-get install containernetworking-plugins)", p)
			}
			t.Skipf("CNI plugin %s missing under /usr/lib/cni", p)
		}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command")
	}
}

func randHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func testPod(t testing.TB, name string) *api.Pod {
	p := &api.Pod{}
	p.Namespace, p.Name, p.UID = "default", name, "test-"+randHex(t, 8)
	return p
}

// TestCNIPodToPod sets up two pods on a bridge of the test's own, checks
// they talk over TCP, and that tear-down leaves nothing behind.
func TestCNIPodToPod(t *testing.T) {
	n, cfg := newTestCNI(t)
	a, b := testPod(t, "a"), testPod(t, "b")
	t.Cleanup(func() {
		for _, p := range []*api.Pod{a, b} {
			if err := n.TearDown(context.Background(), p.Namespace, p.Name, p.UID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
			_ = exec.Command("ip", "netns", "delete", n.NetNSName(p.UID)).Run()
		}
	})

	ctx := t.Context()
	na, err := n.SetUp(ctx, a)
	if err != nil {
		t.Fatalf("set up a: %v", err)
	}
	nb, err := n.SetUp(ctx, b)
	if err != nil {
		t.Fatalf("set up b: %v", err)
	}
	cidr := netip.MustParsePrefix(cfg.PodCIDR)
	for _, pn := range []string{na.IP, nb.IP} {
		if ip, err := netip.ParseAddr(pn); err != nil || !cidr.Contains(ip) {
			t.Fatalf("pod IP %q, want one in %s", pn, cidr)
		}
	}
	if na.IP == nb.IP || na.NetNSPath == nb.NetNSPath {
		t.Fatalf("pods share %+v and %+v", na, nb)
	}
	if again, err := n.SetUp(ctx, a); err != nil || again != na {
		t.Fatalf("second set up of a: %+v, %v; want %+v", again, err, na)
	}
	if made, err := madeNetNS(cfg.CacheDir); err != nil || !slices.Equal(made, slices.Sorted(slices.Values([]string{a.UID, b.UID}))) {
		t.Errorf("record of the namespaces made: %q, %v; want a's and b's", made, err)
	}
	if links := bridgeLinks(t, cfg.Bridge); len(links) != 2 {
		t.Errorf("bridge ports %q, want 2", links)
	}

	// b connects to a listener in a's namespace, on a's IP.
	var ln net.Listener
	inNetNS(t, na.NetNSPath, func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(na.IP, "8080"))
		return err
	})
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write([]byte(c.RemoteAddr().(*net.TCPAddr).IP.String() + "\n"))
	}()
	var conn net.Conn
	inNetNS(t, nb.NetNSPath, func() (err error) {
		conn, err = net.DialTimeout("tcp", net.JoinHostPort(na.IP, "8080"), 5*time.Second)
		return err
	})
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	conn.Close()
	if err != nil || strings.TrimSpace(line) != nb.IP {
		t.Fatalf("a saw %q (%v), want b's IP %s", line, err, nb.IP)
	}

	// Tear down, twice: nothing left.
	for range 2 {
		for _, p := range []*api.Pod{a, b} {
			if err := n.TearDown(ctx, p.Namespace, p.Name, p.UID); err != nil {
				t.Fatalf("tear down %s: %v", p.Name, err)
			}
		}
	}
	for _, p := range []*api.Pod{a, b} {
		if _, err := os.Stat(n.NetNSPath(p.UID)); !os.IsNotExist(err) {
			t.Errorf("netns of %s still there: %v", p.Name, err)
		}
	}
	requireNoRecord(t, cfg)
	if links := bridgeLinks(t, cfg.Bridge); len(links) != 0 {
		t.Errorf("bridge ports left: %q", links)
	}
	leases, _ := filepath.Glob(filepath.Join(cfg.IPAMDataDir, cfg.NetworkName, "10.*"))
	if len(leases) != 0 {
		t.Errorf("IPAM leases left: %q", leases)
	}
	if out, err := exec.Command("iptables-save", "-t", "nat").Output(); err == nil {
		for _, p := range []*api.Pod{a, b} {
			if strings.Contains(string(out), p.UID) {
				t.Errorf("nat rules mention %s after tear down", p.UID)
			}
		}
	}
	// Tear down of a pod never set up is fine.
	if err := n.TearDown(ctx, "default", "never", "test-never-"+randHex(t, 3)); err != nil {
		t.Errorf("tear down of an unknown pod: %v", err)
	}
}

// bridgeLinks lists the interfaces enslaved to bridge.
func bridgeLinks(t *testing.T, bridge string) []string {
	t.Helper()
	out, err := exec.Command("ip", "-o", "link", "show", "master", bridge).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "does not exist") {
			return nil
		}
		t.Fatalf("ip link show master %s: %v: %s", bridge, err, out)
	}
	var links []string
	for l := range strings.Lines(string(out)) {
		if f := strings.Fields(l); len(f) > 1 {
			links = append(links, strings.TrimSuffix(f[1], ":"))
		}
	}
	return links
}

// inNetNS runs f on a thread switched into the network namespace at path;
// sockets f opens stay in that namespace.
func inNetNS(t *testing.T, path string, f func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open(path)
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", path, err)
			return // the thread stays locked and dies with the goroutine
		}
		ferr := f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns back: %w", err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestNodeWaitsForPodCIDR(t *testing.T) {
	cidr := ""
	tmpl := DefaultConfig("")
	tmpl.PluginDirs = []string{t.TempDir()} // no plugins: New fails once a CIDR is known
	n := NewNode(tmpl, func(context.Context) (string, error) { return cidr, nil })
	if _, err := n.SetUp(t.Context(), testPod(t, "a")); !errors.Is(err, ErrNoPodCIDR) {
		t.Fatalf("SetUp before a CIDR: %v, want ErrNoPodCIDR", err)
	}
	if err := n.TearDown(t.Context(), "default", "a", "uid"); err != nil {
		t.Fatalf("TearDown before a CIDR: %v", err)
	}
	cidr = "10.244.1.0/24"
	if _, err := n.SetUp(t.Context(), testPod(t, "a")); err == nil || errors.Is(err, ErrNoPodCIDR) || !strings.Contains(err.Error(), "CNI plugins") {
		t.Fatalf("SetUp with a CIDR and no plugins: %v", err)
	}
}

// testCNIConfig is a network of the test's own: its bridge (deleted at
// the end), pod CIDR, cache, IPAM, configuration file and namespace
// prefix.
func testCNIConfig(t testing.TB) Config {
	suffix := randHex(t, 3)
	cfg := DefaultConfig(fmt.Sprintf("10.251.%d.0/24", 1+os.Getpid()%250))
	cfg.Bridge = "skt" + suffix // 9 characters
	cfg.NetworkName = "skiff-test-" + suffix
	cfg.PluginDirs = []string{"/usr/lib/cni"}
	dir := t.TempDir()
	cfg.CacheDir, cfg.IPAMDataDir = filepath.Join(dir, "cache"), filepath.Join(dir, "ipam")
	cfg.ConfFile = filepath.Join(dir, ConfFileName)
	cfg.NetNSPrefix = "skifftest-"
	t.Cleanup(func() { _ = exec.Command("ip", "link", "delete", cfg.Bridge).Run() })
	return cfg
}

// newTestCNI is a pod network on a bridge of the test's own
// (testCNIConfig), skipping without root and the CNI plugins.
func newTestCNI(t testing.TB) (*CNI, Config) {
	t.Helper()
	requireRootAndPlugins(t)
	cfg := testCNIConfig(t)
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n, cfg
}

// A SetUp that fails after it made the pod's namespace (here the bridge
// plugin fails; in a classroom, Ctrl-C while a pod starts) removes the
// namespace, libcni's records and its own record again.
func TestSetUpFailureLeavesNothing(t *testing.T) {
	requireRootAndPlugins(t)
	cfg := testCNIConfig(t)
	plugins := t.TempDir()
	for _, p := range []string{"host-local", "portmap", "loopback"} {
		if err := os.Symlink(filepath.Join("/usr/lib/cni", p), filepath.Join(plugins, p)); err != nil {
			t.Fatal(err)
		}
	}
	failing := "#!/bin/sh\necho '{\"cniVersion\":\"1.0.0\",\"code\":11,\"msg\":\"the test bridge fails\"}'\nexit 1\n"
	if err := os.WriteFile(filepath.Join(plugins, "bridge"), []byte(failing), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.PluginDirs = []string{plugins}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := testPod(t, "a")
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", n.NetNSName(p.UID)).Run() })
	_, err = n.SetUp(t.Context(), p)
	if err == nil || !strings.Contains(err.Error(), "the test bridge fails") {
		t.Fatalf("set up: %v, want the bridge plugin's error", err)
	}
	if _, err := os.Stat(n.NetNSPath(p.UID)); !os.IsNotExist(err) {
		t.Errorf("netns %s after a failed set up: %v, want it gone", n.NetNSPath(p.UID), err)
	}
	if atts, err := n.cni.GetCachedAttachments(p.UID); err != nil || len(atts) != 0 {
		t.Errorf("libcni's cache after a failed set up: %+v, %v; want nothing", atts, err)
	}
	requireNoRecord(t, cfg)
}

// A node killed right after it made a pod's namespace (SetUp's first
// step, done by hand here), before any CNI ADD, leaves a namespace that
// only the node's record of the namespaces it made knows; Reset removes
// it, and says so.
func TestResetRemovesANamespaceOnlyItsRecordKnows(t *testing.T) {
	n, cfg := newTestCNI(t)
	if err := cfg.WriteConfFile(); err != nil {
		t.Fatal(err)
	}
	p := testPod(t, "a")
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", n.NetNSName(p.UID)).Run() })
	ctx := t.Context()
	if _, err := n.ensureNetNS(ctx, p.UID); err != nil {
		t.Fatal(err)
	}
	var said []string
	if err := Reset(ctx, ResetConfig{Config: cfg}, func(s string) { said = append(said, s) }); err != nil {
		t.Fatalf("reset: %v", err)
	}
	if _, err := os.Stat(n.NetNSPath(p.UID)); !os.IsNotExist(err) {
		t.Errorf("netns %s after reset: %v, want it gone", n.NetNSPath(p.UID), err)
	}
	if want := "removed network namespace " + n.NetNSName(p.UID); !slices.Contains(said, want) {
		t.Errorf("reset said %q, want %q among them", said, want)
	}
}

// requireNoRecord fails unless the node's record of the namespaces it
// made (madeDir) lists none: every namespace it made is gone.
func requireNoRecord(t *testing.T, cfg Config) {
	t.Helper()
	if made, err := madeNetNS(cfg.CacheDir); err != nil || len(made) != 0 {
		t.Errorf("record of the namespaces made: %q, %v; want none", made, err)
	}
}

// Retain tears down what the node made for pods that are not live, the
// namespace of a pod whose set-up or tear-down was cut short (only the
// record of the namespaces made knows it) included, and keeps the rest.
func TestRetainTearsDownWhatNoLivePodOwns(t *testing.T) {
	n, cfg := newTestCNI(t)
	ctx := t.Context()
	running, cut, late := testPod(t, "running"), testPod(t, "cut-short"), testPod(t, "late")
	for _, p := range []*api.Pod{running, cut, late} {
		t.Cleanup(func() { _ = n.TearDown(context.Background(), p.Namespace, p.Name, p.UID) })
	}
	if _, err := n.SetUp(ctx, running); err != nil {
		t.Fatal(err)
	}
	if _, err := n.ensureNetNS(ctx, cut.UID); err != nil {
		t.Fatal(err)
	}
	// Retain reads its records before it asks which pods are live: a
	// set-up that begins after the records were read (late's, begun
	// inside live here) is not Retain's to undo. In the other order the
	// agent's resync could tear down a pod set up meanwhile.
	if err := n.Retain(ctx, func() map[string]bool {
		if _, err := n.ensureNetNS(ctx, late.UID); err != nil {
			t.Error(err)
		}
		return map[string]bool{running.UID: true}
	}); err != nil {
		t.Fatalf("retain: %v", err)
	}
	if _, err := os.Stat(n.NetNSPath(late.UID)); err != nil {
		t.Errorf("netns of a pod set up after retain read its records: %v, want it kept", err)
	}
	if _, err := os.Stat(n.NetNSPath(cut.UID)); !os.IsNotExist(err) {
		t.Errorf("netns of the pod cut short after retain: %v, want it gone", err)
	}
	if _, err := os.Stat(n.NetNSPath(running.UID)); err != nil {
		t.Errorf("netns of the live pod after retain: %v, want it kept", err)
	}
	if err := n.Retain(ctx, func() map[string]bool { return nil }); err != nil {
		t.Fatalf("retain of none: %v", err)
	}
	for _, p := range []*api.Pod{running, late} {
		if _, err := os.Stat(n.NetNSPath(p.UID)); !os.IsNotExist(err) {
			t.Errorf("netns of %s, not live, after retain: %v, want it gone", p.Name, err)
		}
	}
	if links := bridgeLinks(t, cfg.Bridge); len(links) != 0 {
		t.Errorf("bridge ports left: %q", links)
	}
	requireNoRecord(t, cfg)
}

// BenchmarkSetUpTearDown is what a pod's network costs the node: its
// namespace, lo, the bridge's veth and address, portmap, and their
// removal (root and the CNI plugins; skipped otherwise).
func BenchmarkSetUpTearDown(b *testing.B) {
	n, _ := newTestCNI(b)
	ctx := b.Context()
	for b.Loop() {
		p := testPod(b, "bench")
		if _, err := n.SetUp(ctx, p); err != nil {
			b.Fatal(err)
		}
		if err := n.TearDown(ctx, p.Namespace, p.Name, p.UID); err != nil {
			b.Fatal(err)
		}
	}
}

// A SetUp that cannot write its record (here the record's directory is a
// file; on a node, a full disk) fails, and leaves the namespace of a pod
// set up before (an agent restarted: the pod runs in it) as it was.
func TestSetUpWithoutItsRecordKeepsARunningPodsNamespace(t *testing.T) {
	n, cfg := newTestCNI(t)
	p := testPod(t, "a")
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", n.NetNSName(p.UID)).Run() })
	if _, err := n.SetUp(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(madeDir(cfg.CacheDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(madeDir(cfg.CacheDir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	restarted, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.SetUp(t.Context(), p); err == nil || !strings.Contains(err.Error(), "record network namespace") {
		t.Errorf("set up without its record: %v, want the record's error", err)
	}
	if _, err := os.Stat(n.NetNSPath(p.UID)); err != nil {
		t.Errorf("netns of the running pod after a set up that failed to record it: %v, want it kept", err)
	}
	if err := os.Remove(madeDir(cfg.CacheDir)); err != nil {
		t.Fatal(err)
	}
}
