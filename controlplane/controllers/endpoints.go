package controllers

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The endpoints controller keeps, for every Service with a selector, an
// Endpoints object of the same name that lists the pods behind it: the
// service proxy on each node reads Endpoints, never pods. One reconcile
// of namespace/name:
//
//  1. No Service: delete the Endpoints of that name (if any).
//  2. A Service without a selector: nothing (its Endpoints are the
//     user's to write, as in Kubernetes).
//  3. Otherwise list the pods of the namespace that match the selector,
//     drop those being deleted, finished (Succeeded, Failed) or without
//     an IP yet, resolve each service port's targetPort for each pod (a
//     number, or a container port name looked up in that pod: two pods
//     may resolve a name differently), and group the pods by the ports
//     they resolved to: one subset per distinct port list. Ready pods go
//     in addresses, the others in notReadyAddresses (the proxy sends
//     traffic only to addresses).
//  4. Write the Endpoints if they differ from what is stored.
//
// The result is sorted (subsets by ports, addresses by IP), so the same
// pods always give the same object and a resync writes nothing.
type EndpointsController struct {
	client    client.Interface
	services  Lister // *api.Service
	pods      Lister // *api.Pod
	endpoints Lister // *api.Endpoints
	log       *slog.Logger
}

const endpointsControllerName = "endpoints-controller"

func serviceKind() *api.Kind   { return api.MustKindOf(&api.Service{}) }
func endpointsKind() *api.Kind { return api.MustKindOf(&api.Endpoints{}) }

// NewEndpointsController returns the controller over caches of all
// services, pods and endpoints.
func NewEndpointsController(c client.Interface, services, pods, endpoints Lister, log *slog.Logger) *EndpointsController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	indexLabels(pods) // the selector's pods: ListBy
	return &EndpointsController{
		client:    c,
		services:  services,
		pods:      pods,
		endpoints: endpoints,
		log:       log.With("controller", endpointsControllerName),
	}
}

// PodHandler enqueues the services whose selector matches a pod that
// changed (before or after the change: a pod whose labels moved away must
// leave the old service's endpoints).
func (e *EndpointsController) PodHandler(enqueue func(key string)) client.Handler {
	return servicesOfPodHandler(e.services, enqueue)
}

// servicesOfPodHandler enqueues the services (from the cache services)
// whose selector matches a pod before or after its change; the endpoints
// and endpointslice controllers share it.
func servicesOfPodHandler(services Lister, enqueue func(key string)) client.Handler {
	forPod := func(objs ...api.Object) {
		seen := map[string]bool{}
		for _, o := range objs {
			p, ok := o.(*api.Pod)
			if !ok {
				continue
			}
			for _, so := range services.ListBy(nil, p.Namespace) {
				s, ok := so.(*api.Service)
				if !ok || len(s.Spec.Selector) == 0 {
					continue
				}
				k := api.KeyOf(s)
				if !seen[k] && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.Labels)) {
					seen[k] = true
					enqueue(k)
				}
			}
		}
	}
	return client.Handler{
		OnAdd:    func(o api.Object) { forPod(o) },
		OnUpdate: func(old, o api.Object) { forPod(old, o) },
		OnDelete: func(o api.Object) { forPod(o) },
	}
}

// EndpointsHandler enqueues the service of an Endpoints object that
// changed, so that edits or deletions by others are repaired.
func (e *EndpointsController) EndpointsHandler(enqueue func(key string)) client.Handler {
	f := func(o api.Object) { enqueue(api.KeyOf(o)) }
	return client.Handler{OnAdd: f, OnUpdate: func(_, o api.Object) { f(o) }, OnDelete: f}
}

