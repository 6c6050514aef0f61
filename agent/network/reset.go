package network

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/containernetworking/cni/libcni"
)

// ConfFileName is the file, in a node's CNI directory, that holds the
// network configuration list its pods were connected with (Config.ConfFile):
// what `skiff reset` disconnects them with, and what a student can read.
const ConfFileName = "10-skiff.conflist"

// WriteConfFile writes c's configuration list to c.ConfFile (nothing when
// ConfFile is ""), so that what the node made can be undone without the
// control plane (Reset).
func (c Config) WriteConfFile() error {
	if c.ConfFile == "" {
		return nil
	}
	raw, err := c.ConfList()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.ConfFile), 0o755); err != nil {
		return fmt.Errorf("write CNI config: %w", err)
	}
	tmp := c.ConfFile + ".tmp"
	if err := os.WriteFile(tmp, append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("write CNI config: %w", err)
	}
	if err := os.Rename(tmp, c.ConfFile); err != nil {
		return fmt.Errorf("write CNI config: %w", err)
	}
	return nil
}

// Exec runs one command (argv) with stdin when not nil and returns its
// stdout; an error means it failed. RunExec is the real one.
type Exec func(ctx context.Context, stdin []byte, argv ...string) ([]byte, error)

// RunExec runs argv as it is (Run without a wrap prefix).
func RunExec(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
	return Run(ctx, nil, stdin, argv[0], argv[1:]...)
}

// ResetConfig says what Reset removes: the pod network a node made with
// Config (its PodCIDR is not needed).
type ResetConfig struct {
	Config
	// PodUIDs are pods of the node (from its containers' labels) whose
	// network namespaces go too, besides those libcni's cache and the
	// node's record of the namespaces it made (madeDir) list.
	PodUIDs []string
	// NetNSDir is where named network namespaces live ("" = /run/netns).
	NetNSDir string
	// Exec runs the commands (nil = RunExec); node-network commands get
	// Config.Wrap in front, `ip netns delete` does not.
	Exec Exec
}

// Reset removes the pod network a node made, as `kubeadm reset` and
// k3s-killall do: every pod's network (CNI DEL through the configuration
// list the node wrote, which frees its address and removes its veth and
// iptables rules), the pods' network namespaces, leftover iptables rules
// and chains of these pods (those the plugins tag with the network's name
// and the pod's uid: a DEL without the namespace cannot find the
// addresses), the bridge, host-local's IPAM records and libcni's cache.
// say gets one line per thing removed. Nothing of other networks or other
// nodes is touched. Safe to repeat: a second run removes nothing.
func Reset(ctx context.Context, rc ResetConfig, say func(string)) error {
	if rc.NetNSDir == "" {
		rc.NetNSDir = netnsDir
	}
	if rc.Exec == nil {
		rc.Exec = RunExec
	}
	node := func(argv ...string) []string { return append(append([]string(nil), rc.Wrap...), argv...) }
	var errs []error
	uids := map[string]bool{}
	for _, u := range rc.PodUIDs {
		uids[u] = true
	}
	// 1. CNI DEL of every pod the cache records, with the node's own
	// configuration (it removes the veth, the address and the rules).
	if list, err := libcni.ConfListFromFile(rc.ConfFile); err == nil {
		cni := &CNI{cfg: rc.Config, list: list, locks: map[string]*sync.Mutex{},
			cni: libcni.NewCNIConfigWithCacheDir(rc.PluginDirs, rc.CacheDir, newWrapExec(rc.Wrap))}
		cni.loopback, _ = loopbackList(rc.NetworkName)
		atts, _ := cni.cni.GetCachedAttachments("")
		cached := map[string]bool{}
		for _, a := range atts {
			if a.Network == rc.NetworkName {
				cached[a.ContainerID], uids[a.ContainerID] = true, true
			}
		}
		for _, uid := range slices.Sorted(maps.Keys(cached)) {
			ns, name := podOf(atts, uid)
			if err := cni.TearDown(ctx, ns, name, uid); err != nil {
				errs = append(errs, err)
				continue
			}
			say(fmt.Sprintf("removed the network of pod %s/%s (CNI DEL: its address, veth, rules and network namespace %s)", ns, name, cni.NetNSName(uid)))
		}
	} else if !errors.Is(err, os.ErrNotExist) && rc.ConfFile != "" {
		errs = append(errs, fmt.Errorf("read CNI config %s: %w", rc.ConfFile, err))
	}
	// 2. The pods' network namespaces (those CNI DEL could not reach): of
	// the pods above, and every one the node recorded making (a node
	// killed while a pod's network was being set up or torn down).
	if rc.CacheDir != "" {
		made, err := madeNetNS(rc.CacheDir)
		if err != nil {
			errs = append(errs, err)
		}
		for _, uid := range made {
			uids[uid] = true
		}
	}
	for _, uid := range slices.Sorted(maps.Keys(uids)) {
		name := rc.NetNSPrefix + uid
		if _, err := os.Stat(filepath.Join(rc.NetNSDir, name)); err != nil {
			continue
		}
		if _, err := rc.Exec(ctx, nil, "ip", "netns", "delete", name); err != nil {
			errs = append(errs, fmt.Errorf("delete network namespace %s: %w", name, err))
			continue
		}
		say("removed network namespace " + name)
	}
	// 3. Leftover rules and chains the plugins tagged with these pods.
	if len(uids) > 0 {
		if err := resetCNIRules(ctx, rc, node, uids, say); err != nil {
			errs = append(errs, err)
		}
	}
	// 4. The bridge.
	if _, err := rc.Exec(ctx, nil, node("ip", "link", "show", "dev", rc.Bridge)...); err == nil {
		if _, err := rc.Exec(ctx, nil, node("ip", "link", "delete", "dev", rc.Bridge)...); err != nil {
			errs = append(errs, fmt.Errorf("delete bridge %s: %w", rc.Bridge, err))
		} else {
			say("removed bridge " + rc.Bridge)
		}
	}
	// 5. host-local's records, libcni's cache, the configuration.
	for _, d := range []struct{ path, what string }{
		{filepath.Join(rc.IPAMDataDir, rc.NetworkName), "host-local IPAM state"},
		{rc.CacheDir, "CNI cache"},
		{rc.ConfFile, "CNI config"},
	} {
		if d.path == "" {
			continue
		}
		if _, err := os.Lstat(d.path); err != nil {
			continue
		}
		if err := os.RemoveAll(d.path); err != nil {
			errs = append(errs, fmt.Errorf("remove %s %s: %w", d.what, d.path, err))
			continue
		}
		say("removed " + d.what + " " + d.path)
	}
	return errors.Join(errs...)
}

