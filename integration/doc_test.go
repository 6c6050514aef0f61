// Package integration holds the end-to-end tests: the real containerd
// (started by hack/containerd-start.sh on a private socket), several
// agents, network namespaces where the network matters, simulated GPUs,
// the real kubectl, Python client and browser, and the course labs run
// from the skiff binary. The clusters are assembled as `skiff up` does
// (cluster.StartControlPlane, cluster.StartNode). Tests wait for
// conditions with deadlines (internal/testwait), never sleep; without a
// prerequisite they skip, and fail under CI. Run them through hack/test.sh
// (or one at a time with -run).
package integration
