package cli

import "skiff.dev/skiff/node"

// Values of --network: the node package's (node.NetworkAuto: cni when it
// can work, else none; node.NetworkNone: pods share the node's network;
// node.NetworkCNI: a namespace and IP per pod, routes, service proxy).
const (
	networkAuto = node.NetworkAuto
	networkNone = node.NetworkNone
	networkCNI  = node.NetworkCNI
)

// networkFlagHelp is the help of --network on up, server and agent.
const networkFlagHelp = "pod network of the local node: auto (cni when running as root with the CNI plugins in /usr/lib/cni, iptables and containerd, else none), none (pods share the node's network: one pod per containerPort per node, no Services), or cni (a namespace and IP per pod, routes between nodes, and the service proxy; needs root)"
