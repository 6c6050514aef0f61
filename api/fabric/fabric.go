// Package fabric describes how the GPU nodes of a simulated cluster are
// wired to each other: which nodes share an NVLink/NVSwitch domain (their
// GPUs talk at NVLink speed across nodes) and which meet only over the
// InfiniBand network. `skiff up --nodes N --cluster FILE` reads it and
// labels each node with its domain, so the scheduler (node affinity, Kueue
// topology-aware scheduling) can keep a job inside one domain.
//
// The file:
//
//	apiVersion: skiff.dev/v1alpha1
//	kind: Cluster
//	nodes: 4                  # must match --nodes
//	gpus: sim:dgxa100         # --gpus for every node (optional)
//	clusterUUID: 0b8e...      # the NVLink fabric's cluster UUID (optional)
//	interconnect: InfiniBand  # between domains (the only one skiff knows)
//	nvlinkDomains:
//	- name: nvl-a             # a label value: the readable domain name
//	  nodes: [1, 2]           # node numbers, 1..nodes (NAME-1 .. NAME-N)
//	- name: nvl-b
//	  nodes: [3, 4]
//
// A node in a domain gets two labels: nvidia.com/gpu.clique, in the shape
// NVIDIA's GPU feature discovery writes for multi-node NVLink
// (CLUSTERUUID.CLIQUEID, the clique being the domain's position from 1),
// and skiff.dev/nvlink-domain with the domain's name. A node in no domain
// gets neither: its GPUs reach other nodes only over InfiniBand. Every node
// gets skiff.dev/interconnect.
//
// Real GFD labels a node with a clique only when its GPUs report fabric
// information (GB200 NVL72, GH200 NVL32); a DGX A100 has none. The
// simulation lets a 4×8 A100 cluster stand in for a rack-scale system so
// the homework's placement questions can be asked on a laptop.
package fabric

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Labels the fabric puts on nodes.
const (
	// LabelClique is GPU feature discovery's multi-node NVLink clique.
	LabelClique = "nvidia.com/gpu.clique"
	// LabelDomain is skiff's readable name of the node's NVLink domain.
	LabelDomain = "skiff.dev/nvlink-domain"
	// LabelInterconnect is the network between domains.
	LabelInterconnect = "skiff.dev/interconnect"
)

// APIVersion and Kind of a cluster file.
const (
	APIVersion = "skiff.dev/v1alpha1"
	Kind       = "Cluster"
	// InfiniBand is the one interconnect between domains skiff simulates.
	InfiniBand = "InfiniBand"
	// DefaultClusterUUID is the fabric's cluster UUID when the file gives
	// none: fixed, so labels are the same on every run.
	DefaultClusterUUID = "5eb1a5c0-0000-4000-8000-000000000001"
)

// Cluster is a cluster file.
type Cluster struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Nodes is how many nodes the cluster has.
	Nodes int `json:"nodes"`
	// GPUs is the --gpus value of every node ("" leaves --gpus as given).
	GPUs string `json:"gpus,omitempty"`
	// ClusterUUID of the NVLink fabric; "" is DefaultClusterUUID.
	ClusterUUID string `json:"clusterUUID,omitempty"`
	// Interconnect between domains; "" is InfiniBand.
	Interconnect string `json:"interconnect,omitempty"`
	// NVLinkDomains: nodes whose GPUs share an NVLink/NVSwitch fabric.
	NVLinkDomains []Domain `json:"nvlinkDomains,omitempty"`
}

// Domain is one NVLink domain.
type Domain struct {
	// Name is the value of skiff.dev/nvlink-domain.
	Name string `json:"name"`
	// Nodes are node numbers from 1.
	Nodes []int `json:"nodes"`
}

// uuidRE is the canonical form GFD prints (uuid.UUID.String): lower-case hex, 8-4-4-4-12.
var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// Load reads and validates a cluster file; errors name the file and the
// field.
func Load(path string) (*Cluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read cluster file: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("cluster file %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes and validates a cluster file's bytes (unknown fields and
// duplicate keys are errors).
func Parse(data []byte) (*Cluster, error) {
	var c Cluster
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate reports every problem at once, each with its field path.
func (c *Cluster) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	if c.APIVersion != APIVersion {
		bad("apiVersion", "%q is not supported (%s)", c.APIVersion, APIVersion)
	}
	if c.Kind != Kind {
		bad("kind", "%q is not supported (%s)", c.Kind, Kind)
	}
	if c.Nodes < 1 {
		bad("nodes", "%d: a cluster has at least 1 node", c.Nodes)
	}
	if c.ClusterUUID != "" {
		if !uuidRE.MatchString(c.ClusterUUID) {
			bad("clusterUUID", "%q is not a UUID", c.ClusterUUID)
		}
	}
	if c.Interconnect != "" && c.Interconnect != InfiniBand {
		bad("interconnect", "%q is not supported (%s)", c.Interconnect, InfiniBand)
	}
	owner := map[int]string{}
	names := map[string]bool{}
	for i, d := range c.NVLinkDomains {
		p := fmt.Sprintf("nvlinkDomains[%d]", i)
		for _, msg := range validation.IsDNS1123Label(d.Name) {
			bad(p+".name", "%q: %s", d.Name, msg)
		}
		if names[d.Name] {
			bad(p+".name", "%q given twice", d.Name)
		}
		names[d.Name] = true
		if len(d.Nodes) == 0 {
			bad(p+".nodes", "a domain has at least 1 node")
		}
		for j, n := range d.Nodes {
			np := fmt.Sprintf("%s.nodes[%d]", p, j)
			switch {
			case n < 1 || n > c.Nodes:
				bad(np, "node %d is not in 1..%d", n, c.Nodes)
			case owner[n] != "":
				bad(np, "node %d is already in domain %q", n, owner[n])
			default:
				owner[n] = d.Name
			}
		}
	}
	return errors.Join(errs...)
}

// NodeLabels are the labels of node number i (from 1).
func (c *Cluster) NodeLabels(i int) map[string]string {
	ic := c.Interconnect
	if ic == "" {
		ic = InfiniBand
	}
	l := map[string]string{LabelInterconnect: ic}
	id := c.ClusterUUID
	if id == "" {
		id = DefaultClusterUUID
	}
	for k, d := range c.NVLinkDomains {
		if slices.Contains(d.Nodes, i) {
			l[LabelClique] = fmt.Sprintf("%s.%d", id, k+1)
			l[LabelDomain] = d.Name
		}
	}
	return l
}

// Domain is the name of node i's domain, or "".
func (c *Cluster) Domain(i int) string { return c.NodeLabels(i)[LabelDomain] }
