// Package network gives each pod its own network namespace, wired to the
// node through CNI, the plugin interface every Kubernetes runtime uses.
//
// # How a pod gets its network
//
// SetUp creates a named network namespace for the pod (as `ip netns add
// skiff-<pod uid>`: a file under /run/netns that keeps it alive without a
// process), then runs a CNI ADD of one network, a plugin chain generated
// from Config:
//
//   - bridge: a veth pair, one end (eth0) in the pod, the other on the
//     node's bridge (skiff0), which is the pods' gateway (isGateway) and
//     masquerades their traffic to the outside (ipMasq);
//   - host-local IPAM: an address from the node's pod CIDR (the control
//     plane gives every node a /24 of 10.244.0.0/16, spec.podCIDR);
//   - portmap: hostPort mappings, as iptables DNAT rules;
//
// and the loopback plugin brings up lo. The containers then join that
// namespace (PodNetwork.NetNSPath). The pod's container ID for CNI is its
// uid, so a restarted agent finds its pods' networks again: libcni caches
// every ADD's result under Config.CacheDir.
//
// TearDown runs CNI DEL (which frees the IP and removes the veth and port
// rules) and deletes the namespace. Both are idempotent: SetUp of a pod
// already set up returns the cached result; TearDown of a pod never set up
// (or already torn down) succeeds.
//
// The bridge itself stays when the last pod goes, as with every CNI
// bridge setup; it is the node's.
package network

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/api"
)

// Config of the pod network of one node.
type Config struct {
	// PodCIDR is the node's share of the cluster's pod addresses
	// (spec.podCIDR of its Node), e.g. 10.244.1.0/24. Required.
	PodCIDR string
	// NetworkName names the CNI network (and host-local's state directory).
	NetworkName string
	// Bridge is the node's bridge device (at most 15 characters).
	Bridge string
	// PluginDirs are searched for the CNI plugin binaries.
	PluginDirs []string
	// CacheDir is libcni's cache of ADD results (what TearDown and an
	// agent restart rely on).
	CacheDir string
	// IPAMDataDir is host-local's record of handed-out addresses.
	IPAMDataDir string
	// ConfFile, when set, gets the network configuration list (ConfList)
	// once the node's pod CIDR is known: the record Reset works from.
	ConfFile string
	// NetNSPrefix starts the name of every pod's network namespace.
	NetNSPrefix string
	// IPMasq masquerades pod traffic leaving the pod CIDR.
	IPMasq bool
	// MTU of the veths; 0 lets the plugin choose.
	MTU int
	// Wrap prefixes every command that changes the node's network (the
	// CNI plugins, ip route, iptables): nil runs them as they are; tests
	// run a whole "node" inside a network namespace of their own with
	// {"ip", "netns", "exec", NAME}. Pod namespaces are created unwrapped
	// (a named namespace made inside `ip netns exec` would vanish with
	// its private mount namespace).
	Wrap []string
}

// DefaultConfig is the network of a node with pod CIDR podCIDR.
func DefaultConfig(podCIDR string) Config {
	return Config{
		PodCIDR:     podCIDR,
		NetworkName: "skiff",
		Bridge:      "skiff0",
		// Debian's containernetworking-plugins; /opt/cni/bin is where
		// upstream's release tarball goes.
		PluginDirs:  []string{"/usr/lib/cni", "/opt/cni/bin"},
		CacheDir:    "/var/lib/skiff/cni/cache",
		IPAMDataDir: "/var/lib/skiff/cni/networks",
		NetNSPrefix: "skiff-",
		// Pods reach the outside world (image-less tests, DNS) through
		// the node's address, as with every bridge CNI setup.
		IPMasq: true,
	}
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	if p, err := netip.ParsePrefix(c.PodCIDR); err != nil {
		errs = append(errs, fmt.Errorf("pod CIDR %q: %w", c.PodCIDR, err))
	} else if !p.Addr().Is4() || p.Bits() > 30 {
		errs = append(errs, fmt.Errorf("pod CIDR %s: want an IPv4 prefix of /30 or wider", p))
	}
	if c.NetworkName == "" {
		errs = append(errs, errors.New("network name is empty"))
	}
	if c.Bridge == "" || len(c.Bridge) > 15 {
		errs = append(errs, fmt.Errorf("bridge %q: want 1 to 15 characters", c.Bridge))
	}
	if len(c.PluginDirs) == 0 {
		errs = append(errs, errors.New("no CNI plugin directory"))
	}
	if c.CacheDir == "" || c.IPAMDataDir == "" {
		errs = append(errs, errors.New("CNI cache and IPAM data directories are required"))
	}
	if c.NetNSPrefix == "" || strings.ContainsAny(c.NetNSPrefix, "/ ") {
		errs = append(errs, fmt.Errorf("netns prefix %q: want a non-empty name without / or spaces", c.NetNSPrefix))
	}
	return errors.Join(errs...)
}

