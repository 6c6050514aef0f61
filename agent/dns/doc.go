// Package dns is skiff's cluster DNS, CoreDNS's kubernetes plugin in one
// file a student can read: every node's agent answers the names of the
// Kubernetes DNS specification (github.com/kubernetes/dns, "Kubernetes
// DNS-Based Service Discovery") from its informers' caches of Services and
// Endpoints, and forwards every other name to the node's own resolvers.
// The wire format is github.com/miekg/dns, the library CoreDNS is built on.
//
// # Where it answers
//
// The Service kube-system/kube-dns has the tenth address of the service
// range (10.96.0.10), as kubeadm gives it, and that is the nameserver the
// agent writes into every ClusterFirst pod's /etc/resolv.conf. No pod
// stands behind it: each node's agent adds the address to its pod bridge
// and listens there on port 53 (UDP and TCP), as NodeLocal DNSCache
// listens on its link-local address and the kube-dns IP on every node. A
// pod's query therefore never leaves its node, and the Service has no
// endpoints, so the service proxy writes no rule for it.
//
// # Records (the specification's words)
//
//   - SVC.NS.svc.cluster.local A: the cluster IP of a ClusterIP Service;
//     for a headless one (clusterIP None) one record per ready endpoint.
//   - HOST.SVC.NS.svc.cluster.local A: a headless Service's ready endpoint
//     whose pod has hostname HOST and subdomain SVC (a StatefulSet's
//     web-0.nginx), or, without a hostname, the address with - for . .
//   - _PORT._PROTO.SVC.NS.svc.cluster.local SRV: each named port; the
//     target is the Service's name, or for a headless one each endpoint's
//     name (with its A record in the additional section).
//   - A-B-C-D.NS.pod.cluster.local A: A.B.C.D (CoreDNS's "pods insecure").
//   - PTR for cluster IPs and headless endpoints' addresses.
//   - AAAA: none (skiff's services are IPv4): NOERROR with no answer.
//   - Anything else under cluster.local: NXDOMAIN, with the zone's SOA.
//
// # Invariants
//
//   - Every answer is computed from the caches at the moment of the query:
//     nothing is cached in the server, so a change is answered as soon as
//     the watch delivers it (well within a second).
//   - Only ready endpoints are answered, as only they get traffic.
//   - Records have TTL 5 s, CoreDNS's default for the kubernetes plugin.
//   - Names outside cluster.local go to the node's resolvers (its
//     resolv.conf), never back to the cluster address itself.
package dns
