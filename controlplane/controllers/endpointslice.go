package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The endpointslice controller keeps, for every Service with a selector,
// the EndpointSlices (discovery.k8s.io/v1) that list the pods behind it,
// as Kubernetes' endpointslice controller: the same pods as the Endpoints
// object (endpoints.go) in the shape real clusters read today
// (`kubectl describe svc` prints its Endpoints line from the slices).
// One reconcile of namespace/name:
//
//  1. No Service: delete the slices labelled kubernetes.io/service-name=NAME
//     and endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io.
//  2. A Service without a selector: nothing (its slices are the user's).
//  3. Otherwise: the pods of the namespace that match the selector, less
//     the finished (Succeeded, Failed) and those without an IP yet, become
//     endpoints with their conditions (ready: ready and not terminating;
//     serving: ready; terminating: being deleted: unlike Endpoints, a
//     slice keeps terminating pods, marked). The ports are resolved per pod
//     as for Endpoints; pods are grouped by address type and resolved ports,
//     and each group is cut in slices of at most 100 endpoints. No pod at
//     all gives one empty slice, as Kubernetes keeps a placeholder.
//  4. The desired slices are paired with the stored ones (both sorted) and
//     only differences are written: updates in place, creations with
//     generateName NAME- (Kubernetes' NAME-xxxxx), deletions of the rest.
//
// Slices carry the Service's labels plus the two above, and a controller
// owner reference to the Service.
//
// Because new slices get random names, a reconcile that ran before the
// cache showed its own last writes would create them twice; the
// controller remembers what it wrote per service and waits (requeues)
// until the cache has caught up, as Kubernetes' endpointSliceTracker does.
type EndpointSliceController struct {
	client   client.Interface
	services Lister // *api.Service
	pods     Lister // *api.Pod
	slices   Lister // *api.EndpointSlice
	log      *slog.Logger

	mu sync.Mutex
	// written: per service key, the slices this controller wrote that the
	// cache must show before the next reconcile of that service acts:
	// name → resourceVersion written, or "" for a deletion.
	written map[string]map[string]string
}

const endpointSliceControllerName = "endpointslice-controller"

// maxEndpointsPerSlice is Kubernetes' default --max-endpoints-per-slice.
const maxEndpointsPerSlice = 100

func endpointSliceKind() *api.Kind { return api.MustKindOf(&api.EndpointSlice{}) }

// NewEndpointSliceController returns the controller over caches of all
// services, pods and endpoint slices.
func NewEndpointSliceController(c client.Interface, services, pods, slices Lister, log *slog.Logger) *EndpointSliceController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	indexLabels(pods) // the selector's pods: ListBy
	return &EndpointSliceController{
		client: c, services: services, pods: pods, slices: slices,
		log:     log.With("controller", endpointSliceControllerName),
		written: map[string]map[string]string{},
	}
}

// PodHandler enqueues the services whose selector matches a pod that
// changed (before or after the change).
func (e *EndpointSliceController) PodHandler(enqueue func(key string)) client.Handler {
	return servicesOfPodHandler(e.services, enqueue)
}

// SliceHandler enqueues the service of a managed slice that changed, so
// that edits or deletions by others are repaired.
func (e *EndpointSliceController) SliceHandler(enqueue func(key string)) client.Handler {
	f := func(o api.Object) {
		if k, ok := sliceServiceKey(o); ok {
			enqueue(k)
		}
	}
	return client.Handler{OnAdd: f, OnUpdate: func(_, o api.Object) { f(o) }, OnDelete: f}
}

// sliceServiceKey is the namespace/name of the service of a slice this
// controller manages.
func sliceServiceKey(o api.Object) (string, bool) {
	m := o.GetObjectMeta()
	svc := m.Labels[api.LabelServiceName]
	if svc == "" || m.Labels[api.LabelManagedBy] != api.EndpointSliceControllerName {
		return "", false
	}
	return api.Key(m.Namespace, svc), true
}

