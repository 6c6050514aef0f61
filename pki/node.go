package pki

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"skiff.dev/skiff/internal/atomicfile"
)

// Files of a node's credentials inside its data dir (NodeDir), named as
// the kubelet names its own (kubelet-client, kubelet serving).
const (
	NodeCACertFile     = "ca.crt"
	NodeClientCertFile = "kubelet-client.crt"
	NodeClientKeyFile  = "kubelet-client.key"
	NodeServeCertFile  = "kubelet.crt"
	NodeServeKeyFile   = "kubelet.key"
)

// NodeCredentials are what a node holds, all PEM: the cluster CA, its
// client certificate towards the API server (CN system:node:NAME, O
// system:nodes) and the serving certificate of its agent (SANs: its
// addresses).
type NodeCredentials struct {
	CA          []byte `json:"ca"`
	ClientCert  []byte `json:"clientCert"`
	ClientKey   []byte `json:"clientKey"`
	ServingCert []byte `json:"servingCert"`
	ServingKey  []byte `json:"servingKey"`
}

// IssueNode signs the credentials of node name reached at addrs (IP
// addresses only): its client certificate (client usage only) and its
// agent's serving certificate (server usage only, NodeServingLeaf).
func (ca *CA) IssueNode(name string, addrs []string) (NodeCredentials, error) {
	serving, err := NodeServingLeaf(name, addrs)
	if err != nil {
		return NodeCredentials{}, fmt.Errorf("issue node credentials: %w", err)
	}
	nc := NodeCredentials{CA: ca.CertPEM()}
	nc.ClientCert, nc.ClientKey, err = ca.Issue(Leaf{CommonName: NodeUserPrefix + name, Organization: []string{NodesGroup}, Client: true})
	if err != nil {
		return NodeCredentials{}, fmt.Errorf("issue node credentials: %w", err)
	}
	nc.ServingCert, nc.ServingKey, err = ca.Issue(serving)
	if err != nil {
		return NodeCredentials{}, fmt.Errorf("issue node credentials: %w", err)
	}
	return nc, nil
}

// NodeServingLeaf is the serving certificate of the agent of node name
// reached at addrs: the node name as its one DNS name (none when the name
// is an IP address) and exactly addrs as its IP addresses. Unlike
// ServingNames it adds neither localhost nor 127.0.0.1: an agent's
// certificate names only where the API server reaches it (the node's
// InternalIP, which the API server verifies it for), so that it cannot
// pass for another server of the cluster CA. A name that is no IP address
// in addrs is an error.
func NodeServingLeaf(name string, addrs []string) (Leaf, error) {
	if name == "" {
		return Leaf{}, errors.New("no node name")
	}
	leaf := Leaf{CommonName: name, Server: true}
	if net.ParseIP(name) == nil {
		leaf.DNSNames = []string{name}
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		ip := net.ParseIP(a)
		if ip == nil {
			return Leaf{}, fmt.Errorf("node address %q is not an IP address", a)
		}
		if !seen[ip.String()] {
			seen[ip.String()] = true
			leaf.IPs = append(leaf.IPs, ip)
		}
	}
	return leaf, nil
}

// NodeDir is where a node keeps its credentials inside its data dir.
func NodeDir(dataDir string) string { return filepath.Join(dataDir, "pki") }

// Save writes the credentials into dir (NodeDir), each file atomically,
// keys 0600.
func (nc NodeCredentials) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save node credentials: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{NodeClientKeyFile, nc.ClientKey, 0o600}, {NodeServeKeyFile, nc.ServingKey, 0o600},
		{NodeClientCertFile, nc.ClientCert, 0o644}, {NodeServeCertFile, nc.ServingCert, 0o644},
		{NodeCACertFile, nc.CA, 0o644},
	} {
		if err := atomicfile.WriteFile(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return fmt.Errorf("save node credentials: %w", err)
		}
	}
	return nil
}

// LoadNodeCredentials reads the credentials kept in dir. A missing set
// satisfies errors.Is(err, fs.ErrNotExist) (a node that never joined).
func LoadNodeCredentials(dir string) (NodeCredentials, error) {
	var nc NodeCredentials
	for _, f := range []struct {
		name string
		dst  *[]byte
	}{
		{NodeCACertFile, &nc.CA}, {NodeClientCertFile, &nc.ClientCert}, {NodeClientKeyFile, &nc.ClientKey},
		{NodeServeCertFile, &nc.ServingCert}, {NodeServeKeyFile, &nc.ServingKey},
	} {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			return NodeCredentials{}, fmt.Errorf("load node credentials: %w", err)
		}
		*f.dst = b
	}
	return nc, nil
}

// Check verifies that the credentials are those of node name, signed by
// their CA, usable at now (not needing renewal), and that the serving
// certificate names every address in addrs. A node whose credentials
// fail it asks for new ones.
func (nc NodeCredentials) Check(name string, addrs []string, now time.Time) error {
	ca, err := FromPEM(nc.CA)
	if err != nil {
		return fmt.Errorf("node CA: %w", err)
	}
	client, err := tls.X509KeyPair(nc.ClientCert, nc.ClientKey)
	if err != nil {
		return fmt.Errorf("node client certificate: %w", err)
	}
	if err := ca.fits(client, Leaf{CommonName: NodeUserPrefix + name, Organization: []string{NodesGroup}, Client: true}, now); err != nil {
		return fmt.Errorf("node client certificate: %w", err)
	}
	serving, err := tls.X509KeyPair(nc.ServingCert, nc.ServingKey)
	if err != nil {
		return fmt.Errorf("node serving certificate: %w", err)
	}
	leaf, err := NodeServingLeaf(name, addrs)
	if err != nil {
		return fmt.Errorf("node serving certificate: %w", err)
	}
	if err := ca.fits(serving, leaf, now); err != nil {
		return fmt.Errorf("node serving certificate: %w", err)
	}
	return nil
}

// AgentServerTLS is the TLS configuration of the node's agent server: its
// serving certificate, and a client certificate of the cluster CA
// required (the API server's; the agent's handler checks who).
func (nc NodeCredentials) AgentServerTLS() (*tls.Config, error) {
	ca, err := FromPEM(nc.CA)
	if err != nil {
		return nil, fmt.Errorf("node CA: %w", err)
	}
	cert, err := tls.X509KeyPair(nc.ServingCert, nc.ServingKey)
	if err != nil {
		return nil, fmt.Errorf("node serving certificate: %w", err)
	}
	return ca.ServerTLS(cert, true), nil
}

// IsNotExist reports whether err means no credentials were kept yet.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
