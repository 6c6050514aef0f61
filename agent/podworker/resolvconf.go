package podworker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/runtime"
)

// A pod's /etc/resolv.conf, as the kubelet makes it (its dns.Configurer)
// and containerd writes it:
//
//   - ClusterFirst (the default): nameserver the cluster IP of
//     kube-system/kube-dns (agent/dns answers there on every node with a
//     pod network), search NS.svc.cluster.local svc.cluster.local
//     cluster.local and the node's own search domains, options ndots:5.
//     A host-network pod with ClusterFirst gets Default instead, as does
//     every pod when the node has no cluster DNS (no pod network, or no
//     kube-dns Service yet): the kubelet's "Falling back to Default".
//   - ClusterFirstWithHostNet: the cluster's, host network or not.
//   - Default: the node's resolv.conf (nameservers, search, options).
//   - None: nothing but spec.dnsConfig.
//
// spec.dnsConfig is then added: its nameservers and searches after the
// policy's (duplicates dropped), its options replacing the policy's of the
// same name; at most 3 nameservers and 32 search domains are kept.

// HostResolvConf is the node's resolver configuration Default pods get
// (the kubelet's --resolv-conf).
const HostResolvConf = "/etc/resolv.conf"

// dnsConf is a resolver configuration.
type dnsConf struct {
	nameservers, searches, options []string
}

// parseResolvConf reads the nameserver, search/domain and options lines.
func parseResolvConf(b []byte) dnsConf {
	var c dnsConf
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) > 1 {
				c.nameservers = append(c.nameservers, f[1])
			}
		case "search", "domain": // the last one wins, as in the resolver
			c.searches = slices.Clone(f[1:])
		case "options":
			c.options = append(c.options, f[1:]...)
		}
	}
	return c
}

// podDNS is pod's resolver configuration; clusterDNS is the cluster's
// nameserver ("" when the node has none). fallback says that a cluster
// policy fell back to Default for want of it.
func podDNS(pod *api.Pod, clusterDNS string, host dnsConf) (c dnsConf, fallback bool) {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = api.DNSClusterFirst
	}
	if policy == api.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = api.DNSDefault
	}
	if (policy == api.DNSClusterFirst || policy == api.DNSClusterFirstWithHostNet) && clusterDNS == "" {
		policy, fallback = api.DNSDefault, true
	}
	switch policy {
	case api.DNSClusterFirst, api.DNSClusterFirstWithHostNet:
		d := api.ClusterDomain
		c.nameservers = []string{clusterDNS}
		c.searches = append([]string{pod.Namespace + ".svc." + d, "svc." + d, d}, host.searches...)
		c.options = []string{"ndots:5"}
	case api.DNSDefault:
		c = dnsConf{slices.Clone(host.nameservers), slices.Clone(host.searches), slices.Clone(host.options)}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		c.nameservers = dedupe(append(c.nameservers, dc.Nameservers...))
		c.searches = dedupe(append(c.searches, dc.Searches...))
		for _, o := range dc.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			if i := slices.IndexFunc(c.options, func(s string) bool { return strings.SplitN(s, ":", 2)[0] == o.Name }); i >= 0 {
				c.options[i] = opt
			} else {
				c.options = append(c.options, opt)
			}
		}
	}
	if len(c.nameservers) > api.MaxDNSNameservers {
		c.nameservers = c.nameservers[:api.MaxDNSNameservers]
	}
	if len(c.searches) > api.MaxDNSSearchPaths {
		c.searches = c.searches[:api.MaxDNSSearchPaths]
	}
	return c, fallback
}

func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// format writes c as containerd writes a sandbox's resolv.conf.
func (c dnsConf) format() []byte {
	var b strings.Builder
	if len(c.searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(c.searches, " "))
	}
	for _, ns := range c.nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(c.options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(c.options, " "))
	}
	return []byte(b.String())
}

// clusterDNS is the cluster IP of kube-system/kube-dns when this node has
// a pod network (and so a DNS server), else "".
func (w *Worker) clusterDNS(ctx context.Context) string {
	if w.cfg.Network == nil || w.cfg.Client == nil {
		return ""
	}
	s, err := client.Get[*api.Service](ctx, w.cfg.Client, api.NamespaceSystem, api.ClusterDNSService)
	if err != nil {
		if !api.IsNotFound(err) {
			w.log.Debug("read the cluster DNS service", "err", err)
		}
		return ""
	}
	return s.Spec.ClusterIP
}

// resolvConfMount writes pod's resolv.conf (once: as the kubelet, a
// change of the cluster's DNS reaches new pods) and returns its mount; ok
// is false when the worker has no volume directory.
func (w *Worker) resolvConfMount(ctx context.Context, pod *api.Pod) (runtime.Mount, bool, error) {
	if w.cfg.VolumeDir == "" {
		return runtime.Mount{}, false, nil
	}
	path := filepath.Join(w.podDir(pod.UID), "resolv.conf")
	if _, err := os.Stat(path); err != nil {
		host, _ := os.ReadFile(HostResolvConf) // none: no nameservers, as on such a host
		c, fallback := podDNS(pod, w.clusterDNS(ctx), parseResolvConf(host))
		if fallback {
			w.log.Debug("no cluster DNS on this node: the pod gets the node's resolv.conf", "pod", api.KeyOf(pod))
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return runtime.Mount{}, false, fmt.Errorf("write resolv.conf: %w", err)
		}
		if err := os.WriteFile(path, c.format(), 0o644); err != nil {
			return runtime.Mount{}, false, fmt.Errorf("write resolv.conf: %w", err)
		}
	}
	return runtime.Mount{Source: path, Destination: "/etc/resolv.conf", ReadOnly: true}, true, nil
}
