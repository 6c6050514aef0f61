package gputopology

import (
	"fmt"
	"strconv"
	"strings"
)

// PCIePath is how the PCIe traffic between two GPUs travels, in the words of
// `nvidia-smi topo -m`, from closest to farthest.
type PCIePath int

const (
	// PathUnknown: not known (or the same GPU).
	PathUnknown PCIePath = iota
	// PIX: through at most one PCIe switch (both GPUs under the same switch).
	PIX
	// PXB: through several PCIe switches, without the host bridge.
	PXB
	// PHB: through a PCIe host bridge (the CPU).
	PHB
	// NODE: between host bridges within one NUMA node.
	NODE
	// SYS: across NUMA nodes, over the CPU interconnect (QPI/UPI, xGMI).
	SYS
)

var pathNames = [...]string{"", "PIX", "PXB", "PHB", "NODE", "SYS"}

func (p PCIePath) String() string {
	if p < 0 || int(p) >= len(pathNames) || p == PathUnknown {
		return "N/A"
	}
	return pathNames[p]
}

// MarshalText writes the nvidia-smi name, so JSON and YAML read "PIX".
func (p PCIePath) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads an nvidia-smi name.
func (p *PCIePath) UnmarshalText(b []byte) error {
	v, err := ParsePCIePath(string(b))
	*p = v
	return err
}

// ParsePCIePath reads "PIX", "PXB", "PHB", "NODE" or "SYS" (any case).
func ParsePCIePath(s string) (PCIePath, error) {
	for i, n := range pathNames {
		if n != "" && strings.EqualFold(s, n) {
			return PCIePath(i), nil
		}
	}
	if s == "" || s == "N/A" {
		return PathUnknown, nil
	}
	return PathUnknown, fmt.Errorf("unknown PCIe path %q (want PIX, PXB, PHB, NODE or SYS)", s)
}

// Link is the connection between two GPUs: the number of NVLinks between
// them (bonded together, NV12 means 12 links) and the PCIe path. A pair can
// have both; NVLink carries the GPU-to-GPU traffic when it is there.
type Link struct {
	NVLinks int      `json:"nvlinks,omitempty"`
	PCIe    PCIePath `json:"pcie"`
}

// String is the cell of `nvidia-smi topo -m`: "NV12" or the PCIe path.
func (l Link) String() string {
	if l.NVLinks > 0 {
		return "NV" + strconv.Itoa(l.NVLinks)
	}
	return l.PCIe.String()
}

// Topology is the matrix of links between the GPUs of a node, plus where
// each GPU sits (NUMA node, close CPUs). GPUs are numbered 0..N()-1 in the
// order of Source.Devices. A Topology is not changed after it is built and
// is safe for concurrent use; the exported fields exist for JSON (a node can
// publish its matrix) and for tests.
type Topology struct {
	// Links[i][j] is the link between GPU i and GPU j; Links[i][i] is zero.
	Links [][]Link `json:"links"`
	// NUMANodes[i] is the NUMA node of GPU i, -1 when unknown.
	NUMANodes []int `json:"numaNodes"`
	// CPUAffinity[i] lists the CPUs close to GPU i ("0-63"), "" when unknown.
	CPUAffinity []string `json:"cpuAffinity"`
}

// NewTopology returns a matrix for n GPUs with every link unknown and every
// NUMA node -1. Fill it with Set before sharing it.
func NewTopology(n int) *Topology {
	t := &Topology{
		Links:       make([][]Link, n),
		NUMANodes:   make([]int, n),
		CPUAffinity: make([]string, n),
	}
	for i := range t.Links {
		t.Links[i] = make([]Link, n)
		t.NUMANodes[i] = -1
	}
	return t
}

// N is the number of GPUs.
func (t *Topology) N() int {
	if t == nil {
		return 0
	}
	return len(t.Links)
}

// Set records the link between i and j in both directions.
func (t *Topology) Set(i, j int, l Link) {
	t.Links[i][j] = l
	t.Links[j][i] = l
}

// Link is the connection between GPUs i and j (the zero Link when i == j or
// either is out of range).
func (t *Topology) Link(i, j int) Link {
	if i == j || i < 0 || j < 0 || i >= t.N() || j >= t.N() {
		return Link{}
	}
	return t.Links[i][j]
}

// Restrict returns the matrix of the given GPUs only, renumbered 0..len-1 in
// the order given: what nvidia-smi shows inside a container that was given
// those GPUs.
func (t *Topology) Restrict(indexes []int) *Topology {
	r := NewTopology(len(indexes))
	for a, i := range indexes {
		if i >= 0 && i < t.N() {
			r.NUMANodes[a] = t.NUMANodes[i]
			r.CPUAffinity[a] = t.CPUAffinity[i]
		}
		for b, j := range indexes {
			r.Links[a][b] = t.Link(i, j)
		}
	}
	return r
}

// Legend is the legend printed under `nvidia-smi topo -m`.
const Legend = `Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
`

// String renders the matrix like `nvidia-smi topo -m`: one row and column
// per GPU, then the CPU and NUMA affinity columns, then the legend.
func (t *Topology) String() string {
	var b strings.Builder
	n := t.N()
	cell := func(s string) { fmt.Fprintf(&b, "\t%s", s) }
	for j := 0; j < n; j++ {
		cell("GPU" + strconv.Itoa(j))
	}
	b.WriteString("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n")
	for i := 0; i < n; i++ {
		b.WriteString("GPU" + strconv.Itoa(i))
		for j := 0; j < n; j++ {
			if i == j {
				cell(" X ")
			} else {
				cell(t.Link(i, j).String())
			}
		}
		cpus, numa := t.CPUAffinity[i], "N/A"
		if cpus == "" {
			cpus = "N/A"
		}
		if t.NUMANodes[i] >= 0 {
			numa = strconv.Itoa(t.NUMANodes[i])
		}
		cell(cpus)
		cell(numa)
		cell("N/A")
		b.WriteString("\n")
	}
	b.WriteString("\n")
	b.WriteString(Legend)
	return b.String()
}
