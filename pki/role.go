package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// # Who is an API server
//
// The cluster CA signs serving certificates for two kinds of servers: the
// API servers, and the agents (the kubelet's serving certificate, which
// anyone holding the join token can get for its own node name and
// addresses). Both chain to the one CA every kubeconfig, agent and pod
// trusts, so the CA and the host name alone cannot tell a student's
// laptop, which joined as a node and gossips that it is an API server,
// from the real one. An API server's serving certificate therefore
// carries a URI SAN that the CA puts in no other certificate,
// APIServerURI: node credentials (IssueNode) never hold it, a user's
// client certificate (client usage only) cannot serve at all. Every skiff
// client checks it (VerifyAPIServer; client.Config does for every
// connection), whichever way it learned of the server: its kubeconfig,
// the kubeconfig's failover list, gossip.
//
// The servers' etcd traffic (peer and client URLs) is TLS with the same
// CA; each server's etcd certificate (EtcdLeaf) is named EtcdCommonName,
// which etcd requires of every peer and client (its allowed CN). No node
// name can be it (node names are DNS subdomains, without ':'), and the
// signer of users' certificates refuses it (Reserved).

// APIServerURI is the URI SAN of an API server's serving certificate.
const APIServerURI = "urn:skiff:apiserver"

// EtcdCommonName is the common name of the servers' etcd certificates.
const EtcdCommonName = "system:skiff:etcd"

// ErrNotAPIServer is a server whose certificate, though signed by the
// cluster CA, is not an API server's (no APIServerURI): an agent's, or
// someone posing as the API server with a node's credentials.
var ErrNotAPIServer = errors.New("the server's certificate is not an API server's")

// APIServerLeaf is an API server's serving certificate for the given DNS
// names and IP addresses (ServingNames), with APIServerURI.
func APIServerLeaf(names Leaf) Leaf {
	u, _ := url.Parse(APIServerURI)
	names.CommonName = "kube-apiserver"
	names.Server, names.Client = true, false
	names.URIs = []*url.URL{u}
	return names
}

// EtcdLeaf is a server's etcd certificate for the hosts its etcd member
// is reached at (peers and its own client): both usages, as etcd presents
// the same certificate as server and client.
func EtcdLeaf(hosts ...string) Leaf {
	dns, ips := ServingNames(hosts...)
	return Leaf{CommonName: EtcdCommonName, DNSNames: dns, IPs: ips, Server: true, Client: true}
}

// IsAPIServer reports whether a certificate is an API server's serving
// certificate: server usage and APIServerURI (the chain is the caller's
// to verify).
func IsAPIServer(c *x509.Certificate) bool {
	if c == nil || !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		return false
	}
	return slices.ContainsFunc(c.URIs, func(u *url.URL) bool { return u.String() == APIServerURI })
}

// VerifyAPIServer checks the leaf of a verified TLS connection (as
// tls.Config.VerifyConnection gets it): it must be an API server's.
func VerifyAPIServer(peer []*x509.Certificate) error {
	if len(peer) == 0 {
		return fmt.Errorf("%w: it presented none", ErrNotAPIServer)
	}
	if !IsAPIServer(peer[0]) {
		return fmt.Errorf("%w (subject %q): refusing to talk to it", ErrNotAPIServer, peer[0].Subject.CommonName)
	}
	return nil
}

// Reserved says why a user's certificate may not carry a name, or ""
// when it may: the servers' own etcd identity, and the prefixes Kubernetes
// keeps for nodes (system:node:), service accounts
// (system:serviceaccount:) and skiff's components (system:skiff:).
func Reserved(commonName string, groups []string) string {
	for _, p := range []string{"system:skiff:", NodeUserPrefix, "system:serviceaccount:"} {
		if strings.HasPrefix(commonName, p) {
			return fmt.Sprintf("the user name %q is reserved (prefix %q)", commonName, p)
		}
	}
	for _, g := range groups {
		if g == NodesGroup || strings.HasPrefix(g, "system:serviceaccounts") || strings.HasPrefix(g, "system:skiff:") {
			return fmt.Sprintf("the group %q is reserved", g)
		}
	}
	return ""
}
