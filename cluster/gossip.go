package cluster

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/membership"
)

// advertiseURL turns https://0.0.0.0:7443 into https://ADDR:7443, with
// ADDR the advertise address or the default route's (http:// too, for
// etcd's peer URLs).
func advertiseURL(apiURL, advertise string) string {
	scheme, hostport, ok := strings.Cut(apiURL, "://")
	if !ok {
		scheme, hostport = "", apiURL
	} else {
		scheme += "://"
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return apiURL
	}
	ip := net.ParseIP(host)
	if host != "" && (ip == nil || !ip.IsUnspecified()) {
		return apiURL
	}
	if advertise == "" {
		advertise = agent.DefaultConfig().NodeIP
	}
	return scheme + net.JoinHostPort(advertise, port)
}

// joinCommand is what `skiff server` prints for the other machines: the
// join token by its file (never itself: ps would show it), the CA's pin.
func joinCommand(m *membership.Membership, advertise, tokenFile, caHash string) string {
	addr := m.LocalAddr()
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if advertise != "" {
			host = advertise
		} else if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			host = agent.DefaultConfig().NodeIP
		}
		if port == strconv.Itoa(membership.DefaultPort) {
			addr = host
		} else {
			addr = net.JoinHostPort(host, port)
		}
	}
	return fmt.Sprintf("skiff agent --join %s --token-file %s --discovery-token-ca-cert-hash %s", addr, tokenFile, caHash)
}
