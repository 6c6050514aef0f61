package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os/exec"
	"time"

	"skiff.dev/skiff/agent/dns"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// runClusterDNS answers the cluster's names on this node (agent/dns) at
// the cluster IP of the Service kube-system/kube-dns, which the control
// plane makes at start: it waits for the Service, adds its address to the
// loopback device of the node's network namespace (so pods' queries to
// it, routed to the node, are delivered here, as NodeLocal DNSCache does
// with its dummy interface), serves until ctx ends and removes the
// address again.
func runClusterDNS(ctx context.Context, c client.Interface, netns *NetNS, lg *slog.Logger) error {
	var ip netip.Addr
	for {
		s, err := client.Get[*api.Service](ctx, c, api.NamespaceSystem, api.ClusterDNSService)
		if err == nil {
			if ip, err = netip.ParseAddr(s.Spec.ClusterIP); err == nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	var wrap []string
	scfg := dns.Config{Addr: net.JoinHostPort(ip.String(), "53"), Log: lg}
	if netns != nil {
		wrap = netns.Wrap
		scfg.ListenPacket = func(network, addr string) (pc net.PacketConn, err error) {
			err = netns.Do(func() (err error) { pc, err = net.ListenPacket(network, addr); return err })
			return pc, err
		}
		scfg.Listen = func(network, addr string) (l net.Listener, err error) {
			err = netns.Do(func() (err error) { l, err = net.Listen(network, addr); return err })
			return l, err
		}
	}
	ipCmd := func(ctx context.Context, verb string) error {
		args := append(append([]string(nil), wrap...), "ip", "addr", verb, ip.String()+"/32", "dev", "lo")
		if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip addr %s %s dev lo: %v: %s", verb, ip, err, out)
		}
		return nil
	}
	if err := ipCmd(ctx, "replace"); err != nil {
		return fmt.Errorf("cluster DNS: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := ipCmd(cctx, "del"); err != nil {
			lg.Warn("cluster DNS", "err", err)
		}
	}()
	return dns.New(c, scfg).Run(ctx)
}
