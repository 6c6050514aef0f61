package api

import "k8s.io/apimachinery/pkg/util/validation"

// isDNS1123Label and isDNS1123Subdomain are apimachinery's
// validation.IsDNS1123Label and IsDNS1123Subdomain, which every name of
// every create goes through: a valid value (nearly all of them) is told
// by a loop over its bytes instead of their regular expressions (2 % of
// the API server's CPU in the api benchmark), and an invalid one gets
// apimachinery's own messages.
func isDNS1123Label(v string) []string {
	if len(v) <= validation.DNS1123LabelMaxLength && dnsLabelSyntax(v) {
		return nil
	}
	return validation.IsDNS1123Label(v)
}

func isDNS1123Subdomain(v string) []string {
	if len(v) <= validation.DNS1123SubdomainMaxLength && dnsSubdomainSyntax(v) {
		return nil
	}
	return validation.IsDNS1123Subdomain(v)
}

// dnsLabelSyntax reports whether v matches [a-z0-9]([-a-z0-9]*[a-z0-9])?,
// of any length.
func dnsLabelSyntax(v string) bool {
	n := len(v)
	if n == 0 {
		return false
	}
	for i := 0; i < n; i++ {
		switch c := v[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '-' && i > 0 && i < n-1:
		default:
			return false
		}
	}
	return true
}

// dnsSubdomainSyntax reports whether v is labels (dnsLabelSyntax) joined
// by dots, of any length.
func dnsSubdomainSyntax(v string) bool {
	for {
		i := 0
		for i < len(v) && v[i] != '.' {
			i++
		}
		if !dnsLabelSyntax(v[:i]) {
			return false
		}
		if i == len(v) {
			return true
		}
		v = v[i+1:]
	}
}
