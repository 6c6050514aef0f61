package dns

import (
	"strings"
	"testing"

	"github.com/miekg/dns"

	"skiff.dev/skiff/api"
)

// fakeSource is a Source over fixed objects.
type fakeSource struct {
	svcs []*api.Service
	eps  []*api.Endpoints
}

func (f *fakeSource) Service(ns, name string) (*api.Service, bool) {
	for _, s := range f.svcs {
		if s.Namespace == ns && s.Name == name {
			return s, true
		}
	}
	return nil, false
}

func (f *fakeSource) Endpoints(ns, name string) (*api.Endpoints, bool) {
	for _, e := range f.eps {
		if e.Namespace == ns && e.Name == name {
			return e, true
		}
	}
	return nil, false
}

func (f *fakeSource) Services() []*api.Service       { return append([]*api.Service(nil), f.svcs...) }
func (f *fakeSource) AllEndpoints() []*api.Endpoints { return f.eps }

func svc(ns, name, ip string, ports ...api.ServicePort) *api.Service {
	s := &api.Service{ObjectMeta: api.ObjectMeta{Name: name, Namespace: ns}}
	s.Spec.ClusterIP, s.Spec.Ports = ip, ports
	return s
}

// testSource: web (ClusterIP, named port http) in default, the StatefulSet
// docs' headless nginx in apps with web-0 ready, web-1 not ready and an
// address without hostname, and kube-dns.
func testSource() *fakeSource {
	return &fakeSource{
		svcs: []*api.Service{
			svc("default", "web", "10.96.3.4", api.ServicePort{Name: "http", Port: 80}),
			svc("apps", "nginx", "None", api.ServicePort{Name: "web", Port: 80}),
			svc("kube-system", "kube-dns", "10.96.0.10", api.ServicePort{Name: "dns", Protocol: "UDP", Port: 53}),
		},
		eps: []*api.Endpoints{{ObjectMeta: api.ObjectMeta{Name: "nginx", Namespace: "apps"}, Subsets: []api.EndpointSubset{{
			Addresses:         []api.EndpointAddress{{IP: "10.244.1.7", Hostname: "web-0"}, {IP: "10.244.2.9"}},
			NotReadyAddresses: []api.EndpointAddress{{IP: "10.244.1.8", Hostname: "web-1"}},
			Ports:             []api.EndpointPort{{Name: "web", Port: 8080}},
		}}}},
	}
}

func rrs(sec []dns.RR) string {
	var out []string
	for _, rr := range sec {
		f := strings.Fields(rr.String())
		out = append(out, f[0]+" "+strings.Join(f[3:], " "))
	}
	return strings.Join(out, "; ")
}

func TestRecords(t *testing.T) {
	src := testSource()
	ans := func(name string, qtype uint16) (int, string, string) {
		q := dns.Question{Name: name, Qtype: qtype, Qclass: dns.ClassINET}
		var a answer
		if inZone(strings.ToLower(name)) {
			a = lookup(src, q)
		} else {
			var ok bool
			if a, ok = reverse(src, q); !ok {
				return -1, "", ""
			}
		}
		return a.rcode, rrs(a.answer), rrs(a.extra)
	}
	for _, c := range []struct {
		name         string
		qtype        uint16
		rcode        int
		answer, extr string
	}{
		{"web.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "web.default.svc.cluster.local. A 10.96.3.4", ""},
		{"WEB.Default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "web.default.svc.cluster.local. A 10.96.3.4", ""},
		{"web.default.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, "", ""},
		{"nope.default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, "", ""},
		{"web.other.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, "", ""},
		{"default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "", ""},
		{"empty.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, "", ""},
		{"nginx.apps.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess,
			"nginx.apps.svc.cluster.local. A 10.244.1.7; nginx.apps.svc.cluster.local. A 10.244.2.9", ""},
		{"web-0.nginx.apps.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "web-0.nginx.apps.svc.cluster.local. A 10.244.1.7", ""},
		{"10-244-2-9.nginx.apps.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "10-244-2-9.nginx.apps.svc.cluster.local. A 10.244.2.9", ""},
		{"web-1.nginx.apps.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, "", ""}, // not ready
		{"x.web.default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, "", ""},    // not headless
		{"_http._tcp.web.default.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess,
			"_http._tcp.web.default.svc.cluster.local. SRV 0 100 80 web.default.svc.cluster.local.", "web.default.svc.cluster.local. A 10.96.3.4"},
		{"_web._tcp.nginx.apps.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess,
			"_web._tcp.nginx.apps.svc.cluster.local. SRV 0 100 8080 web-0.nginx.apps.svc.cluster.local.; _web._tcp.nginx.apps.svc.cluster.local. SRV 0 100 8080 10-244-2-9.nginx.apps.svc.cluster.local.",
			"web-0.nginx.apps.svc.cluster.local. A 10.244.1.7; 10-244-2-9.nginx.apps.svc.cluster.local. A 10.244.2.9"},
		{"_dns._udp.kube-dns.kube-system.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess,
			"_dns._udp.kube-dns.kube-system.svc.cluster.local. SRV 0 100 53 kube-dns.kube-system.svc.cluster.local.", "kube-dns.kube-system.svc.cluster.local. A 10.96.0.10"},
		{"_dns._tcp.kube-dns.kube-system.svc.cluster.local.", dns.TypeSRV, dns.RcodeNameError, "", ""},
		{"10-1-2-3.default.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, "10-1-2-3.default.pod.cluster.local. A 10.1.2.3", ""},
		{"x.default.pod.cluster.local.", dns.TypeA, dns.RcodeNameError, "", ""},
		{"nothing.cluster.local.", dns.TypeA, dns.RcodeNameError, "", ""},
		{"4.3.96.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, "4.3.96.10.in-addr.arpa. PTR web.default.svc.cluster.local.", ""},
		{"7.1.244.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, "7.1.244.10.in-addr.arpa. PTR web-0.nginx.apps.svc.cluster.local.", ""},
		{"8.8.8.8.in-addr.arpa.", dns.TypePTR, -1, "", ""}, // not the cluster's: forwarded
		{"example.com.", dns.TypeA, -1, "", ""},
	} {
		rcode, got, extra := ans(c.name, c.qtype)
		if rcode != c.rcode || got != c.answer || extra != c.extr {
			t.Errorf("%s %s: rcode %d answer %q extra %q; want %d %q %q", c.name, dns.TypeToString[c.qtype], rcode, got, extra, c.rcode, c.answer, c.extr)
		}
	}
}