// Reconcile makes the slices of service key match the pods its selector
// chooses. Safe to repeat.
func (e *EndpointSliceController) Reconcile(ctx context.Context, key string) error {
	namespace, name, _ := strings.Cut(key, "/")
	sel := labels.SelectorFromSet(labels.Set{api.LabelServiceName: name, api.LabelManagedBy: api.EndpointSliceControllerName})
	existing := listAs[*api.EndpointSlice](e.slices.ListBy(sel, namespace))
	if !e.cacheCaughtUp(key, existing) {
		return client.RequeueAfter(conflictRetry)
	}
	slices.SortFunc(existing, func(a, b *api.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })

	svc, ok := getAs[*api.Service](e.services, namespace, name)
	var desired []*api.EndpointSlice
	switch {
	case !ok:
		// Deleted: no slices (step 1).
	case len(svc.Spec.Selector) == 0:
		return nil
	default:
		pods := listAs[*api.Pod](e.pods.ListBy(labels.SelectorFromSet(svc.Spec.Selector), namespace))
		desired = desiredSlices(svc, pods)
	}

	var errs []error
	written := map[string]string{}
	created, updated, deleted := 0, 0, 0
	for i, want := range desired {
		if i < len(existing) {
			old := existing[i]
			if sliceEqual(old, want) {
				continue
			}
			u := api.Clone(old)
			u.Labels, u.OwnerReferences = want.Labels, want.OwnerReferences
			u.AddressType, u.Endpoints, u.Ports = want.AddressType, want.Endpoints, want.Ports
			if u.AddressType != old.AddressType {
				// addressType is immutable: replace the slice.
				errs = append(errs, e.deleteSlice(ctx, old, written))
				deleted++
				errs = append(errs, e.createSlice(ctx, want, written))
				created++
				continue
			}
			out, err := e.client.Update(ctx, u)
			if err != nil {
				errs = append(errs, fmt.Errorf("update endpointslice %s: %w", api.KeyOf(old), err))
				continue
			}
			written[out.GetObjectMeta().Name] = out.GetObjectMeta().ResourceVersion
			updated++
			continue
		}
		errs = append(errs, e.createSlice(ctx, want, written))
		created++
	}
	for _, old := range existing[min(len(desired), len(existing)):] {
		errs = append(errs, e.deleteSlice(ctx, old, written))
		deleted++
	}
	e.remember(key, written)
	if err := errors.Join(errs...); err != nil {
		return requeueOnConflict(e.log, key, err)
	}
	if created+updated+deleted == 0 {
		logReconcile(e.log, false, key, "endpoint slices up to date", "slices of the service's pods", "none")
		return nil
	}
	ready, all := 0, 0
	for _, s := range desired {
		for _, ep := range s.Endpoints {
			all++
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				ready++
			}
		}
	}
	logReconcile(e.log, true, key, fmt.Sprintf("%s stored", plural(len(existing), "slice")),
		fmt.Sprintf("%s, %d of %d endpoints ready", plural(len(desired), "slice"), ready, all),
		fmt.Sprintf("created %d, updated %d, deleted %d", created, updated, deleted))
	return nil
}

func (e *EndpointSliceController) createSlice(ctx context.Context, s *api.EndpointSlice, written map[string]string) error {
	out, err := e.client.Create(ctx, s)
	if err != nil {
		return fmt.Errorf("create endpointslice for service %s/%s: %w", s.Namespace, s.Labels[api.LabelServiceName], err)
	}
	written[out.GetObjectMeta().Name] = out.GetObjectMeta().ResourceVersion
	return nil
}

func (e *EndpointSliceController) deleteSlice(ctx context.Context, s *api.EndpointSlice, written map[string]string) error {
	err := e.client.Delete(ctx, endpointSliceKind(), s.Namespace, s.Name, api.DeleteOptions{})
	if err != nil && !api.IsNotFound(err) {
		return fmt.Errorf("delete endpointslice %s: %w", api.KeyOf(s), err)
	}
	written[s.Name] = ""
	return nil
}

// remember records the writes of a reconcile of key; cacheCaughtUp
// checks them against the cache next time.
func (e *EndpointSliceController) remember(key string, written map[string]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(written) == 0 {
		delete(e.written, key)
		return
	}
	e.written[key] = written
}

// cacheCaughtUp reports whether the cached slices of key show every write
// of the previous reconcile (created or updated at that resourceVersion or
// later, deleted gone); once they do, the record is dropped.
func (e *EndpointSliceController) cacheCaughtUp(key string, cached []*api.EndpointSlice) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	w, ok := e.written[key]
	if !ok {
		return true
	}
	have := map[string]string{}
	for _, s := range cached {
		have[s.Name] = s.ResourceVersion
	}
	for name, rv := range w {
		got, present := have[name]
		switch {
		case rv == "" && present:
			return false
		case rv != "" && (!present || !rvAtLeast(got, rv)):
			return false
		}
	}
	delete(e.written, key)
	return true
}