// ConfList is the CNI network configuration list c describes.
func (c Config) ConfList() ([]byte, error) {
	p, err := netip.ParsePrefix(c.PodCIDR)
	if err != nil {
		return nil, fmt.Errorf("pod CIDR %q: %w", c.PodCIDR, err)
	}
	p = p.Masked()
	bridge := map[string]any{
		"type":             "bridge",
		"bridge":           c.Bridge,
		"isGateway":        true,
		"ipMasq":           c.IPMasq,
		"hairpinMode":      true, // a pod reaches itself through a service IP
		"forceAddress":     false,
		"promiscMode":      false,
		"isDefaultGateway": true,
		"ipam": map[string]any{
			"type":    "host-local",
			"dataDir": c.IPAMDataDir,
			"ranges":  [][]map[string]string{{{"subnet": p.String()}}},
			// No routes: isDefaultGateway adds the default route.
		},
	}
	if c.MTU > 0 {
		bridge["mtu"] = c.MTU
	}
	list := map[string]any{
		"cniVersion": "1.0.0",
		"name":       c.NetworkName,
		"plugins": []any{
			bridge,
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}, "snat": true},
		},
	}
	return json.MarshalIndent(list, "", "  ")
}

// CNI is the pod network of one node. Safe for concurrent use: set-ups and
// tear-downs of one pod are serialized, different pods run in parallel.
type CNI struct {
	cfg      Config
	cni      *libcni.CNIConfig
	list     *libcni.NetworkConfigList
	loopback *libcni.NetworkConfigList

	mu    sync.Mutex
	locks map[string]*sync.Mutex // per pod uid
}

var _ podworker.Network = (*CNI)(nil)

// New checks cfg and the plugins it needs; nothing changes on the node
// until the first SetUp.
func New(cfg Config) (*CNI, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("pod network: %w", err)
	}
	var missing []string
	for _, plugin := range []string{"bridge", "host-local", "portmap", "loopback"} {
		if !pluginExists(cfg.PluginDirs, plugin) {
			missing = append(missing, plugin)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("pod network: CNI plugins %s not found in %s (install containernetworking-plugins)",
			strings.Join(missing, ", "), strings.Join(cfg.PluginDirs, ":"))
	}
	raw, err := cfg.ConfList()
	if err != nil {
		return nil, fmt.Errorf("pod network: %w", err)
	}
	list, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("pod network: parse generated CNI config: %w", err)
	}
	lo, err := loopbackList(cfg.NetworkName)
	if err != nil {
		return nil, fmt.Errorf("pod network: parse loopback config: %w", err)
	}
	return &CNI{
		cfg:      cfg,
		cni:      libcni.NewCNIConfigWithCacheDir(cfg.PluginDirs, cfg.CacheDir, newWrapExec(cfg.Wrap)),
		list:     list,
		loopback: lo,
		locks:    map[string]*sync.Mutex{},
	}, nil
}

func pluginExists(dirs []string, name string) bool {
	for _, d := range dirs {
		if fi, err := os.Stat(filepath.Join(d, name)); err == nil && !fi.IsDir() {
			return true
		}
	}
	return false
}

// NetNSName is the name of the network namespace of pod uid.
func (c *CNI) NetNSName(uid string) string { return c.cfg.NetNSPrefix + uid }

// NetNSPath is the path of the network namespace of pod uid.
func (c *CNI) NetNSPath(uid string) string { return filepath.Join(netnsDir, c.NetNSName(uid)) }

// netnsDir is where `ip netns` keeps named namespaces.
const netnsDir = "/run/netns"

// loopbackName is the CNI network that brings up a pod's lo, beside
// network's (its own list: a pod's lo is up before its network is).
func loopbackName(network string) string { return network + "-lo" }

// madeDir is where a node records the pods' network namespaces it made, a
// file per pod uid, beside libcni's records in cacheDir: written before
// `ip netns add`, removed after `ip netns delete`, so that a namespace
// outlives its record at no moment, whenever the agent is killed. Reset
// removes the namespaces it lists; nothing else knows of one whose pod's
// CNI ADD or DEL was cut short.
func madeDir(cacheDir string) string { return filepath.Join(cacheDir, "skiff-netns") }

