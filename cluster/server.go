package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/controlplane/apiserver"
	"skiff.dev/skiff/dashboard"
)

// Up runs a whole cluster in one process, control plane and local nodes,
// and blocks until ctx ends (Ctrl-C) or a node's agent fails.
func Up(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err // bad flags change nothing
	}
	start := time.Now()
	// The local node speaks through the server's gossip member.
	cp, err := startServer(ctx, &cfg, cfg.baseName())
	if err != nil {
		return err
	}
	defer cp.Stop()
	return runNodes(ctx, &cfg, cp, start)
}

// Server runs the control plane (and, unless cfg.NoAgent, the local
// nodes), prints how other machines join, and blocks until ctx ends.
func Server(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	start := time.Now()
	out := cfg.out()
	member := cfg.baseName()
	if cfg.NoAgent {
		member = "skiff-server-" + member
	}
	cp, err := startServer(ctx, &cfg, member)
	if err != nil {
		return err
	}
	defer cp.Stop()
	if g := cp.Gossip(); g != nil {
		fmt.Fprintf(out, "Join other machines with (copy %s to each first, readable by root only; or set $%s):\n  %s\n",
			cp.JoinTokenPath(), JoinTokenEnv, joinCommand(g, cfg.Gossip.Advertise, cp.JoinTokenPath(), cp.CA().Hash()))
		if cp.EmbeddedEtcd() {
			fmt.Fprintf(out, "Add servers (embedded etcd, leader election) with (copy %s, the admin token, first; or set $%s):\n  skiff server --join-server %s --token-file %s --discovery-token-ca-cert-hash %s\n",
				filepath.Join(cfg.DataDir, "token"), AdminTokenEnv, cp.AdvertisedURL(), filepath.Join(cfg.DataDir, "token"), cp.CA().Hash())
		}
		if host, _, err := net.SplitHostPort(cfg.Listen); err == nil && (host == "localhost" || net.ParseIP(host).IsLoopback()) {
			fmt.Fprintln(out, "(the API server listens on loopback: agents on other machines need --listen 0.0.0.0:7443)")
		}
	}
	if cfg.NoAgent {
		stopSim, err := startSim(ctx, cfg.Sim, cp.Local(), out, cfg.log())
		if err != nil {
			return err
		}
		defer stopSim()
		<-ctx.Done()
		fmt.Fprintln(out, "shutting down")
		return cp.Stop()
	}
	return runNodes(ctx, &cfg, cp, start)
}

// StartControlPlane starts a control plane as `skiff up` assembles it:
// cfg with the web dashboard under /dashboard/ (dashboard.Attach), unless
// cfg already has a dashboard. The integration tests and
// hack/bench-scheduler start theirs here.
func StartControlPlane(ctx context.Context, cfg controlplane.Config) (*controlplane.ControlPlane, error) {
	if cfg.Dashboard == nil {
		dashboard.Attach(&cfg)
	}
	return controlplane.Start(ctx, cfg)
}

// controlPlaneConfig is the control plane of c, its gossip member named
// member (none with Gossip.Off).
func (c *Config) controlPlaneConfig(member string) controlplane.Config {
	cfg := controlplane.DefaultConfig(c.DataDir)
	cfg.API.Listen = c.Listen
	cfg.SchedulerConfig = c.SchedulerConfig
	cfg.MetricsAdapterConfig = c.MetricsAdapterConfig
	if c.HPA != nil {
		cfg.HPA = *c.HPA
	}
	cfg.Kueue = c.Kueue
	cfg.API.Version = api.Version
	if c.PodSecurityDefault != "" {
		ps := apiserver.PodSecurityAt(c.PodSecurityDefault)
		cfg.API.PodSecurity = &ps
	}
	cfg.Log = c.log()
	cfg.API.Token = c.AdminToken
	cfg.Etcd = c.etcdConfig()
	if !c.Gossip.Off {
		cfg.Gossip = &controlplane.GossipConfig{Name: member, Port: c.Gossip.Port, AdvertiseAddr: c.Gossip.Advertise,
			APIServer: advertiseURL("https://"+c.Listen, c.Gossip.Advertise)}
	}
	return cfg
}

// startServer starts the control plane (with gossip under the member
// name, unless Gossip.Off) and writes the kubeconfigs.
func startServer(ctx context.Context, c *Config, member string) (*controlplane.ControlPlane, error) {
	out := c.out()
	cfg := c.controlPlaneConfig(member)
	cp, err := StartControlPlane(ctx, cfg)
	if err != nil {
		if errors.Is(err, controlplane.ErrGossip) {
			err = fmt.Errorf("%w (choose another --gossip-port, or --no-gossip)", err)
		}
		return nil, err
	}
	// Write the kubeconfig where skiff looks by default and into the data
	// dir (`skiff kubeconfig` prints it), and merge it into kubectl's.
	cc := cp.ClientConfig()
	if err := WriteKubeconfigs(cc, c.DataDir, !c.NoKubeconfigMerge, c.log()); err != nil {
		cp.Stop()
		return nil, err
	}
	fmt.Fprintf(out, "skiff %s: API server at %s (data in %s)\n", api.Version, cc.Server, c.DataDir)
	if g := cp.Gossip(); g != nil {
		fmt.Fprintf(out, "gossip on %s, advertising the API server as %s\n", g.LocalAddr(), cp.AdvertisedURL())
	}
	return cp, nil
}

// runNodes starts the simulated nodes and the local nodes, prints what to
// try, and runs until ctx ends or a node's agent fails.
func runNodes(ctx context.Context, c *Config, cp *controlplane.ControlPlane, start time.Time) error {
	out := c.out()
	stopSim, err := startSim(ctx, c.Sim, cp.Local(), out, c.log())
	if err != nil {
		return err
	}
	defer stopSim()
	nodes, err := startLocalNodes(ctx, c, cp, start)
	if err != nil {
		return err
	}
	defer stopNodes(nodes)
	fmt.Fprintf(out, `
Try, in another terminal:
  skiff get nodes -o wide
  skiff apply -f examples/lab1-nginx.yaml
  skiff get configmap,deploy,pods,svc -n gpu-demo
  curl localhost:30080
  skiff apply -f examples/lab2-gpu-pod.yaml; skiff logs -n gpu-demo gpu-test
docs/labs.md walks through every lab; docs/troubleshooting.md helps when one sticks.
Stop with Ctrl-C; the cluster's state stays in %s.
`, c.DataDir)
	err = waitNodes(ctx, nodes)
	fmt.Fprintln(out, "shutting down")
	err = errors.Join(err, stopNodes(nodes))
	return errors.Join(err, cp.Stop())
}