// Reconcile makes the Endpoints of service key (namespace/name) match the
// pods its selector chooses. Safe to repeat.
func (e *EndpointsController) Reconcile(ctx context.Context, key string) error {
	namespace, name, _ := strings.Cut(key, "/")
	svc, ok := getAs[*api.Service](e.services, namespace, name)
	if !ok {
		if _, ok := e.endpoints.Get(namespace, name); !ok {
			return nil
		}
		err := e.client.Delete(ctx, endpointsKind(), namespace, name, api.DeleteOptions{})
		if err != nil && !api.IsNotFound(err) {
			return fmt.Errorf("delete endpoints %s: %w", key, err)
		}
		logReconcile(e.log, true, key, "service gone", "no endpoints", "deleted the endpoints")
		return nil
	}
	if len(svc.Spec.Selector) == 0 {
		return nil
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	pods := listAs[*api.Pod](e.pods.ListBy(sel, namespace))
	subsets := endpointSubsets(svc, pods)

	old, exists := getAs[*api.Endpoints](e.endpoints, namespace, name)
	if exists && reflect.DeepEqual(normalizeSubsets(old.Subsets), subsets) && maps.Equal(old.Labels, svc.Labels) {
		logReconcile(e.log, false, key, "endpoints up to date", "endpoints of the ready pods", "none")
		return nil
	}
	var err error
	if exists {
		u := api.Clone(old)
		u.Subsets = subsets
		u.Labels = maps.Clone(svc.Labels)
		_, err = e.client.Update(ctx, u)
	} else {
		ep := &api.Endpoints{Subsets: subsets}
		ep.Name, ep.Namespace, ep.Labels = name, namespace, maps.Clone(svc.Labels)
		_, err = e.client.Create(ctx, ep)
		if api.IsAlreadyExists(err) {
			return client.RequeueAfter(conflictRetry) // the cache has not shown it yet
		}
	}
	if err != nil {
		return requeueOnConflict(e.log, key, fmt.Errorf("write endpoints %s: %w", key, err))
	}
	ready, notReady := countAddresses(subsets)
	logReconcile(e.log, true, key, "endpoints out of date", "endpoints of the ready pods", fmt.Sprintf("wrote %d ready, %d not ready", ready, notReady))
	return nil
}

// endpointSubsets computes the sorted subsets of svc over pods.
func endpointSubsets(svc *api.Service, pods []*api.Pod) []api.EndpointSubset {
	byPorts := map[string]*api.EndpointSubset{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == api.PodSucceeded || p.Status.Phase == api.PodFailed || p.Status.PodIP == "" {
			continue
		}
		ports := resolvePorts(svc, p)
		if len(ports) == 0 {
			continue
		}
		k := portsKey(ports)
		ss, ok := byPorts[k]
		if !ok {
			ss = &api.EndpointSubset{Ports: ports}
			byPorts[k] = ss
		}
		addr := api.EndpointAddress{
			IP: p.Status.PodIP,
			TargetRef: &api.ObjectReference{
				Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID,
			},
		}
		if p.Spec.NodeName != "" {
			addr.NodeName = new(p.Spec.NodeName)
		}
		// Kubernetes' ShouldSetHostname: the pod names itself under
		// this headless Service (HOST.SVC.NS.svc.cluster.local).
		if p.Spec.Hostname != "" && p.Spec.Subdomain == svc.Name && svc.Namespace == p.Namespace {
			addr.Hostname = p.Spec.Hostname
		}
		if isPodReady(p) {
			ss.Addresses = append(ss.Addresses, addr)
		} else {
			ss.NotReadyAddresses = append(ss.NotReadyAddresses, addr)
		}
	}
	var out []api.EndpointSubset
	for _, k := range slices.Sorted(maps.Keys(byPorts)) {
		out = append(out, *byPorts[k])
	}
	return normalizeSubsets(out)
}

// resolvePorts resolves the service's ports against one pod's containers;
// a port whose targetPort names a port the pod lacks is left out.
func resolvePorts(svc *api.Service, p *api.Pod) []api.EndpointPort {
	var out []api.EndpointPort
	for _, sp := range svc.Spec.Ports {
		proto := cmp.Or(sp.Protocol, "TCP")
		var port int32
		switch {
		case sp.TargetPort.Type == intstr.String && sp.TargetPort.StrVal != "":
			port = containerPortByName(p, sp.TargetPort.StrVal, proto)
		case sp.TargetPort.Type == intstr.Int && sp.TargetPort.IntVal != 0:
			port = sp.TargetPort.IntVal
		default:
			port = sp.Port
		}
		if port == 0 {
			continue
		}
		out = append(out, api.EndpointPort{Name: sp.Name, Port: port, Protocol: proto})
	}
	return out
}

// containerPortByName finds the named port in p's containers; 0 if none.
func containerPortByName(p *api.Pod, name, proto string) int32 {
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == name && cmp.Or(cp.Protocol, "TCP") == proto {
				return cp.ContainerPort
			}
		}
	}
	return 0
}

func portsKey(ports []api.EndpointPort) string {
	var b strings.Builder
	for _, p := range ports {
		b.WriteString(p.Name + "/" + p.Protocol + "/" + strconv.Itoa(int(p.Port)) + ",")
	}
	return b.String()
}

// normalizeSubsets returns a copy of subsets with addresses sorted by IP
// and empty lists as nil, for comparison.
func normalizeSubsets(subsets []api.EndpointSubset) []api.EndpointSubset {
	if len(subsets) == 0 {
		return nil
	}
	byIP := func(a, b api.EndpointAddress) int { return cmp.Compare(a.IP, b.IP) }
	out := make([]api.EndpointSubset, len(subsets))
	for i, s := range subsets {
		s.Addresses = slices.Clone(s.Addresses)
		s.NotReadyAddresses = slices.Clone(s.NotReadyAddresses)
		slices.SortFunc(s.Addresses, byIP)
		slices.SortFunc(s.NotReadyAddresses, byIP)
		if len(s.Addresses) == 0 {
			s.Addresses = nil
		}
		if len(s.NotReadyAddresses) == 0 {
			s.NotReadyAddresses = nil
		}
		if len(s.Ports) == 0 {
			s.Ports = nil
		}
		out[i] = s
	}
	return out
}

func countAddresses(subsets []api.EndpointSubset) (ready, notReady int) {
	for _, s := range subsets {
		ready += len(s.Addresses)
		notReady += len(s.NotReadyAddresses)
	}
	return ready, notReady
}

// serviceKeys are the keys a resync of the endpoints controller visits:
// every service, and every endpoints object (whose service may be gone).
func serviceKeys(services, endpoints *client.Informer) func() []string {
	return func() []string {
		keys := services.Keys()
		seen := map[string]bool{}
		for _, k := range keys {
			seen[k] = true
		}
		for _, k := range endpoints.Keys() {
			if !seen[k] {
				keys = append(keys, k)
			}
		}
		return keys
	}
}
