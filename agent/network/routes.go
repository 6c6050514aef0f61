package network

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"strings"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// RouteProto marks the routes Routes installs (`ip route ... proto 157`),
// so that it finds and removes its own stale ones and nothing else.
const RouteProto = "157"

// Routes connects the pod CIDRs of the nodes, host-gateway style: for
// every other node it keeps `ip route replace <podCIDR> via <nodeIP>` on
// this node, and removes the routes of nodes that left or moved. It needs
// the nodes to share a layer-2 segment (or a router that knows nothing of
// pod CIDRs but forwards to node IPs), which is what flannel's host-gw
// backend assumes too.
//
// Like a controller it works from current state: every Node change (and a
// periodic resync) recomputes the wanted routes from all Nodes and diffs
// them against `ip route show proto 157`.
type Routes struct {
	c        client.Interface
	nodeName string
	wrap     []string
	log      *slog.Logger
	resync   time.Duration
	nodes    *client.Informer
	kick     chan struct{}
}

// NewRoutes returns the route keeper of node nodeName; wrap prefixes its
// ip commands (Config.Wrap).
func NewRoutes(c client.Interface, nodeName string, wrap []string, log *slog.Logger) *Routes {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "routes")
	r := &Routes{c: c, nodeName: nodeName, wrap: wrap, log: log, resync: 30 * time.Second, kick: make(chan struct{}, 1)}
	r.nodes = client.NewInformer(c, api.MustKindOf(&api.Node{}), "", api.ListOptions{}, log)
	poke := func(api.Object) { r.poke() }
	r.nodes.AddHandler(client.Handler{OnAdd: poke, OnUpdate: func(_, o api.Object) { poke(o) }, OnDelete: poke})
	return r
}

func (r *Routes) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run keeps the routes until ctx ends, then removes them.
func (r *Routes) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() { defer close(done); r.nodes.Run(ctx) }()
	defer func() { <-done }()
	if !r.nodes.WaitForSync(ctx) {
		return nil
	}
	t := time.NewTicker(r.resync)
	defer t.Stop()
	for {
		if err := r.Sync(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("sync routes to other nodes' pods", "err", err)
		}
		select {
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			return r.apply(cctx, nil)
		case <-r.kick:
		case <-t.C:
		}
	}
}

// Sync makes this node's routes match the Nodes once.
func (r *Routes) Sync(ctx context.Context) error {
	var nodes []*api.Node
	for _, o := range r.nodes.List() {
		nodes = append(nodes, o.(*api.Node))
	}
	return r.apply(ctx, DesiredRoutes(nodes, r.nodeName))
}

// DesiredRoutes maps the pod CIDR of every node but self to the node's
// InternalIP. Nodes without either are left out, as are CIDRs that are
// not valid IPv4 prefixes, and nodes on loopback or on self's own IP
// (several agents on one machine: no route can reach them).
func DesiredRoutes(nodes []*api.Node, self string) map[string]string {
	internalIP := func(n *api.Node) string {
		for _, a := range n.Status.Addresses {
			if a.Type == "InternalIP" {
				return a.Address
			}
		}
		return ""
	}
	selfIP := ""
	for _, n := range nodes {
		if n.Name == self {
			selfIP = internalIP(n)
		}
	}
	out := map[string]string{}
	for _, n := range nodes {
		if n.Name == self || n.Spec.PodCIDR == "" {
			continue
		}
		p, err := netip.ParsePrefix(n.Spec.PodCIDR)
		if err != nil || !p.Addr().Is4() {
			continue
		}
		ip := internalIP(n)
		if addr, err := netip.ParseAddr(ip); err != nil || !addr.Is4() || addr.IsLoopback() || ip == selfIP {
			continue
		}
		out[p.Masked().String()] = ip
	}
	return out
}

// apply replaces and deletes routes so that exactly want is installed.
func (r *Routes) apply(ctx context.Context, want map[string]string) error {
	have, err := r.current(ctx)
	if err != nil {
		return err
	}
	var errs []error
	cidrs := make([]string, 0, len(want))
	for c := range want {
		cidrs = append(cidrs, c)
	}
	sort.Strings(cidrs)
	for _, cidr := range cidrs {
		if have[cidr] == want[cidr] {
			continue
		}
		if _, err := run(ctx, r.wrap, nil, "ip", "-4", "route", "replace", cidr, "via", want[cidr], "proto", RouteProto); err != nil {
			errs = append(errs, err)
			continue
		}
		r.log.Info("route to a node's pods", "podCIDR", cidr, "via", want[cidr])
	}
	for cidr := range have {
		if _, ok := want[cidr]; ok {
			continue
		}
		if _, err := run(ctx, r.wrap, nil, "ip", "-4", "route", "del", cidr, "proto", RouteProto); err != nil {
			errs = append(errs, err)
			continue
		}
		r.log.Info("removed route to a node's pods", "podCIDR", cidr)
	}
	return errors.Join(errs...)
}

// current lists the routes marked with RouteProto: CIDR → gateway.
func (r *Routes) current(ctx context.Context) (map[string]string, error) {
	out, err := run(ctx, r.wrap, nil, "ip", "-4", "route", "show", "proto", RouteProto)
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	return parseRoutes(string(out)), nil
}

// parseRoutes reads `ip route show` lines: "10.244.1.0/24 via 10.0.0.2 dev eth0".
func parseRoutes(s string) map[string]string {
	have := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		gw := ""
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "via" {
				gw = f[i+1]
			}
		}
		have[f[0]] = gw
	}
	return have
}
