package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/util/intstr"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The kubernetes-service controller is kube-apiserver's own bootstrap
// controller and endpoint reconciler: the Service default/kubernetes
// (cluster IP the first address of the service range, port 443 named
// https, targetPort the API server's port, no selector) and its
// Endpoints and EndpointSlice "kubernetes", listing the address of every
// API server of the cluster. Pods reach the API at
// https://kubernetes.default.svc (KUBERNETES_SERVICE_HOST:PORT) through
// the service proxy's rules for that Service.
//
// Which addresses: KubernetesServiceConfig.Servers, asked at every
// reconcile (the control plane answers with this server and the servers
// gossip sees alive: a server that stops leaves the endpoints at the next
// reconcile, as the lease reconciler of kube-apiserver drops a server
// whose lease expired). A reconcile runs when either object changes and
// at every resync, and writes only what differs.
//
// A loopback address (`skiff up`, whose API server listens on
// 127.0.0.1) is listed as it is: every node of such a cluster is on this
// machine, and the service proxy DNATs pod traffic to it, which the
// kernel routes to the local API server because the proxy sets
// route_localnet (docs/concepts.md, in-cluster config). Kubernetes refuses
// loopback endpoints; skiff allows them for this one Service.
type KubernetesServiceController struct {
	client    client.Interface
	services  Lister // *api.Service
	endpoints Lister // *api.Endpoints
	slices    Lister // *api.EndpointSlice, or nil
	cfg       KubernetesServiceConfig
	log       *slog.Logger
}

// KubernetesServiceConfig says what the kubernetes Service looks like.
type KubernetesServiceConfig struct {
	// ClusterIP is the first address of the service range (10.96.0.1).
	ClusterIP string
	// Servers returns the API servers' addresses now, "IP:port" each;
	// the port of the first is the Service's targetPort.
	Servers func() []string
}

const kubernetesServiceControllerName = "kubernetes-service-controller"

// KubernetesServiceKey is the one key the controller reconciles.
const KubernetesServiceKey = "default/kubernetes"

// NewKubernetesServiceController returns the controller over caches of
// services, endpoints and (nil when the kind is not served) endpoint slices.
func NewKubernetesServiceController(c client.Interface, services, endpoints, slices Lister, cfg KubernetesServiceConfig, log *slog.Logger) *KubernetesServiceController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &KubernetesServiceController{client: c, services: services, endpoints: endpoints, slices: slices, cfg: cfg, log: log.With("controller", kubernetesServiceControllerName)}
}

// Handler enqueues the key when one of the three objects changes.
func (k *KubernetesServiceController) Handler(enqueue func(key string)) client.Handler {
	f := func(o api.Object) {
		if m := o.GetObjectMeta(); m.Namespace == "default" && m.Name == "kubernetes" {
			enqueue(KubernetesServiceKey)
		}
	}
	return client.Handler{OnAdd: f, OnUpdate: func(_, o api.Object) { f(o) }, OnDelete: f}
}

// desired returns the Service, the Endpoints subsets and the servers'
// addresses and port.
func (k *KubernetesServiceController) desired() (*api.Service, []api.EndpointSubset, []string, int32) {
	var ips []string
	var port int32
	for _, s := range k.cfg.Servers() {
		ap, err := netip.ParseAddrPort(s)
		if err != nil || ap.Addr().IsUnspecified() {
			k.log.Warn("an API server address is not IP:port; left out of the kubernetes endpoints", "address", s)
			continue
		}
		if port == 0 {
			port = int32(ap.Port())
		}
		if ip := ap.Addr().Unmap().String(); !slices.Contains(ips, ip) {
			ips = append(ips, ip)
		}
	}
	slices.Sort(ips)
	svc := &api.Service{
		ObjectMeta: api.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: api.ServiceSpec{
			Type: api.ServiceTypeClusterIP, ClusterIP: k.cfg.ClusterIP, ClusterIPs: []string{k.cfg.ClusterIP}, SessionAffinity: "None",
			Ports: []api.ServicePort{{Name: "https", Protocol: api.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(port)}},
		},
	}
	var subsets []api.EndpointSubset
	if len(ips) > 0 {
		ss := api.EndpointSubset{Ports: []api.EndpointPort{{Name: "https", Port: port, Protocol: api.ProtocolTCP}}}
		for _, ip := range ips {
			ss.Addresses = append(ss.Addresses, api.EndpointAddress{IP: ip})
		}
		subsets = []api.EndpointSubset{ss}
	}
	return svc, subsets, ips, port
}

