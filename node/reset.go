package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/agent/network"
	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/agent/proxy"
	"skiff.dev/skiff/runtime"
	ctrd "skiff.dev/skiff/runtime/containerd"
)

// ResetConfig says what Reset cleans.
type ResetConfig struct {
	// DataDir is the data directory of `skiff up`, `skiff server` or
	// `skiff agent`: its node (DataDir) or nodes (DataDir/nodes/NAME).
	DataDir string
	// RemoveDataDir removes DataDir itself at the end (the cluster's
	// store, CA, token, pod volumes: everything).
	RemoveDataDir bool
	// Runtime, when set, is the containerd runtime to remove the
	// containers through instead of the one the node recorded (tests).
	Runtime runtime.Runtime
	// NetNS, when set, is the network namespace the nodes' network lived
	// in (tests, as Config.NetNS; its PodPrefix is ignored: the node
	// recorded its own).
	NetNS *NetNS
	// Exec runs the ip and iptables commands (nil: network.RunExec);
	// NetNSDir is where named network namespaces live ("" = /run/netns).
	// Unit tests fake both.
	Exec     network.Exec
	NetNSDir string
	// Say gets one line per thing removed.
	Say func(string)
}

// Reset stops and removes what skiff's nodes on DataDir left on the
// machine, as `kubeadm reset` and k3s-killall.sh do: their containers (in
// their containerd namespace, those labelled with the node's name), their
// pods' network (network.Reset: CNI DEL, network namespaces, the pods'
// iptables rules, the bridge, host-local's IPAM directory), the service
// proxy's SKIFF-* chains and the routes to other nodes' pods, and with
// RemoveDataDir the data directory. It works from what each node recorded
// at start (RecordFile) and refuses, changing nothing, while a skiff
// process holds the directory (*RunningError). It reports whether it
// removed anything: a second run removes nothing.
func Reset(ctx context.Context, cfg ResetConfig) (removed bool, err error) {
	say := func(s string) {
		removed = true
		if cfg.Say != nil {
			cfg.Say(s)
		}
	}
	if cfg.DataDir == "" {
		return false, errors.New("reset: data dir is required")
	}
	if abs, err := filepath.Abs(cfg.DataDir); err == nil {
		cfg.DataDir = abs
	}
	if _, err := os.Stat(cfg.DataDir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	dirs := nodeDirs(cfg.DataDir)
	// Refuse before touching anything.
	for _, d := range dirs {
		for _, f := range []string{LockFile, storeFile} {
			if err := checkUnlocked(d, filepath.Join(d, f)); err != nil {
				return false, fmt.Errorf("reset: %w", err)
			}
		}
	}
	var errs []error
	proxyDone := false
	for _, d := range dirs {
		rec, err := readRecord(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue // not a node's directory (or a skiff before records)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		uids, err := resetContainers(ctx, cfg, rec, say)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", rec.Name, err))
		}
		if err := resetSocketDir(d, say); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", rec.Name, err))
		}
		if rec.PodNetwork != NetworkCNI {
			continue
		}
		if err := resetNetwork(ctx, cfg, d, rec, uids, say); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", rec.Name, err))
		}
		if rec.ServiceProxy && !proxyDone {
			proxyDone = true
			if err := resetNodeNetwork(ctx, cfg, say); err != nil {
				errs = append(errs, fmt.Errorf("node %s: %w", rec.Name, err))
			}
		}
	}
	if cfg.RemoveDataDir {
		if err := os.RemoveAll(cfg.DataDir); err != nil {
			errs = append(errs, fmt.Errorf("remove data dir: %w", err))
		} else {
			say("removed data dir " + cfg.DataDir)
		}
	}
	return removed, errors.Join(errs...)
}

// storeFile is the API server's bbolt store in a data directory
// (controlplane/store.StateFile), which bbolt flocks while it is open.
const storeFile = "state.db"

// nodeDirs are the directories nodes may have kept their state in:
// dataDir itself (`skiff agent`, a one-node `skiff up`) and
// dataDir/nodes/* (`skiff up --nodes N`).
func nodeDirs(dataDir string) []string {
	dirs := []string{dataDir}
	more, _ := filepath.Glob(filepath.Join(dataDir, "nodes", "*", RecordFile))
	sort.Strings(more)
	for _, m := range more {
		dirs = append(dirs, filepath.Dir(m))
	}
	return dirs
}

