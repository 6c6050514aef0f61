package dns

import (
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"skiff.dev/skiff/api"
)

// Domain is the cluster domain (the kubelet's --cluster-domain).
const Domain = "cluster.local"

// TTL of every record, CoreDNS's kubernetes plugin default.
const TTL = 5

// Source is what the records are computed from: the informers' caches.
type Source interface {
	Service(namespace, name string) (*api.Service, bool)
	Endpoints(namespace, name string) (*api.Endpoints, bool)
	Services() []*api.Service
	AllEndpoints() []*api.Endpoints
}

// answer is what the cluster zone says to one question.
type answer struct {
	rcode  int
	answer []dns.RR
	extra  []dns.RR
}

// inZone reports whether name (lower case, fully qualified) is the
// cluster's to answer: the cluster domain or a reverse name of an address
// the cluster knows.
func inZone(name string) bool {
	return name == Domain+"." || strings.HasSuffix(name, "."+Domain+".")
}

// soa is the zone's SOA record, sent with NXDOMAIN and empty answers.
func soa() dns.RR {
	return &dns.SOA{Hdr: dns.RR_Header{Name: Domain + ".", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: TTL},
		Ns: "ns.dns." + Domain + ".", Mbox: "hostmaster." + Domain + ".", Serial: 1, Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: TTL}
}

func a(name string, ip netip.Addr) dns.RR {
	return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: TTL}, A: net.IP(ip.AsSlice())}
}

// lookup answers question q for a name under the cluster domain.
func lookup(src Source, q dns.Question) answer {
	name := strings.ToLower(q.Name)
	labels := dns.SplitDomainName(strings.TrimSuffix(name, Domain+"."))
	nx := answer{rcode: dns.RcodeNameError}
	if len(labels) == 0 {
		return answer{} // the zone apex: no address
	}
	switch labels[len(labels)-1] {
	case "svc":
		return lookupService(src, q.Qtype, name, labels[:len(labels)-1])
	case "pod":
		// A-B-C-D.NS.pod: the address in the name, as CoreDNS's "pods insecure".
		if len(labels) != 3 {
			if len(labels) < 3 {
				return answer{}
			}
			return nx
		}
		ip, err := netip.ParseAddr(strings.ReplaceAll(labels[0], "-", "."))
		if err != nil || !ip.Is4() {
			return nx
		}
		if q.Qtype == dns.TypeA {
			return answer{answer: []dns.RR{a(name, ip)}}
		}
		return answer{}
	}
	return nx
}

// lookupService answers names under svc.cluster.local: labels are the
// name's labels before "svc".
func lookupService(src Source, qtype uint16, name string, labels []string) answer {
	nx := answer{rcode: dns.RcodeNameError}
	n := len(labels)
	if n < 2 {
		// svc.cluster.local and NS.svc.cluster.local exist (empty
		// non-terminals) when some Service is under them.
		for _, s := range src.Services() {
			if n == 0 || s.Namespace == labels[0] {
				return answer{}
			}
		}
		return nx
	}
	ns, svcName := labels[n-1], labels[n-2]
	svc, ok := src.Service(ns, svcName)
	if !ok {
		return nx
	}
	zone := svcName + "." + ns + ".svc." + Domain + "."
	eps := readyEndpoints(src, svc)
	headless := svc.Spec.ClusterIP == "None"
	switch n {
	case 2: // SVC.NS
		var out answer
		if qtype == dns.TypeA {
			if headless {
				for _, e := range eps {
					out.answer = append(out.answer, a(name, e.ip))
				}
			} else if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err == nil && ip.Is4() {
				out.answer = []dns.RR{a(name, ip)}
			}
		}
		return out
	case 3: // HOST.SVC.NS of a headless Service
		if !headless {
			return nx
		}
		for _, e := range eps {
			if e.host == labels[0] {
				if qtype == dns.TypeA {
					return answer{answer: []dns.RR{a(name, e.ip)}}
				}
				return answer{}
			}
		}
		return nx
	case 4: // _PORT._PROTO.SVC.NS
		port, proto := strings.TrimPrefix(labels[0], "_"), strings.TrimPrefix(labels[1], "_")
		if port == labels[0] || proto == labels[1] {
			return nx
		}
		var p *api.ServicePort
		for i, sp := range svc.Spec.Ports {
			if sp.Name != "" && strings.EqualFold(sp.Name, port) && strings.EqualFold(orTCP(sp.Protocol), proto) {
				p = &svc.Spec.Ports[i]
			}
		}
		if p == nil {
			return nx
		}
		if qtype != dns.TypeSRV {
			return answer{}
		}
		srv := func(target string, port int32) dns.RR {
			return &dns.SRV{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: TTL},
				Priority: 0, Weight: 100, Port: uint16(port), Target: target}
		}
		var out answer
		if !headless {
			out.answer = []dns.RR{srv(zone, p.Port)}
			if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err == nil && ip.Is4() {
				out.extra = []dns.RR{a(zone, ip)}
			}
			return out
		}
		for _, e := range eps {
			if port, ok := e.ports[p.Name]; ok {
				target := e.host + "." + zone
				out.answer = append(out.answer, srv(target, port))
				out.extra = append(out.extra, a(target, e.ip))
			}
		}
		return out
	}
	return nx
}