// rvAtLeast compares two resourceVersions (store revisions, decimal).
func rvAtLeast(got, want string) bool {
	g, err1 := strconv.ParseUint(got, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	if err1 != nil || err2 != nil {
		return got == want
	}
	return g >= w
}

// desiredSlices computes the slices of svc over pods, sorted, with no
// name (the pairing with stored slices gives them theirs).
func desiredSlices(svc *api.Service, pods []*api.Pod) []*api.EndpointSlice {
	type group struct {
		addressType string
		ports       []api.EndpointPort
		endpoints   []api.Endpoint
	}
	groups := map[string]*group{}
	for _, p := range pods {
		if p.Status.Phase == api.PodSucceeded || p.Status.Phase == api.PodFailed || p.Status.PodIP == "" {
			continue
		}
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil {
			continue
		}
		ports := resolvePorts(svc, p)
		if len(ports) == 0 && len(svc.Spec.Ports) > 0 {
			continue // none of the service's ports resolves on this pod
		}
		at := api.AddressTypeIPv4
		if !ip.Is4() {
			at = api.AddressTypeIPv6
		}
		k := at + "|" + portsKey(ports)
		g, ok := groups[k]
		if !ok {
			g = &group{addressType: at, ports: ports}
			groups[k] = g
		}
		ready := isPodReady(p)
		terminating := p.DeletionTimestamp != nil
		ep := api.Endpoint{
			Addresses: []string{ip.String()},
			Conditions: api.EndpointConditions{
				Ready: new(ready && !terminating), Serving: new(ready), Terminating: new(terminating),
			},
			TargetRef: &api.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		}
		if p.Spec.NodeName != "" {
			ep.NodeName = new(p.Spec.NodeName)
		}
		g.endpoints = append(g.endpoints, ep)
	}
	base := func() *api.EndpointSlice {
		s := &api.EndpointSlice{}
		s.Namespace = svc.Namespace
		s.GenerateName = sliceNamePrefix(svc.Name)
		s.Labels = maps.Clone(svc.Labels)
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[api.LabelServiceName] = svc.Name
		s.Labels[api.LabelManagedBy] = api.EndpointSliceControllerName
		s.OwnerReferences = []api.OwnerReference{controllerRef(svc)}
		return s
	}
	var out []*api.EndpointSlice
	for _, k := range slices.Sorted(maps.Keys(groups)) {
		g := groups[k]
		slices.SortFunc(g.endpoints, func(a, b api.Endpoint) int { return cmp.Compare(a.Addresses[0], b.Addresses[0]) })
		for chunk := range slices.Chunk(g.endpoints, maxEndpointsPerSlice) {
			s := base()
			s.AddressType = g.addressType
			s.Endpoints = chunk
			s.Ports = slicePorts(g.ports)
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		// Kubernetes keeps one empty slice for a service with no endpoints.
		s := base()
		s.AddressType = api.AddressTypeIPv4
		out = append(out, s)
	}
	return out
}

// sliceNamePrefix is the generateName of a service's slices: NAME-, cut
// so that the generated name (5 more characters) fits 63, as Kubernetes.
func sliceNamePrefix(service string) string {
	const maxPrefix = 63 - 5
	p := service + "-"
	if len(p) > maxPrefix {
		p = p[:maxPrefix]
	}
	return p
}

func slicePorts(ports []api.EndpointPort) []api.EndpointSlicePort {
	var out []api.EndpointSlicePort
	for _, p := range ports {
		out = append(out, api.EndpointSlicePort{Name: new(p.Name), Protocol: new(p.Protocol), Port: new(p.Port)})
	}
	return out
}

// sliceEqual compares what the controller owns in a slice.
func sliceEqual(stored, want *api.EndpointSlice) bool {
	norm := func(s *api.EndpointSlice) *api.EndpointSlice {
		c := api.Clone(s)
		api.SetDefaults(c)
		if len(c.Endpoints) == 0 {
			c.Endpoints = nil
		}
		if len(c.Ports) == 0 {
			c.Ports = nil
		}
		return c
	}
	a, b := norm(stored), norm(want)
	return a.AddressType == b.AddressType &&
		maps.Equal(a.Labels, b.Labels) &&
		reflect.DeepEqual(a.Endpoints, b.Endpoints) &&
		reflect.DeepEqual(a.Ports, b.Ports) &&
		len(a.OwnerReferences) == 1 && len(b.OwnerReferences) == 1 && a.OwnerReferences[0].UID == b.OwnerReferences[0].UID
}

// sliceServiceKeys are the keys a resync of the endpointslice controller
// visits: every service, and the service of every managed slice (which
// may be gone).
func sliceServiceKeys(services, sl *client.Informer) func() []string {
	return func() []string {
		keys := services.Keys()
		seen := map[string]bool{}
		for _, k := range keys {
			seen[k] = true
		}
		for _, o := range sl.ListBy(nil, "") {
			if k, ok := sliceServiceKey(o); ok && !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		return keys
	}
}
