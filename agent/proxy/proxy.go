package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"skiff.dev/skiff/agent/network"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Config of a node's proxy.
type Config struct {
	// Wrap prefixes the iptables and sysctl commands: nil on a real node;
	// tests run a "node" in a network namespace with {"ip", "netns",
	// "exec", NAME}.
	Wrap []string
	// Resync rewrites the rules this often even without a change, so a
	// rule someone flushed by hand comes back.
	Resync time.Duration
	// MinSyncInterval coalesces bursts of changes (a rollout) into one
	// rewrite.
	MinSyncInterval time.Duration
	Log             *slog.Logger
}

// DefaultConfig is a real node's proxy.
func DefaultConfig() Config {
	return Config{
		Resync:          30 * time.Second,       // kube-proxy's --iptables-sync-period is 30 s
		MinSyncInterval: 100 * time.Millisecond, // short: the lab watches a killed pod leave
	}
}

// Proxy keeps the node's service rules. Start it with Run.
type Proxy struct {
	cfg       Config
	log       *slog.Logger
	services  *client.Informer
	endpoints *client.Informer
	kick      chan struct{}
}

// New returns the proxy of a node reading Services and Endpoints through c.
func New(c client.Interface, cfg Config) *Proxy {
	lg := cfg.Log
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "proxy")
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultConfig().Resync
	}
	p := &Proxy{cfg: cfg, log: lg, kick: make(chan struct{}, 1)}
	p.services = client.NewInformer(c, api.MustKindOf(&api.Service{}), "", api.ListOptions{}, lg)
	p.endpoints = client.NewInformer(c, api.MustKindOf(&api.Endpoints{}), "", api.ListOptions{}, lg)
	h := client.Handler{
		OnAdd:    func(api.Object) { p.poke() },
		OnUpdate: func(_, _ api.Object) { p.poke() },
		OnDelete: func(api.Object) { p.poke() },
	}
	p.services.AddHandler(h)
	p.endpoints.AddHandler(h)
	return p
}

func (p *Proxy) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run keeps the rules until ctx ends, then removes them.
func (p *Proxy) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, inf := range []*client.Informer{p.services, p.endpoints} {
		wg.Add(1)
		go func() { defer wg.Done(); inf.Run(ctx) }()
	}
	defer wg.Wait()
	if _, err := run(ctx, p.cfg.Wrap, nil, "sysctl", "-q", "-w", "net.ipv4.conf.all.route_localnet=1"); err != nil {
		p.log.Warn("localhost:NODEPORT will not work", "err", err)
	}
	if !p.services.WaitForSync(ctx) || !p.endpoints.WaitForSync(ctx) {
		return nil
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := Cleanup(cctx, p.cfg.Wrap); err != nil {
			p.log.Warn("remove service rules", "err", err)
		}
	}()
	t := time.NewTicker(p.cfg.Resync)
	defer t.Stop()
	for {
		if err := p.Sync(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("sync service rules", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.kick:
		case <-t.C:
		}
		if p.cfg.MinSyncInterval > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(p.cfg.MinSyncInterval):
			}
		}
	}
}

// Sync rewrites the rules from the informers' current state once.
func (p *Proxy) Sync(ctx context.Context) error {
	var svcs []*api.Service
	for _, o := range p.services.List() {
		svcs = append(svcs, o.(*api.Service))
	}
	eps := map[string]*api.Endpoints{}
	for _, o := range p.endpoints.List() {
		eps[api.KeyOf(o)] = o.(*api.Endpoints)
	}
	return Apply(ctx, p.cfg.Wrap, ServicePorts(svcs, eps))
}

// jumps are the rules that lead from the built-in chains into skiff's.
var jumps = [][]string{
	{"PREROUTING", "-m", "comment", "--comment", "skiff service portals", "-j", ChainServices},
	{"OUTPUT", "-m", "comment", "--comment", "skiff service portals", "-j", ChainServices},
	{"POSTROUTING", "-m", "comment", "--comment", "skiff service masquerade", "-j", ChainPostrouting},
}

// Apply writes the rules for ports in one transaction and makes sure the
// jumps to them exist.
func Apply(ctx context.Context, wrap []string, ports []ServicePort) error {
	save, err := run(ctx, wrap, nil, "iptables-save", "-t", "nat")
	if err != nil {
		return fmt.Errorf("read nat table: %w", err)
	}
	restore, _ := Rules(ports, chainsOf(string(save)))
	if _, err := run(ctx, wrap, restore, "iptables-restore", "-w", "--noflush"); err != nil {
		return fmt.Errorf("write service rules: %w", err)
	}
	for _, j := range jumps {
		if _, err := run(ctx, wrap, nil, "iptables", append([]string{"-w", "-t", "nat", "-C"}, j...)...); err == nil {
			continue
		}
		if _, err := run(ctx, wrap, nil, "iptables", append([]string{"-w", "-t", "nat", "-I"}, j...)...); err != nil {
			return fmt.Errorf("hook skiff's chains: %w", err)
		}
	}
	return nil
}

// Cleanup removes every rule and chain of skiff's proxy (also those a
// crashed agent left). Safe to repeat.
func Cleanup(ctx context.Context, wrap []string) error {
	_, err := Reset(ctx, func(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
		return network.Run(ctx, wrap, stdin, argv[0], argv[1:]...)
	})
	return err
}

// Exec runs one command (argv) with stdin when not nil and returns its
// stdout; an error means it failed (network.Run is the real one).
type Exec func(ctx context.Context, stdin []byte, argv ...string) ([]byte, error)

// Reset removes the jumps into skiff's chains and every SKIFF-* chain of
// the nat table through run, and returns the names of the chains it
// removed (none when there were none: safe to repeat). `skiff reset` and
// Cleanup use it.
func Reset(ctx context.Context, run Exec) (removed []string, err error) {
	for _, j := range jumps {
		for {
			if _, err := run(ctx, nil, append([]string{"iptables", "-w", "-t", "nat", "-D"}, j...)...); err != nil {
				break // gone (or never there)
			}
		}
	}
	save, err := run(ctx, nil, "iptables-save", "-t", "nat")
	if err != nil {
		return nil, fmt.Errorf("read nat table: %w", err)
	}
	for _, c := range chainsOf(string(save)) {
		if strings.HasPrefix(c, chainPrefix) {
			removed = append(removed, c)
		}
	}
	if len(removed) == 0 {
		return nil, nil
	}
	if _, err := run(ctx, CleanupRules(removed), "iptables-restore", "-w", "--noflush"); err != nil {
		return nil, fmt.Errorf("delete service chains: %w", err)
	}
	return removed, nil
}

func run(ctx context.Context, wrap []string, stdin []byte, name string, args ...string) ([]byte, error) {
	return network.Run(ctx, wrap, stdin, name, args...)
}