// endpoint is one ready address of a Service.
type endpoint struct {
	ip    netip.Addr
	host  string           // its hostname, or the address with - for .
	ports map[string]int32 // by port name
}

// readyEndpoints lists svc's ready addresses, sorted by address.
func readyEndpoints(src Source, svc *api.Service) []endpoint {
	ep, ok := src.Endpoints(svc.Namespace, svc.Name)
	if !ok {
		return nil
	}
	var out []endpoint
	for _, ss := range ep.Subsets {
		ports := map[string]int32{}
		for _, p := range ss.Ports {
			ports[p.Name] = p.Port
		}
		for _, ad := range ss.Addresses {
			ip, err := netip.ParseAddr(ad.IP)
			if err != nil || !ip.Is4() {
				continue
			}
			host := ad.Hostname
			if host == "" {
				host = strings.ReplaceAll(ip.String(), ".", "-")
			}
			out = append(out, endpoint{ip: ip, host: host, ports: ports})
		}
	}
	slices.SortFunc(out, func(x, y endpoint) int { return x.ip.Compare(y.ip) })
	return out
}

func orTCP(p string) string {
	if p == "" {
		return api.ProtocolTCP
	}
	return p
}

// reverse answers a PTR question for an address the cluster knows: a
// cluster IP names its Service, a headless Service's endpoint its own
// name. ok is false for any other address (forwarded).
func reverse(src Source, q dns.Question) (answer, bool) {
	if q.Qtype != dns.TypePTR {
		return answer{}, false
	}
	rev, ok := strings.CutSuffix(strings.ToLower(q.Name), ".in-addr.arpa.")
	parts := strings.Split(rev, ".")
	if !ok || len(parts) != 4 {
		return answer{}, false
	}
	slices.Reverse(parts)
	ip, err := netip.ParseAddr(strings.Join(parts, "."))
	if err != nil {
		return answer{}, false
	}
	ptr := func(target string) answer {
		return answer{answer: []dns.RR{&dns.PTR{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: TTL}, Ptr: target}}}
	}
	svcs := src.Services()
	slices.SortFunc(svcs, func(x, y *api.Service) int { return strings.Compare(api.KeyOf(x), api.KeyOf(y)) })
	for _, svc := range svcs {
		zone := svc.Name + "." + svc.Namespace + ".svc." + Domain + "."
		if svc.Spec.ClusterIP == ip.String() {
			return ptr(zone), true
		}
		if svc.Spec.ClusterIP == "None" {
			for _, e := range readyEndpoints(src, svc) {
				if e.ip == ip {
					return ptr(e.host + "." + zone), true
				}
			}
		}
	}
	return answer{}, false
}
