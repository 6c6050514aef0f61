package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/runtime"
	rtfake "skiff.dev/skiff/runtime/fake"
)

// fakeHost is what ip and iptables change on a machine, for Reset's unit
// tests: named network namespaces (files in a directory, as /run/netns),
// links, the nat table (chain → rules, in iptables-save's words) and
// routes of proto 157.
type fakeHost struct {
	netnsDir string
	links    map[string]bool
	chains   []string            // in order
	rules    map[string][]string // chain → rule specs after "-A CHAIN "
	routes   []string
	ran      []string
}

func newFakeHost(t *testing.T) *fakeHost {
	return &fakeHost{netnsDir: t.TempDir(), links: map[string]bool{"eth0": true}, rules: map[string][]string{},
		chains: []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"}}
}

func (h *fakeHost) addRule(chain, spec string) {
	if !slices.Contains(h.chains, chain) {
		h.chains = append(h.chains, chain)
	}
	h.rules[chain] = append(h.rules[chain], spec)
}

func (h *fakeHost) save() string {
	var b strings.Builder
	b.WriteString("*nat\n")
	for _, c := range h.chains {
		policy := "-"
		if strings.ToUpper(c) == c && !strings.Contains(c, "-") {
			policy = "ACCEPT"
		}
		fmt.Fprintf(&b, ":%s %s [0:0]\n", c, policy)
	}
	for _, c := range h.chains {
		for _, r := range h.rules[c] {
			fmt.Fprintf(&b, "-A %s %s\n", c, r)
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// quote joins argv as iptables-save prints a rule (words with spaces in
// double quotes).
func quote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if strings.ContainsAny(a, " \"") {
			a = `"` + strings.ReplaceAll(a, `"`, `\"`) + `"`
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

func (h *fakeHost) delete(chain, spec string) error {
	i := slices.Index(h.rules[chain], spec)
	if i < 0 {
		return fmt.Errorf("iptables: Bad rule (does a matching rule exist in that chain?): -D %s %s", chain, spec)
	}
	h.rules[chain] = slices.Delete(h.rules[chain], i, i+1)
	return nil
}

func (h *fakeHost) exec(_ context.Context, stdin []byte, argv ...string) ([]byte, error) {
	h.ran = append(h.ran, strings.Join(argv, " "))
	switch {
	case len(argv) == 4 && argv[0] == "ip" && argv[1] == "netns" && argv[2] == "delete":
		return nil, os.Remove(filepath.Join(h.netnsDir, argv[3]))
	case len(argv) == 5 && argv[0] == "ip" && argv[1] == "link" && argv[3] == "dev":
		if !h.links[argv[4]] {
			return nil, fmt.Errorf("Device %q does not exist", argv[4])
		}
		if argv[2] == "delete" {
			delete(h.links, argv[4])
		}
		return nil, nil
	case slices.Equal(argv, []string{"ip", "-4", "route", "show", "proto", "157"}):
		return []byte(strings.Join(h.routes, "\n")), nil
	case len(argv) == 7 && argv[0] == "ip" && argv[3] == "del":
		h.routes = slices.DeleteFunc(h.routes, func(r string) bool { return strings.HasPrefix(r, argv[4]+" ") })
		return nil, nil
	case argv[0] == "iptables-save":
		return []byte(h.save()), nil
	case argv[0] == "iptables" && len(argv) > 5 && argv[4] == "-D":
		return nil, h.delete(argv[5], quote(argv[6:]))
	case argv[0] == "iptables-restore":
		for _, line := range strings.Split(string(stdin), "\n") {
			f := strings.Fields(line)
			switch {
			case strings.HasPrefix(line, ":"):
				if c := f[0][1:]; slices.Contains(h.chains, c) {
					h.rules[c] = nil
				} else {
					h.chains = append(h.chains, c)
				}
			case len(f) > 1 && f[0] == "-D":
				if err := h.delete(f[1], strings.TrimPrefix(line, "-D "+f[1]+" ")); err != nil {
					return nil, err
				}
			case len(f) > 1 && f[0] == "-X":
				for _, c := range h.chains {
					for _, r := range h.rules[c] {
						if strings.HasSuffix(r, "-j "+f[1]) {
							return nil, fmt.Errorf("chain %s is referenced", f[1])
						}
					}
				}
				h.chains = slices.DeleteFunc(h.chains, func(c string) bool { return c == f[1] })
				delete(h.rules, f[1])
			}
		}
		return nil, nil
	}
	return nil, fmt.Errorf("fake host: unexpected command %q", argv)
}

// resetFixture is a data dir whose node "lab" ran two pods on CNI and the
// machine's service proxy, next to another node's pod ("other", sharing
// containerd's namespace) that Reset must leave alone.
type resetFixture struct {
	dir  string
	rt   *rtfake.Runtime
	host *fakeHost
	out  bytes.Buffer
}

func newResetFixture(t *testing.T) *resetFixture {
	t.Helper()
	f := &resetFixture{dir: t.TempDir(), rt: rtfake.New(rtfake.DefaultConfig()), host: newFakeHost(t)}
	rec := Record{Name: "lab", Runtime: RuntimeContainerd, ContainerdAddress: "/unused.sock", ContainerdNamespace: "skiff",
		PodNetwork: NetworkCNI, Bridge: "skiff0", NetNSPrefix: "skiff-", ServiceProxy: true}
	if err := writeRecord(f.dir, rec); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := f.rt.EnsureImage(ctx, "busybox", runtime.PullIfNotPresent, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ node, uid, pod, ctr string }{
		{"lab", "uid-1", "web-0", "nginx"}, {"lab", "uid-1", "web-0", "sidecar"}, {"lab", "uid-2", "web-1", "nginx"}, {"other", "uid-9", "db-0", "db"},
	} {
		id, err := f.rt.CreateContainer(ctx, runtime.ContainerSpec{Image: "busybox", Labels: map[string]string{
			podworker.LabelNode: c.node, runtime.LabelPodUID: c.uid, runtime.LabelPodNamespace: "default", runtime.LabelPodName: c.pod, runtime.LabelContainerName: c.ctr}})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.rt.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"skiff-uid-1", "skiff-uid-2", "skiff-uid-9"} {
		if err := os.WriteFile(filepath.Join(f.host.netnsDir, ns), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f.host.links["skiff0"], f.host.links["skiff1"] = true, true
	for _, d := range []string{"cni/networks/skiff", "cni/cache/results"} {
		if err := os.MkdirAll(filepath.Join(f.dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	h := f.host
	h.addRule("PREROUTING", `-m comment --comment "skiff service portals" -j SKIFF-SERVICES`)
	h.addRule("OUTPUT", `-m comment --comment "skiff service portals" -j SKIFF-SERVICES`)
	h.addRule("POSTROUTING", `-m comment --comment "skiff service masquerade" -j SKIFF-POSTROUTING`)
	h.addRule("POSTROUTING", `-s 10.244.0.2/32 -m comment --comment "name: \"skiff\" id: \"uid-1\"" -j CNI-aaaa`)
	h.addRule("POSTROUTING", `-s 10.244.1.2/32 -m comment --comment "name: \"skiff\" id: \"uid-9\"" -j CNI-bbbb`)
	h.addRule("POSTROUTING", `-j KUBE-POSTROUTING`)
	h.addRule("SKIFF-SERVICES", `-d 10.96.0.1/32 -p tcp -m tcp --dport 443 -j SKIFF-SVC-X`)
	h.addRule("SKIFF-SVC-X", `-j SKIFF-MARK-MASQ`)
	h.addRule("SKIFF-MARK-MASQ", `-j MARK --set-xmark 0x4000/0x4000`)
	h.addRule("SKIFF-POSTROUTING", `-j MASQUERADE`)
	h.addRule("CNI-aaaa", `! -d 224.0.0.0/4 -m comment --comment "name: \"skiff\" id: \"uid-1\"" -j MASQUERADE`)
	h.addRule("CNI-bbbb", `! -d 224.0.0.0/4 -m comment --comment "name: \"skiff\" id: \"uid-9\"" -j MASQUERADE`)
	h.addRule("KUBE-POSTROUTING", `-j RETURN`)
	h.routes = []string{"10.244.1.0/24 via 10.0.0.2 dev eth0 proto 157 "}
	return f
}

func (f *resetFixture) config() ResetConfig {
	return ResetConfig{DataDir: f.dir, Runtime: f.rt, Exec: f.host.exec, NetNSDir: f.host.netnsDir,
		Say: func(s string) { fmt.Fprintln(&f.out, s) }}
}

func TestReset(t *testing.T) {
	f := newResetFixture(t)
	ctx := context.Background()
	removed, err := Reset(ctx, f.config())
	if err != nil || !removed {
		t.Fatalf("Reset: %v, removed %v", err, removed)
	}
	out := f.out.String()
	t.Logf("skiff reset said:\n%s", out)
	for _, want := range []string{
		"(pod default/web-0, container nginx)\n", "(pod default/web-0, container sidecar)\n", "(pod default/web-1, container nginx)\n",
		"removed network namespace skiff-uid-1\n", "removed network namespace skiff-uid-2\n",
		"removed iptables chain CNI-aaaa (nat)\n",
		"removed bridge skiff0\n",
		"removed host-local IPAM state " + filepath.Join(f.dir, "cni/networks/skiff") + "\n",
		"removed CNI cache " + filepath.Join(f.dir, "cni/cache") + "\n",
		"removed iptables chain SKIFF-SERVICES (nat)\n", "removed iptables chain SKIFF-SVC-X (nat)\n", "removed iptables chain SKIFF-POSTROUTING (nat)\n",
		"removed route 10.244.1.0/24 via 10.0.0.2\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Gone: this node's containers, namespaces, rules, bridge, routes.
	cs, _ := f.rt.ListContainers(ctx, nil)
	if len(cs) != 1 || cs[0].Labels[podworker.LabelNode] != "other" {
		t.Errorf("containers left: %+v, want only the other node's", cs)
	}
	left, _ := filepath.Glob(filepath.Join(f.host.netnsDir, "*"))
	if len(left) != 1 || filepath.Base(left[0]) != "skiff-uid-9" {
		t.Errorf("network namespaces left %v, want only the other node's skiff-uid-9", left)
	}
	save := f.host.save()
	for _, gone := range []string{"SKIFF-", "uid-1", "CNI-aaaa"} {
		if strings.Contains(save, gone) {
			t.Errorf("nat table still has %s:\n%s", gone, save)
		}
	}
	for _, kept := range []string{`id: \"uid-9\"" -j CNI-bbbb`, "-A CNI-bbbb", "-A POSTROUTING -j KUBE-POSTROUTING", "-A KUBE-POSTROUTING -j RETURN"} {
		if !strings.Contains(save, kept) {
			t.Errorf("nat table lost %q (not skiff's or another node's):\n%s", kept, save)
		}
	}
	if f.host.links["skiff0"] || !f.host.links["skiff1"] || !f.host.links["eth0"] {
		t.Errorf("links %v: want skiff0 gone, skiff1 (another node's) and eth0 kept", f.host.links)
	}
	if len(f.host.routes) != 0 {
		t.Errorf("routes left %v", f.host.routes)
	}
	if _, err := os.Stat(filepath.Join(f.dir, RecordFile)); err != nil {
		t.Errorf("without --remove-data-dir the data dir stays: %v", err)
	}

	// Again: nothing to remove, nothing said.
	f.out.Reset()
	removed, err = Reset(ctx, f.config())
	if err != nil || removed || f.out.Len() != 0 {
		t.Errorf("second Reset: %v, removed %v, said %q; want nothing", err, removed, f.out.String())
	}
}

func TestResetRefusesWhileRunning(t *testing.T) {
	f := newResetFixture(t)
	release, err := lockDataDir(f.dir) // a running node
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ranBefore := len(f.host.ran)
	removed, err := Reset(context.Background(), f.config())
	var re *RunningError
	if !errors.As(err, &re) || !errors.Is(err, ErrRunning) || re.PID != os.Getpid() {
		t.Fatalf("Reset: %v, want a RunningError naming pid %d", err, os.Getpid())
	}
	want := fmt.Sprintf("reset: skiff (pid %d) is running on data dir %s: stop it first (Ctrl-C on skiff up or skiff agent), then run skiff reset again", os.Getpid(), f.dir)
	if err.Error() != want {
		t.Errorf("error %q\nwant  %q", err, want)
	}
	cs, _ := f.rt.ListContainers(context.Background(), nil)
	if removed || len(cs) != 4 || len(f.host.ran) != ranBefore || f.out.Len() != 0 {
		t.Errorf("a refused reset changed something: removed %v, %d containers, ran %q, said %q", removed, len(cs), f.host.ran[ranBefore:], f.out.String())
	}
	// A node of `skiff up --nodes 2` (DATA/nodes/NAME) holds it too.
	release()
	sub := filepath.Join(f.dir, "nodes", "lab-2")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeRecord(sub, Record{Name: "lab-2", Runtime: RuntimeFake, PodNetwork: NetworkNone}); err != nil {
		t.Fatal(err)
	}
	release2, err := lockDataDir(sub)
	if err != nil {
		t.Fatal(err)
	}
	defer release2()
	if _, err := Reset(context.Background(), f.config()); !errors.Is(err, ErrRunning) || !strings.Contains(err.Error(), sub) {
		t.Errorf("Reset with nodes/lab-2 running: %v, want it refused naming %s", err, sub)
	}
}

func TestResetRemoveDataDir(t *testing.T) {
	f := newResetFixture(t)
	cfg := f.config()
	cfg.RemoveDataDir = true
	if _, err := Reset(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data dir %s: %v, want removed", f.dir, err)
	}
	if !strings.HasSuffix(f.out.String(), "removed data dir "+f.dir+"\n") {
		t.Errorf("output:\n%s\nwant it to end with the data dir", f.out.String())
	}
	f.out.Reset()
	if removed, err := Reset(context.Background(), cfg); err != nil || removed {
		t.Errorf("Reset of a removed data dir: %v, removed %v; want nothing to remove", err, removed)
	}
}

func TestStartLocksDataDir(t *testing.T) {
	dir := t.TempDir()
	release, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockDataDir(dir)
	if !errors.Is(err, ErrRunning) {
		t.Errorf("second lock: %v, want ErrRunning", err)
	}
	release()
	release, err = lockDataDir(dir)
	if err != nil {
		t.Errorf("lock after release: %v", err)
	} else {
		release()
	}
}

// A killed agent whose data directory was too deep for unix sockets
// leaves its plugin sockets in /tmp/skiff-sock-HASH: reset removes that
// directory when it is the agent's (0700, this user's), and only then.
func TestResetRemovesTheShortSocketDir(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []os.FileMode{0o700, 0o777} {
		dataDir := filepath.Join(t.TempDir(), strings.Repeat("d", 90))
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := writeRecord(dataDir, Record{Name: "n1", Runtime: RuntimeFake, PodNetwork: NetworkNone}); err != nil {
			t.Fatal(err)
		}
		dir := agent.ShortSocketDir(dataDir)
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.MkdirAll(filepath.Join(dir, "plugins_registry"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "plugins_registry", "gpu.nvidia.com-reg.sock"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		removed, err := Reset(ctx, ResetConfig{DataDir: dataDir, Say: func(s string) { fmt.Fprintln(&out, s) }})
		if err != nil {
			t.Fatal(err)
		}
		_, statErr := os.Stat(dir)
		if mode == 0o777 {
			if removed || statErr != nil {
				t.Errorf("a directory of mode %v (not an agent's) was removed: %v, %q", mode, statErr, out.String())
			}
			continue
		}
		if !removed || !os.IsNotExist(statErr) || out.String() != "removed plugin socket directory "+dir+"\n" {
			t.Fatalf("Reset: removed %v, %s still there: %v; said %q", removed, dir, statErr, out.String())
		}
		if removed, err := Reset(ctx, ResetConfig{DataDir: dataDir}); removed || err != nil {
			t.Errorf("second Reset: removed %v, %v; want nothing", removed, err)
		}
	}
}
