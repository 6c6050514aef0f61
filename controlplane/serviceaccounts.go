package controlplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"

	"skiff.dev/skiff/controlplane/apiserver"
	"skiff.dev/skiff/controlplane/controllers"
	"skiff.dev/skiff/controlplane/serviceaccount"
	"skiff.dev/skiff/pki"
)

// What pods need to reach the API from inside the cluster (in-cluster
// config, docs/concepts.md):
//
//   - ServiceAccount tokens signed with DATA-DIR/pki/sa.key (made on the
//     first start, copied to servers that join with the CA), verified by
//     every server: serviceAccountTokens;
//   - the cluster CA in every namespace's kube-root-ca.crt: rootCA;
//   - the default/kubernetes Service, whose endpoints are the API
//     servers: this server's advertised address and those of the servers
//     gossip sees alive (kubernetesService).

// serviceAccountTokens loads (or makes) the signing key and turns tokens,
// their authenticator and ServiceAccount admission on in reg and api.
func serviceAccountTokens(dataDir string, reg *apiserver.Registry, api *apiserver.Config) error {
	key, err := serviceaccount.LoadOrCreateKey(filepath.Join(dataDir, "pki"))
	if err != nil {
		return err
	}
	t, err := serviceaccount.New(key)
	if err != nil {
		return err
	}
	reg.SetServiceAccountTokens(t)
	api.TokenAuthenticators = append(api.TokenAuthenticators, apiserver.NewServiceAccountAuthenticator(reg))
	return nil
}

// rootCA is the cluster CA certificate the root CA publisher hands to
// every namespace (nil, and no publisher, when there is none).
func (cp *ControlPlane) rootCA() []byte {
	b, err := os.ReadFile(filepath.Join(cp.cfg.DataDir, "pki", pki.CACertFile))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			cp.log.Warn("read the cluster CA for kube-root-ca.crt", "err", err)
		}
		return nil
	}
	return b
}

// kubernetesService configures the default/kubernetes Service.
func (cp *ControlPlane) kubernetesService() *controllers.KubernetesServiceConfig {
	return &controllers.KubernetesServiceConfig{
		ClusterIP: cp.server.Registry().KubernetesServiceIP(),
		Servers:   cp.apiServerAddrs,
	}
}

// apiServerAddrs are the IP:port of every API server: this one first
// (its advertised URL, else its listen address), then the others
// (otherServers: recorded in etcd and alive in gossip). An unspecified host (0.0.0.0) becomes this machine's
// address towards the default route.
func (cp *ControlPlane) apiServerAddrs() []string {
	urls := []string{cp.advURL}
	if cp.advURL == "" {
		urls[0] = "https://" + cp.server.Addr()
	}
	urls = append(urls, cp.otherServers()...) // never gossip's word alone
	var out []string
	for _, u := range urls {
		a, err := hostPortOf(u)
		if err != nil {
			cp.log.Debug("an API server URL without an IP", "url", u, "err", err)
			continue
		}
		out = append(out, a)
	}
	return out
}

// hostPortOf turns an API server URL into IP:port.
func hostPortOf(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	ap, err := netip.ParseAddrPort(u.Host)
	if err != nil {
		return "", fmt.Errorf("API server %s: want an IP address and a port: %w", raw, err)
	}
	if ap.Addr().IsUnspecified() {
		ip, err := outboundIP()
		if err != nil {
			return "", err
		}
		ap = netip.AddrPortFrom(ip, ap.Port())
	}
	return ap.String(), nil
}

// outboundIP is the address this machine sends from towards the default
// route (a UDP "connection" sends nothing).
func outboundIP() (netip.Addr, error) {
	c, err := net.Dial("udp4", "192.0.2.1:9")
	if err != nil {
		return netip.Addr{}, fmt.Errorf("find this machine's address: %w", err)
	}
	defer c.Close()
	ap, err := netip.ParseAddrPort(c.LocalAddr().String())
	if err != nil {
		return netip.Addr{}, err
	}
	return ap.Addr(), nil
}