// Reconcile writes what of the Service, Endpoints and EndpointSlice differs.
func (k *KubernetesServiceController) Reconcile(ctx context.Context, key string) error {
	if key != KubernetesServiceKey {
		return nil
	}
	want, subsets, ips, port := k.desired()
	if port == 0 {
		return nil // no address to serve at (yet)
	}
	var did []string
	cur, ok := getAs[*api.Service](k.services, "default", "kubernetes")
	switch {
	case !ok:
		if _, err := k.client.Create(ctx, want); err != nil && !api.IsAlreadyExists(err) {
			return fmt.Errorf("create service default/kubernetes: %w", err)
		}
		did = append(did, "created the service")
	case !reflect.DeepEqual(cur.Spec.Ports, want.Spec.Ports) || !maps.Equal(cur.Labels, want.Labels):
		u := api.Clone(cur)
		u.Spec.Ports, u.Labels = want.Spec.Ports, want.Labels
		if _, err := k.client.Update(ctx, u); err != nil {
			return requeueOnConflict(k.log, key, fmt.Errorf("update service default/kubernetes: %w", err))
		}
		did = append(did, "updated the service's port")
	}
	if ok && cur.Spec.ClusterIP != want.Spec.ClusterIP {
		k.log.Warn("the kubernetes service has another cluster IP than the first of the range; delete it to have it made again", "clusterIP", cur.Spec.ClusterIP, "want", want.Spec.ClusterIP)
	}

	ep, ok := getAs[*api.Endpoints](k.endpoints, "default", "kubernetes")
	switch {
	case !ok:
		e := &api.Endpoints{ObjectMeta: api.ObjectMeta{Name: "kubernetes", Namespace: "default", Labels: map[string]string{"endpointslice.kubernetes.io/skip-mirror": "true"}}, Subsets: subsets}
		if _, err := k.client.Create(ctx, e); err != nil && !api.IsAlreadyExists(err) {
			return fmt.Errorf("create endpoints default/kubernetes: %w", err)
		}
		did = append(did, "created the endpoints")
	case !reflect.DeepEqual(normalizeSubsets(ep.Subsets), normalizeSubsets(subsets)):
		u := api.Clone(ep)
		u.Subsets = subsets
		if _, err := k.client.Update(ctx, u); err != nil {
			return requeueOnConflict(k.log, key, fmt.Errorf("update endpoints default/kubernetes: %w", err))
		}
		did = append(did, "updated the endpoints")
	}
	if k.slices != nil {
		if err := k.reconcileSlice(ctx, ips, port, &did); err != nil {
			return err
		}
	}
	action := "none"
	if len(did) > 0 {
		action = fmt.Sprint(did)
	}
	logReconcile(k.log, len(did) > 0, key, fmt.Sprintf("API servers %v", ips), "the kubernetes service and its endpoints", action)
	return nil
}

func (k *KubernetesServiceController) reconcileSlice(ctx context.Context, ips []string, port int32, did *[]string) error {
	ready := true
	name, proto := "https", api.ProtocolTCP
	want := &api.EndpointSlice{
		ObjectMeta:  api.ObjectMeta{Name: "kubernetes", Namespace: "default", Labels: map[string]string{api.LabelServiceName: "kubernetes"}},
		AddressType: api.AddressTypeIPv4,
		Ports:       []api.EndpointSlicePort{{Name: &name, Protocol: &proto, Port: &port}},
	}
	for _, ip := range ips {
		want.Endpoints = append(want.Endpoints, api.Endpoint{Addresses: []string{ip}, Conditions: api.EndpointConditions{Ready: &ready}})
	}
	cur, ok := getAs[*api.EndpointSlice](k.slices, "default", "kubernetes")
	switch {
	case !ok:
		if _, err := k.client.Create(ctx, want); err != nil && !api.IsAlreadyExists(err) {
			return fmt.Errorf("create endpointslice default/kubernetes: %w", err)
		}
		*did = append(*did, "created the endpointslice")
	case !reflect.DeepEqual(cur.Endpoints, want.Endpoints) || !reflect.DeepEqual(cur.Ports, want.Ports):
		u := api.Clone(cur)
		u.Endpoints, u.Ports = want.Endpoints, want.Ports
		if _, err := k.client.Update(ctx, u); err != nil {
			return requeueOnConflict(k.log, "default/kubernetes", fmt.Errorf("update endpointslice default/kubernetes: %w", err))
		}
		*did = append(*did, "updated the endpointslice")
	}
	return nil
}
