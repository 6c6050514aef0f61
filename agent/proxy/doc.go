// Package proxy is the service proxy of a node, skiff's kube-proxy: it
// makes every Service's virtual addresses (clusterIP:port, and for
// NodePort services every local address's nodePort, localhost included)
// lead to the service's ready pods, on whatever node they run.
//
// # Model: iptables NAT, as kube-proxy's iptables mode
//
// The proxy never touches a packet. It watches Services and Endpoints and
// rewrites, in one iptables-restore transaction, a set of nat-table
// chains; the kernel then rewrites the destination of the first packet
// of each connection (DNAT) and conntrack does the rest of it:
//
//	PREROUTING, OUTPUT ─▶ SKIFF-SERVICES
//	    -d <clusterIP> -p tcp --dport <port>   ─▶ SKIFF-SVC-<hash>
//	    -m addrtype --dst-type LOCAL           ─▶ SKIFF-NODEPORTS
//	SKIFF-NODEPORTS: -p tcp --dport <nodePort> ─▶ SKIFF-SVC-<hash>
//	SKIFF-SVC-<hash>: mark for masquerade, then one endpoint chosen at
//	    random: rule i of n matches with probability 1/(n-i)
//	    (-m statistic --mode random), so each of n gets 1/n
//	SKIFF-SEP-<hash>: DNAT --to-destination <podIP>:<targetPort>
//	POSTROUTING ─▶ SKIFF-POSTROUTING: MASQUERADE what was marked
//
// Why iptables and not a userspace proxy: it is the model the course
// teaches (students read the rules with `iptables -t nat -S`), it costs
// nothing per packet in user space (the Measure section of
// docs/performance.md compares the NodePort path with going straight to a
// pod), and conntrack keeps connections to an endpoint alive while rules
// change. A userspace proxy would be simpler to test but copies every
// byte twice through the agent.
//
// # Invariants
//
//   - Only ready addresses (Endpoints subsets' addresses, never
//     notReadyAddresses) get traffic; a service without any has no
//     SKIFF-SVC rules and so gets none.
//   - Every rule lives in chains named SKIFF-*, reached by one jump from
//     each of PREROUTING, OUTPUT and POSTROUTING; a sync rewrites all of
//     them at once (iptables-restore --noflush leaves others' rules
//     alone), deletes chains of services that went away, and Run removes
//     everything when it stops.
//   - Service traffic is always masqueraded (kube-proxy's
//     --masquerade-all): replies then come back through the node that
//     translated them, so hairpin (a pod reaching itself through its
//     service), pod-to-pod on one bridge and cross-node NodePorts work
//     without br_netfilter or symmetric routing. The cost: pods see the
//     node's address, not the client's.
//   - localhost:NODEPORT works because the proxy sets
//     net.ipv4.conf.all.route_localnet=1 (a packet from 127.0.0.1 may be
//     routed off the host once DNAT has changed its destination) and the
//     masquerade gives it a routable source.
package proxy
