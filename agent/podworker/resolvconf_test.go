package podworker

import (
	"testing"

	"skiff.dev/skiff/api"
)

// The kubelet's resolv.conf for each dnsPolicy, with dnsConfig merged, as
// containerd writes it.
func TestPodResolvConf(t *testing.T) {
	host := parseResolvConf([]byte("# host\nnameserver 192.0.2.53\nnameserver 192.0.2.54\nsearch lab.example\noptions edns0 timeout:2\n"))
	two := "2"
	for _, c := range []struct {
		name       string
		spec       func(*api.PodSpec)
		clusterDNS string
		want       string
		fallback   bool
	}{
		{"ClusterFirst", func(*api.PodSpec) {}, "10.96.0.10",
			"search apps.svc.cluster.local svc.cluster.local cluster.local lab.example\nnameserver 10.96.0.10\noptions ndots:5\n", false},
		{"ClusterFirst without cluster DNS falls back to Default", func(*api.PodSpec) {}, "",
			"search lab.example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions edns0 timeout:2\n", true},
		{"ClusterFirst on the host network is Default", func(s *api.PodSpec) { s.HostNetwork = true }, "10.96.0.10",
			"search lab.example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions edns0 timeout:2\n", false},
		{"ClusterFirstWithHostNet", func(s *api.PodSpec) { s.HostNetwork, s.DNSPolicy = true, api.DNSClusterFirstWithHostNet }, "10.96.0.10",
			"search apps.svc.cluster.local svc.cluster.local cluster.local lab.example\nnameserver 10.96.0.10\noptions ndots:5\n", false},
		{"Default", func(s *api.PodSpec) { s.DNSPolicy = api.DNSDefault }, "10.96.0.10",
			"search lab.example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions edns0 timeout:2\n", false},
		{"None with dnsConfig (the docs' example)", func(s *api.PodSpec) {
			s.DNSPolicy = api.DNSNone
			s.DNSConfig = &api.PodDNSConfig{Nameservers: []string{"192.0.2.1"}, Searches: []string{"ns1.svc.cluster-domain.example", "my.dns.search.suffix"},
				Options: []api.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "edns0"}}}
		}, "10.96.0.10", "search ns1.svc.cluster-domain.example my.dns.search.suffix\nnameserver 192.0.2.1\noptions ndots:2 edns0\n", false},
		{"ClusterFirst plus dnsConfig: appended, options replaced, 3 nameservers", func(s *api.PodSpec) {
			s.DNSConfig = &api.PodDNSConfig{Nameservers: []string{"192.0.2.1", "10.96.0.10", "192.0.2.2", "192.0.2.3"}, Searches: []string{"svc.cluster.local", "x.example"},
				Options: []api.PodDNSConfigOption{{Name: "ndots", Value: &two}}}
		}, "10.96.0.10", "search apps.svc.cluster.local svc.cluster.local cluster.local lab.example x.example\nnameserver 10.96.0.10\nnameserver 192.0.2.1\nnameserver 192.0.2.2\noptions ndots:2\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "p", Namespace: "apps"}}
			c.spec(&pod.Spec)
			got, fallback := podDNS(pod, c.clusterDNS, host)
			if string(got.format()) != c.want || fallback != c.fallback {
				t.Errorf("got (fallback %v)\n%s\nwant (fallback %v)\n%s", fallback, got.format(), c.fallback, c.want)
			}
		})
	}
}