// madeNetNS lists the pod uids madeDir(cacheDir) records.
func madeNetNS(cacheDir string) ([]string, error) {
	entries, err := os.ReadDir(madeDir(cacheDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the record of pod network namespaces: %w", err)
	}
	uids := make([]string, 0, len(entries))
	for _, e := range entries {
		uids = append(uids, e.Name())
	}
	return uids, nil
}

// loopbackList is loopbackName(network)'s configuration list.
func loopbackList(network string) (*libcni.NetworkConfigList, error) {
	return libcni.ConfListFromBytes([]byte(`{"cniVersion":"1.0.0","name":"` + loopbackName(network) + `","plugins":[{"type":"loopback"}]}`))
}

// ifName is the pod's interface.
const ifName = "eth0"

// lock serializes the work on one pod.
func (c *CNI) lock(uid string) func() {
	c.mu.Lock()
	l, ok := c.locks[uid]
	if !ok {
		l = &sync.Mutex{}
		c.locks[uid] = l
	}
	c.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// SetUp creates pod's network namespace and connects it; it returns the
// pod's IP and the namespace's path. A pod already set up gets the same
// answer again.
func (c *CNI) SetUp(ctx context.Context, pod *api.Pod) (podworker.PodNetwork, error) {
	uid := pod.UID
	if uid == "" {
		return podworker.PodNetwork{}, fmt.Errorf("set up network of pod %s: no uid", api.KeyOf(pod))
	}
	defer c.lock(uid)()
	path := c.NetNSPath(uid)
	created, err := c.ensureNetNS(ctx, uid)
	if err != nil {
		return podworker.PodNetwork{}, fmt.Errorf("set up network of pod %s: %w", api.KeyOf(pod), err)
	}
	rt := c.runtimeConf(pod.Namespace, pod.Name, uid, path)
	rt.CapabilityArgs = map[string]any{"portMappings": portMappings(pod)}
	loRT := c.loopbackRuntimeConf(pod.Namespace, pod.Name, uid, path)
	// fail leaves nothing half done, so that the next SetUp starts clean
	// and nothing outlives a pod that never ran: a SetUp cut short (the
	// agent stopped with Ctrl-C while a pod was starting, a plugin
	// failed) releases what it made, the namespace too when it made it.
	// Else only madeDir would know of that namespace until the pod is
	// deleted (Retain) or the node reset: no container joined it.
	fail := func(err error) (podworker.PodNetwork, error) {
		bg := context.WithoutCancel(ctx)
		_ = c.cni.DelNetworkList(bg, c.list, rt)
		if created {
			_ = c.cni.DelNetworkList(bg, c.loopback, loRT)
			_ = c.deleteNetNS(bg, uid)
		}
		return podworker.PodNetwork{}, fmt.Errorf("set up network of pod %s: %w", api.KeyOf(pod), err)
	}
	if created {
		// A new, empty namespace for a pod CNI remembers (the machine
		// rebooted: /run/netns is tmpfs, the CNI cache is not): the cached
		// result describes an interface that no longer exists. Release it
		// and connect afresh.
		_ = c.cni.DelNetworkList(context.WithoutCancel(ctx), c.list, rt)
	} else if cached, err := c.cni.GetNetworkListCachedResult(c.list, rt); err == nil && cached != nil {
		if ip, err := podIP(cached); err == nil {
			return podworker.PodNetwork{IP: ip, NetNSPath: path}, nil
		}
	}
	if _, err := c.cni.AddNetworkList(ctx, c.loopback, loRT); err != nil {
		return fail(fmt.Errorf("loopback: %w", err))
	}
	res, err := c.cni.AddNetworkList(ctx, c.list, rt)
	if err != nil {
		return fail(fmt.Errorf("CNI ADD: %w", err))
	}
	ip, err := podIP(res)
	if err != nil {
		return fail(err)
	}
	return podworker.PodNetwork{IP: ip, NetNSPath: path}, nil
}

// TearDown disconnects the pod and deletes its namespace. Unknown pods
// and pods already torn down are fine.
func (c *CNI) TearDown(ctx context.Context, namespace, name, uid string) error {
	if uid == "" {
		return nil
	}
	defer c.lock(uid)()
	path := c.NetNSPath(uid)
	nsPath := path
	if _, err := os.Stat(path); err != nil {
		nsPath = "" // gone already: DEL still frees the IP and port rules
	}
	rt := c.runtimeConf(namespace, name, uid, nsPath)
	if _, cachedRT, err := c.cni.GetNetworkListCachedConfig(c.list, rt); err == nil && cachedRT != nil {
		rt.CapabilityArgs = cachedRT.CapabilityArgs
	}
	if err := c.cni.DelNetworkList(ctx, c.list, rt); err != nil {
		return fmt.Errorf("tear down network of pod %s/%s: CNI DEL: %w", namespace, name, err)
	}
	// The pod is off the network: what is left is quick and local, and
	// is finished even when ctx ends now (the agent stopped with Ctrl-C
	// while a pod was being deleted), so that no namespace is left that
	// only madeDir knows.
	ctx = context.WithoutCancel(ctx)
	loRT := c.loopbackRuntimeConf(namespace, name, uid, nsPath)
	if err := c.cni.DelNetworkList(ctx, c.loopback, loRT); err != nil {
		return fmt.Errorf("tear down network of pod %s/%s: loopback: %w", namespace, name, err)
	}
	if err := c.deleteNetNS(ctx, uid); err != nil {
		return fmt.Errorf("tear down network of pod %s/%s: %w", namespace, name, err)
	}
	c.mu.Lock()
	delete(c.locks, uid)
	c.mu.Unlock()
	return nil
}

func (c *CNI) runtimeConf(namespace, name, uid, netns string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: uid,
		NetNS:       netns,
		IfName:      ifName,
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", namespace},
			{"K8S_POD_NAME", name},
			{"K8S_POD_INFRA_CONTAINER_ID", uid},
			{"K8S_POD_UID", uid},
		},
	}
}