// ResetRoutes removes the routes to other nodes' pod CIDRs that Routes
// installed (those marked with RouteProto), as `ip route` lines.
func ResetRoutes(ctx context.Context, wrap []string, run Exec, say func(string)) error {
	if run == nil {
		run = RunExec
	}
	node := func(argv ...string) []string { return append(append([]string(nil), wrap...), argv...) }
	out, err := run(ctx, nil, node("ip", "-4", "route", "show", "proto", RouteProto)...)
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	have := parseRoutes(string(out))
	var errs []error
	for _, cidr := range slices.Sorted(maps.Keys(have)) {
		if _, err := run(ctx, nil, node("ip", "-4", "route", "del", cidr, "proto", RouteProto)...); err != nil {
			errs = append(errs, err)
			continue
		}
		say(fmt.Sprintf("removed route %s via %s", cidr, have[cidr]))
	}
	return errors.Join(errs...)
}

// resetCNIRules deletes the nat rules tagged for one of uids on this
// network (the bridge plugin's masquerade and portmap's DNAT: comment
// `name: "NET" id: "UID"`), and flushes and deletes the per-pod chains
// they are in or jump to (CNI-…, never the shared CNI-HOSTPORT-* ones).
func resetCNIRules(ctx context.Context, rc ResetConfig, node func(...string) []string, uids map[string]bool, say func(string)) error {
	save, err := rc.Exec(ctx, nil, node("iptables-save", "-t", "nat")...)
	if err != nil {
		return fmt.Errorf("read nat table: %w", err)
	}
	restore, chains := cniRuleCleanup(string(save), rc.NetworkName, uids)
	if restore == nil {
		return nil
	}
	if _, err := rc.Exec(ctx, restore, node("iptables-restore", "-w", "--noflush")...); err != nil {
		return fmt.Errorf("delete the pods' CNI rules: %w", err)
	}
	for _, c := range chains {
		say("removed iptables chain " + c + " (nat)")
	}
	if len(chains) == 0 {
		say("removed the pods' CNI iptables rules (nat)")
	}
	return nil
}

// cniRuleCleanup is the iptables-restore input that removes, from an
// `iptables-save -t nat` dump, the rules tagged for uids of network and
// the per-pod chains; nil when there is nothing. chains are those chains.
func cniRuleCleanup(save, network string, uids map[string]bool) (restore []byte, chains []string) {
	tagged := func(line string) bool {
		for uid := range uids {
			if strings.Contains(line, `name: \"`+network+`\" id: \"`+uid+`\"`) {
				return true
			}
		}
		return false
	}
	perPod := func(c string) bool { return strings.HasPrefix(c, "CNI-") && !strings.HasPrefix(c, "CNI-HOSTPORT-") }
	mine := map[string]bool{}
	var deletes []string
	for _, line := range strings.Split(save, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "-A" || !tagged(line) {
			continue
		}
		if perPod(f[1]) {
			mine[f[1]] = true
		} else {
			deletes = append(deletes, "-D"+strings.TrimPrefix(line, "-A"))
		}
		for i := 0; i+1 < len(f); i++ {
			if (f[i] == "-j" || f[i] == "-g") && perPod(f[i+1]) {
				mine[f[i+1]] = true
			}
		}
	}
	if len(deletes) == 0 && len(mine) == 0 {
		return nil, nil
	}
	chains = slices.Sorted(maps.Keys(mine))
	var b strings.Builder
	b.WriteString("*nat\n")
	for _, c := range chains {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	for _, d := range deletes {
		b.WriteString(d + "\n")
	}
	for _, c := range chains {
		fmt.Fprintf(&b, "-X %s\n", c)
	}
	b.WriteString("COMMIT\n")
	return []byte(b.String()), chains
}

// podOf is the namespace and name libcni's cache records for pod uid.
func podOf(atts []*libcni.NetworkAttachment, uid string) (ns, name string) {
	for _, a := range atts {
		if a.ContainerID != uid {
			continue
		}
		for _, kv := range a.CniArgs {
			switch kv[0] {
			case "K8S_POD_NAMESPACE":
				ns = kv[1]
			case "K8S_POD_NAME":
				name = kv[1]
			}
		}
	}
	return ns, name
}
