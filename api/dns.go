package api

import (
	"fmt"
	"net/netip"
	"strings"
)

// Cluster DNS (agent/dns): the names the kubelet and kubeadm give it.
const (
	// ClusterDomain is the kubelet's --cluster-domain.
	ClusterDomain = "cluster.local"
	// ClusterDNSService is the Service kube-system/kube-dns, kubeadm's name
	// for the cluster's DNS (CoreDNS keeps it): its cluster IP is the
	// nameserver of every ClusterFirst pod.
	ClusterDNSService = "kube-dns"
	// DNS policies of a pod (spec.dnsPolicy).
	DNSClusterFirst            = "ClusterFirst"
	DNSClusterFirstWithHostNet = "ClusterFirstWithHostNet"
	DNSDefault                 = "Default"
	DNSNone                    = "None"
)

// ClusterDNSIP is the tenth address of the service range, where kubeadm
// puts kube-dns (10.96.0.10 in 10.96.0.0/16).
func ClusterDNSIP(serviceCIDR netip.Prefix) netip.Addr {
	a := serviceCIDR.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	return a
}

// PodDNSConfig is a pod's spec.dnsConfig: added to what its dnsPolicy
// gives (all of it with None).
type PodDNSConfig struct {
	// Nameservers: at most 3 IP addresses, after the policy's.
	Nameservers []string `json:"nameservers,omitempty"`
	// Searches: search domains, after the policy's.
	Searches []string `json:"searches,omitempty"`
	// Options: resolver options; one of a name the policy also gives
	// replaces it.
	Options []PodDNSConfigOption `json:"options,omitempty"`
}

// PodDNSConfigOption is one resolver option (ndots, timeout, edns0...).
type PodDNSConfigOption struct {
	Name  string  `json:"name,omitempty"`
	Value *string `json:"value,omitempty"`
}

// Limits of a pod's DNS configuration, Kubernetes'.
const (
	MaxDNSNameservers     = 3
	MaxDNSSearchPaths     = 32
	MaxDNSSearchListChars = 2048
)

// validatePodDNS is Kubernetes' validateDNSPolicy and validatePodDNSConfig.
func validatePodDNS(s *PodSpec, p string) []*FieldError {
	var errs []*FieldError
	switch s.DNSPolicy {
	case "", DNSClusterFirst, DNSClusterFirstWithHostNet, DNSDefault, DNSNone:
	default:
		errs = append(errs, NotSupported(p+".dnsPolicy", s.DNSPolicy, DNSClusterFirstWithHostNet, DNSClusterFirst, DNSDefault, DNSNone))
	}
	c, fp := s.DNSConfig, p+".dnsConfig"
	if s.DNSPolicy == DNSNone {
		if c == nil {
			return append(errs, Required(fp, "must provide `dnsConfig` when `dnsPolicy` is None"))
		}
		if len(c.Nameservers) == 0 {
			return append(errs, Required(fp+".nameservers", "must provide at least one DNS nameserver when `dnsPolicy` is None"))
		}
	}
	if c == nil {
		return errs
	}
	if len(c.Nameservers) > MaxDNSNameservers {
		errs = append(errs, Invalid(fp+".nameservers", c.Nameservers, fmt.Sprintf("must not have more than %d nameservers", MaxDNSNameservers)))
	}
	for i, ns := range c.Nameservers {
		if _, err := netip.ParseAddr(ns); err != nil {
			errs = append(errs, Invalid(elemPath(fp, ".nameservers", i), ns, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
		}
	}
	if len(c.Searches) > MaxDNSSearchPaths {
		errs = append(errs, Invalid(fp+".searches", c.Searches, fmt.Sprintf("must not have more than %d search paths", MaxDNSSearchPaths)))
	}
	if len(strings.Join(c.Searches, " ")) > MaxDNSSearchListChars {
		errs = append(errs, Invalid(fp+".searches", c.Searches, fmt.Sprintf("must not have more than %d characters (including spaces) in the search list", MaxDNSSearchListChars)))
	}
	for i, search := range c.Searches {
		if search == "." {
			continue
		}
		search = strings.TrimSuffix(search, ".")
		for _, msg := range isDNS1123Subdomain(search) {
			errs = append(errs, Invalid(elemPath(fp, ".searches", i), search, msg))
		}
	}
	for i, o := range c.Options {
		if o.Name == "" {
			errs = append(errs, Required(elemPath(fp, ".options", i), "Option.Name must not be empty"))
		}
	}
	return errs
}