// loopbackRuntimeConf is runtimeConf for the loopback network's ADD and
// DEL: the same pod, its lo.
func (c *CNI) loopbackRuntimeConf(namespace, name, uid, netns string) *libcni.RuntimeConf {
	rt := c.runtimeConf(namespace, name, uid, netns)
	rt.IfName = "lo"
	return rt
}

// ensureNetNS creates the pod's named namespace unless it exists, and
// reports whether it created it. Either way madeDir records it first. It
// fails leaving a namespace that existed as it was (a running pod's, when
// the agent restarted), and removes one `ip netns add` may have made
// before it failed (a cancel kills it midway).
func (c *CNI) ensureNetNS(ctx context.Context, uid string) (bool, error) {
	dir := madeDir(c.cfg.CacheDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("record network namespace %s: %w", c.NetNSName(uid), err)
	}
	if err := os.WriteFile(filepath.Join(dir, uid), nil, 0o600); err != nil {
		return false, fmt.Errorf("record network namespace %s: %w", c.NetNSName(uid), err)
	}
	if _, err := os.Stat(c.NetNSPath(uid)); err == nil {
		return false, nil
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "add", c.NetNSName(uid)).CombinedOutput(); err != nil {
		_ = c.deleteNetNS(context.WithoutCancel(ctx), uid)
		return false, fmt.Errorf("create network namespace %s: %w: %s", c.NetNSName(uid), err, strings.TrimSpace(string(out)))
	}
	return true, nil
}

// deleteNetNS deletes the pod's named namespace if it exists, then its
// record (madeDir).
func (c *CNI) deleteNetNS(ctx context.Context, uid string) error {
	if _, err := os.Stat(c.NetNSPath(uid)); !errors.Is(err, os.ErrNotExist) {
		if out, err := exec.CommandContext(ctx, "ip", "netns", "delete", c.NetNSName(uid)).CombinedOutput(); err != nil {
			return fmt.Errorf("delete network namespace %s: %w: %s", c.NetNSName(uid), err, strings.TrimSpace(string(out)))
		}
	}
	if err := os.Remove(filepath.Join(madeDir(c.cfg.CacheDir), uid)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete the record of network namespace %s: %w", c.NetNSName(uid), err)
	}
	return nil
}

// portMappings are the hostPorts of pod's containers, for portmap.
func portMappings(pod *api.Pod) []map[string]any {
	out := []map[string]any{}
	for _, ctr := range pod.Spec.Containers {
		for _, p := range ctr.Ports {
			if p.HostPort == 0 {
				continue
			}
			proto := strings.ToLower(p.Protocol)
			if proto == "" {
				proto = "tcp"
			}
			out = append(out, map[string]any{"hostPort": p.HostPort, "containerPort": p.ContainerPort, "protocol": proto})
		}
	}
	return out
}

// podIP is the first IPv4 address of a CNI result.
func podIP(res types.Result) (string, error) {
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return "", fmt.Errorf("read CNI result: %w", err)
	}
	for _, ip := range r.IPs {
		if v4 := ip.Address.IP.To4(); v4 != nil {
			return v4.String(), nil
		}
	}
	return "", errors.New("the CNI result has no IPv4 address")
}