// resetSocketDir removes the short directory the node's agent kept its
// plugin sockets in, outside its data directory too deep for them
// (agent.RemoveShortSocketDir): an agent killed leaves it behind.
func resetSocketDir(dataDir string, say func(string)) error {
	dir, err := agent.RemoveShortSocketDir(dataDir)
	if dir != "" {
		say("removed plugin socket directory " + dir)
	}
	return err
}

// resetContainers stops and removes the node's containers; it returns
// the uids of their pods.
func resetContainers(ctx context.Context, cfg ResetConfig, rec Record, say func(string)) (uids []string, err error) {
	rt := cfg.Runtime
	if rt == nil {
		if rec.Runtime != RuntimeContainerd {
			return nil, nil // simulated pods leave nothing behind
		}
		cc := ctrd.DefaultConfig()
		cc.Address, cc.Namespace = rec.ContainerdAddress, rec.ContainerdNamespace
		cc.StateDir = filepath.Join(cfg.DataDir, "containers")
		r, err := ctrd.New(ctx, cc)
		if err != nil {
			return nil, fmt.Errorf("containerd at %s: %w", rec.ContainerdAddress, err)
		}
		defer r.Close()
		rt = r
	}
	cs, err := rt.ListContainers(ctx, map[string]string{podworker.LabelNode: rec.Name})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	sort.Slice(cs, func(i, j int) bool { return containerOrder(cs[i]) < containerOrder(cs[j]) })
	seen := map[string]bool{}
	var errs []error
	for _, c := range cs {
		if uid := c.Labels[runtime.LabelPodUID]; uid != "" && !seen[uid] {
			seen[uid] = true
			uids = append(uids, uid)
		}
		// Reset is a teardown: no grace period, as k3s-killall.
		if err := rt.StopContainer(ctx, c.ID, 0); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		if err := rt.RemoveContainer(ctx, c.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		say(fmt.Sprintf("removed container %s (pod %s/%s, container %s)", shortID(c.ID),
			c.Labels[runtime.LabelPodNamespace], c.Labels[runtime.LabelPodName], c.Labels[runtime.LabelContainerName]))
	}
	return uids, errors.Join(errs...)
}

func containerOrder(c runtime.ContainerStatus) string {
	return c.Labels[runtime.LabelPodNamespace] + "/" + c.Labels[runtime.LabelPodName] + "/" + c.Labels[runtime.LabelContainerName] + "/" + c.ID
}

func shortID(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}

// resetNetwork removes the node's pod network (network.Reset).
func resetNetwork(ctx context.Context, cfg ResetConfig, dir string, rec Record, uids []string, say func(string)) error {
	nc := nodeNetworkConfig(dir, rec.Bridge, cfg.NetNS)
	if rec.NetNSPrefix != "" {
		nc.NetNSPrefix = rec.NetNSPrefix
	}
	return network.Reset(ctx, network.ResetConfig{Config: nc, PodUIDs: uids, NetNSDir: cfg.NetNSDir, Exec: cfg.Exec}, say)
}

// resetNodeNetwork removes what the machine's service proxy and routes
// installed.
func resetNodeNetwork(ctx context.Context, cfg ResetConfig, say func(string)) error {
	run := cfg.Exec
	if run == nil {
		run = network.RunExec
	}
	var wrap []string
	if cfg.NetNS != nil {
		wrap = cfg.NetNS.Wrap
	}
	wrapped := func(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
		return run(ctx, stdin, append(append([]string(nil), wrap...), argv...)...)
	}
	chains, err := proxy.Reset(ctx, wrapped)
	for _, c := range chains {
		say("removed iptables chain " + c + " (nat)")
	}
	return errors.Join(err, network.ResetRoutes(ctx, wrap, run, say))
}

// recordOf is the Record of a node started with cfg.
func recordOf(cfg Config, simulated bool, podNetwork string) Record {
	r := Record{Name: cfg.Name, Runtime: RuntimeContainerd, PodNetwork: podNetwork,
		ContainerdAddress: cfg.ContainerdAddress, ContainerdNamespace: cfg.ContainerdNamespace}
	if simulated {
		r.Runtime, r.ContainerdAddress, r.ContainerdNamespace = RuntimeFake, "", ""
	}
	if podNetwork == NetworkCNI {
		nc := nodeNetworkConfig(cfg.DataDir, cfg.Bridge, cfg.NetNS)
		r.Bridge, r.NetNSPrefix = nc.Bridge, nc.NetNSPrefix
		r.ServiceProxy = !cfg.NoServiceProxy
	}
	return r
}
