package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"skiff.dev/skiff/api"
)

// Chain names. Per-service and per-endpoint chains add a hash.
const (
	ChainServices    = "SKIFF-SERVICES"
	ChainNodePorts   = "SKIFF-NODEPORTS"
	ChainPostrouting = "SKIFF-POSTROUTING"
	ChainMarkMasq    = "SKIFF-MARK-MASQ"
	chainPrefix      = "SKIFF-"
	svcPrefix        = "SKIFF-SVC-"
	sepPrefix        = "SKIFF-SEP-"
	// masqMark is the packet mark that asks POSTROUTING to masquerade
	// (kube-proxy uses 0x4000 too; a node runs one of the two).
	masqMark = "0x4000/0x4000"
)

// Endpoint is one ready backend of a service port.
type Endpoint struct {
	IP   string
	Port int32
}

// ServicePort is one port of one service, with its ready backends.
type ServicePort struct {
	// Name is namespace/name:port (the port's name, or its number).
	Name      string
	ClusterIP string
	Port      int32
	NodePort  int32
	Protocol  string // tcp or udp
	Endpoints []Endpoint
}

// ServicePorts flattens services and their Endpoints (by namespace/name)
// into the ports the proxy serves. Headless services (clusterIP None or
// empty) are left out; only ready addresses count.
func ServicePorts(svcs []*api.Service, eps map[string]*api.Endpoints) []ServicePort {
	var out []ServicePort
	for _, s := range svcs {
		ip := s.Spec.ClusterIP
		if _, err := netip.ParseAddr(ip); err != nil {
			continue
		}
		ep := eps[api.KeyOf(s)]
		for _, p := range s.Spec.Ports {
			proto := strings.ToLower(p.Protocol)
			if proto == "" {
				proto = "tcp"
			}
			portName := p.Name
			if portName == "" {
				portName = fmt.Sprint(p.Port)
			}
			sp := ServicePort{Name: api.KeyOf(s) + ":" + portName, ClusterIP: ip, Port: p.Port, Protocol: proto}
			if s.Spec.Type == "NodePort" || s.Spec.Type == "LoadBalancer" {
				sp.NodePort = p.NodePort
			}
			if ep != nil {
				seen := map[Endpoint]bool{}
				for _, sub := range ep.Subsets {
					for _, epp := range sub.Ports {
						if epp.Name != p.Name || !strings.EqualFold(orTCP(epp.Protocol), proto) {
							continue
						}
						for _, a := range sub.Addresses {
							e := Endpoint{IP: a.IP, Port: epp.Port}
							if !seen[e] {
								seen[e] = true
								sp.Endpoints = append(sp.Endpoints, e)
							}
						}
					}
				}
			}
			sort.Slice(sp.Endpoints, func(i, j int) bool {
				if sp.Endpoints[i].IP != sp.Endpoints[j].IP {
					return sp.Endpoints[i].IP < sp.Endpoints[j].IP
				}
				return sp.Endpoints[i].Port < sp.Endpoints[j].Port
			})
			out = append(out, sp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func orTCP(p string) string {
	if p == "" {
		return "tcp"
	}
	return p
}

// chainName is prefix plus a hash of key: stable across restarts and
// within iptables' 28-character limit.
func chainName(prefix, key string) string {
	sum := sha256.Sum256([]byte(key))
	return prefix + base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// Rules is the iptables-restore input (nat table) for ports; existing
// lists the SKIFF-* chains now present, so that those no longer wanted
// are flushed and deleted in the same transaction. It also returns the
// chains it keeps.
func Rules(ports []ServicePort, existing []string) (restore []byte, chains []string) {
	var b bytes.Buffer
	var rules bytes.Buffer
	chains = []string{ChainServices, ChainNodePorts, ChainPostrouting, ChainMarkMasq}
	w := func(format string, args ...any) { fmt.Fprintf(&rules, format+"\n", args...) }

	w("-A %s -j MARK --set-xmark %s", ChainMarkMasq, masqMark)
	w("-A %s -m mark ! --mark %s -j RETURN", ChainPostrouting, masqMark)
	w("-A %s -j MARK --set-xmark 0x4000/0x0", ChainPostrouting)
	w("-A %s -m comment --comment \"skiff service traffic\" -j MASQUERADE", ChainPostrouting)
	for _, sp := range ports {
		if len(sp.Endpoints) == 0 {
			continue // no ready pod: no rules, no traffic
		}
		svc := chainName(svcPrefix, sp.Name+"/"+sp.Protocol)
		chains = append(chains, svc)
		w("-A %s -d %s/32 -p %s -m %s --dport %d -m comment --comment \"%s cluster IP\" -j %s",
			ChainServices, sp.ClusterIP, sp.Protocol, sp.Protocol, sp.Port, sp.Name, svc)
		if sp.NodePort > 0 {
			w("-A %s -p %s -m %s --dport %d -m comment --comment \"%s node port\" -j %s",
				ChainNodePorts, sp.Protocol, sp.Protocol, sp.NodePort, sp.Name, svc)
		}
		w("-A %s -j %s", svc, ChainMarkMasq)
		n := len(sp.Endpoints)
		for i, e := range sp.Endpoints {
			dst := fmt.Sprintf("%s:%d", e.IP, e.Port)
			sep := chainName(sepPrefix, sp.Name+"/"+sp.Protocol+"/"+dst)
			chains = append(chains, sep)
			if i < n-1 {
				w("-A %s -m comment --comment \"%s -> %s\" -m statistic --mode random --probability %.10f -j %s", svc, sp.Name, dst, 1/float64(n-i), sep)
			} else {
				w("-A %s -m comment --comment \"%s -> %s\" -j %s", svc, sp.Name, dst, sep)
			}
			w("-A %s -p %s -m %s -j DNAT --to-destination %s", sep, sp.Protocol, sp.Protocol, dst)
		}
	}
	// NodePorts last: a cluster IP is never a local address.
	w("-A %s -m addrtype --dst-type LOCAL -j %s", ChainServices, ChainNodePorts)

	keep := map[string]bool{}
	for _, c := range chains {
		keep[c] = true
	}
	var stale []string
	for _, c := range existing {
		if strings.HasPrefix(c, chainPrefix) && !keep[c] {
			stale = append(stale, c)
		}
	}
	sort.Strings(stale)
	b.WriteString("*nat\n")
	for _, c := range append(append([]string(nil), chains...), stale...) {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	b.Write(rules.Bytes())
	for _, c := range stale {
		fmt.Fprintf(&b, "-X %s\n", c)
	}
	b.WriteString("COMMIT\n")
	return b.Bytes(), chains
}

// CleanupRules is the iptables-restore input that flushes and deletes
// every chain in existing that is skiff's (the jumps to them must be gone
// first).
func CleanupRules(existing []string) []byte {
	var b bytes.Buffer
	b.WriteString("*nat\n")
	var mine []string
	for _, c := range existing {
		if strings.HasPrefix(c, chainPrefix) {
			mine = append(mine, c)
		}
	}
	for _, c := range mine {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	for _, c := range mine {
		fmt.Fprintf(&b, "-X %s\n", c)
	}
	b.WriteString("COMMIT\n")
	return b.Bytes()
}

// chainsOf lists the chains of an `iptables-save -t nat` dump.
func chainsOf(save string) []string {
	var out []string
	for _, line := range strings.Split(save, "\n") {
		if strings.HasPrefix(line, ":") {
			if f := strings.Fields(line[1:]); len(f) > 0 {
				out = append(out, f[0])
			}
		}
	}
	return out
}
