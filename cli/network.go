package cli

// networkFlagHelp is the help of --network on up, server and agent (the
// values are package node's: NetworkAuto, NetworkNone, NetworkCNI).
const networkFlagHelp = "pod network of the local node: auto (cni when running as root with the CNI plugins in /usr/lib/cni, iptables and containerd, else none), none (pods share the node's network: one pod per containerPort per node, no Services), or cni (a namespace and IP per pod, routes between nodes, and the service proxy; needs root)"
