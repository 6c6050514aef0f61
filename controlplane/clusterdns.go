package controlplane

import (
	"context"
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/util/intstr"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/apiserver"
)

// ensureClusterDNSService makes the Service kube-system/kube-dns when it
// is missing, as kubeadm's CoreDNS addon does: the tenth address of the
// service range (10.96.0.10), ports dns 53/UDP and dns-tcp 53/TCP,
// kubeadm's labels. It has no selector and no endpoints: every node's
// agent answers at its address itself (agent/dns). A Service a user
// changed is left alone.
func ensureClusterDNSService(ctx context.Context, reg *apiserver.Registry) error {
	ip := api.ClusterDNSIP(netip.MustParsePrefix(apiserver.DefaultServiceCIDR)).String()
	svc := &api.Service{ObjectMeta: api.ObjectMeta{Name: api.ClusterDNSService, Namespace: api.NamespaceSystem,
		Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"}},
		Spec: api.ServiceSpec{Type: api.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []api.ServicePort{
				{Name: "dns", Protocol: api.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Protocol: api.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(53)},
			}}}
	k := api.MustKindOf(svc)
	if _, err := reg.Get(ctx, k, svc.Namespace, svc.Name); err == nil || !api.IsNotFound(err) {
		return err
	}
	if _, err := reg.Create(ctx, k, svc); err != nil && !api.IsAlreadyExists(err) {
		return fmt.Errorf("create %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}
