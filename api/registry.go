package api

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Kind describes one kind of object the API serves: its schema name, its
// REST resource and whether it lives in a namespace. The table Kinds is the
// single place a new kind is registered; the store, API server, client and
// CLI all work from it.
// +k8s:deepcopy-gen=false
type Kind struct {
	// Kind, e.g. "Deployment".
	Kind string
	// Group: "" for the core group, "apps", ...
	Group string
	// Version, e.g. "v1".
	Version string
	// Resource is the plural REST name: "deployments".
	Resource string
	// Singular: "deployment".
	Singular string
	// ShortNames as kubectl: "deploy".
	ShortNames []string
	// Namespaced kinds live in a namespace; Node and Namespace do not.
	Namespaced bool
	// HasStatus kinds have a status subresource: a plain update keeps
	// status, PUT .../status changes only status.
	HasStatus bool
	// HasScale kinds have the scale subresource (autoscaling/v1 Scale of
	// spec.replicas): `kubectl scale`.
	HasScale bool
	// Categories the kind belongs to in discovery: "all" makes it part of
	// `kubectl get all` (Kubernetes' all: pods, services, daemonsets,
	// deployments, replicasets, statefulsets, jobs, cronjobs,
	// replicationcontrollers, horizontalpodautoscalers).
	Categories []string
	// Internal kinds are not listed by `get all` and have no user verbs
	// beyond get (PodTrace, ServiceAllocation).
	Internal bool
	// CreateOnly kinds are answered, never stored: a client creates one
	// and reads the server's answer in its status (the review kinds,
	// ReviewKinds, which are not in Kinds).
	CreateOnly bool
	// Type is the Go struct type (not a pointer).
	Type reflect.Type
	// CustomResource kinds are served as Kubernetes serves a
	// CustomResourceDefinition's (Kueue's): no k8s.io/api struct, so no
	// strategic merge patch (kubectl sends merge patches).
	CustomResource bool
	// Served lists the versions the kind is served at besides Version
	// (the stored one), each with its conversions (versions.go).
	Served []ServedVersion
}

// APIVersion is "v1" or "apps/v1".
func (k *Kind) APIVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// GroupResource is "pods" or "deployments.apps", as kubectl prints it.
func (k *Kind) GroupResource() string { return resourceName(k) }

// GroupKind is "Pod" or "Deployment.apps".
func (k *Kind) GroupKind() string {
	if k.Group == "" {
		return k.Kind
	}
	return k.Kind + "." + k.Group
}

// New returns a new, empty object of this kind with its TypeMeta set.
func (k *Kind) New() Object {
	o := reflect.New(k.Type).Interface().(Object)
	*o.GetTypeMeta() = TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
	return o
}

// Kinds is the registry of every served kind.
var Kinds = []*Kind{
	{Kind: "Namespace", Version: "v1", Resource: "namespaces", Singular: "namespace", ShortNames: []string{"ns"}, HasStatus: true, Type: reflect.TypeFor[Namespace]()},
	{Kind: "ConfigMap", Version: "v1", Resource: "configmaps", Singular: "configmap", ShortNames: []string{"cm"}, Namespaced: true, Type: reflect.TypeFor[ConfigMap]()},
	{Kind: "Secret", Version: "v1", Resource: "secrets", Singular: "secret", Namespaced: true, Type: reflect.TypeFor[Secret]()},
	{Kind: "Pod", Version: "v1", Resource: "pods", Singular: "pod", ShortNames: []string{"po"}, Namespaced: true, HasStatus: true, Categories: []string{"all"}, Type: reflect.TypeFor[Pod]()},
	{Kind: "Service", Version: "v1", Resource: "services", Singular: "service", ShortNames: []string{"svc"}, Namespaced: true, HasStatus: true, Categories: []string{"all"}, Type: reflect.TypeFor[Service]()},
	{Kind: "Endpoints", Version: "v1", Resource: "endpoints", Singular: "endpoints", ShortNames: []string{"ep"}, Namespaced: true, Type: reflect.TypeFor[Endpoints]()},
	{Kind: "Node", Version: "v1", Resource: "nodes", Singular: "node", ShortNames: []string{"no"}, HasStatus: true, Type: reflect.TypeFor[Node]()},
	{Kind: "ServiceAccount", Version: "v1", Resource: "serviceaccounts", Singular: "serviceaccount", ShortNames: []string{"sa"}, Namespaced: true, Type: reflect.TypeFor[ServiceAccount]()},
	{Kind: "PersistentVolume", Version: "v1", Resource: "persistentvolumes", Singular: "persistentvolume", ShortNames: []string{"pv"}, HasStatus: true, Type: reflect.TypeFor[PersistentVolume]()},
	{Kind: "PersistentVolumeClaim", Version: "v1", Resource: "persistentvolumeclaims", Singular: "persistentvolumeclaim", ShortNames: []string{"pvc"}, Namespaced: true, HasStatus: true, Type: reflect.TypeFor[PersistentVolumeClaim]()},
	{Kind: "ResourceQuota", Version: "v1", Resource: "resourcequotas", Singular: "resourcequota", ShortNames: []string{"quota"}, Namespaced: true, HasStatus: true, Type: reflect.TypeFor[ResourceQuota]()},
	{Kind: "LimitRange", Version: "v1", Resource: "limitranges", Singular: "limitrange", ShortNames: []string{"limits"}, Namespaced: true, Type: reflect.TypeFor[LimitRange]()},
	{Kind: "Event", Version: "v1", Resource: "events", Singular: "event", ShortNames: []string{"ev"}, Namespaced: true, Type: reflect.TypeFor[Event]()},
	{Kind: "ControllerRevision", Group: "apps", Version: "v1", Resource: "controllerrevisions", Singular: "controllerrevision", Namespaced: true, Type: reflect.TypeFor[ControllerRevision]()},
	{Kind: "DaemonSet", Group: "apps", Version: "v1", Resource: "daemonsets", Singular: "daemonset", ShortNames: []string{"ds"}, Namespaced: true, HasStatus: true, Categories: []string{"all"}, Type: reflect.TypeFor[DaemonSet]()},
	{Kind: "Deployment", Group: "apps", Version: "v1", Resource: "deployments", Singular: "deployment", ShortNames: []string{"deploy"}, Namespaced: true, HasStatus: true, HasScale: true, Categories: []string{"all"}, Type: reflect.TypeFor[Deployment]()},
	{Kind: "ReplicaSet", Group: "apps", Version: "v1", Resource: "replicasets", Singular: "replicaset", ShortNames: []string{"rs"}, Namespaced: true, HasStatus: true, HasScale: true, Categories: []string{"all"}, Type: reflect.TypeFor[ReplicaSet]()},
	{Kind: "StatefulSet", Group: "apps", Version: "v1", Resource: "statefulsets", Singular: "statefulset", ShortNames: []string{"sts"}, Namespaced: true, HasStatus: true, HasScale: true, Categories: []string{"all"}, Type: reflect.TypeFor[StatefulSet]()},
	{Kind: "HorizontalPodAutoscaler", Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers", Singular: "horizontalpodautoscaler", ShortNames: []string{"hpa"}, Namespaced: true, HasStatus: true, Categories: []string{"all"}, Served: hpaServed(), Type: reflect.TypeFor[HorizontalPodAutoscaler]()},
	{Kind: "CronJob", Group: "batch", Version: "v1", Resource: "cronjobs", Singular: "cronjob", ShortNames: []string{"cj"}, Namespaced: true, HasStatus: true, Categories: []string{"all"}, Type: reflect.TypeFor[CronJob]()},
	{Kind: "Job", Group: "batch", Version: "v1", Resource: "jobs", Singular: "job", Namespaced: true, HasStatus: true, Categories: []string{"all"}, Type: reflect.TypeFor[Job]()},
	{Kind: "Lease", Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Singular: "lease", Namespaced: true, Type: reflect.TypeFor[Lease]()},
	{Kind: "EndpointSlice", Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices", Singular: "endpointslice", Namespaced: true, Type: reflect.TypeFor[EndpointSlice]()},
	{Kind: "PodDisruptionBudget", Group: "policy", Version: "v1", Resource: "poddisruptionbudgets", Singular: "poddisruptionbudget", ShortNames: []string{"pdb"}, Namespaced: true, HasStatus: true, Type: reflect.TypeFor[PodDisruptionBudget]()},
	{Kind: "PriorityClass", Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses", Singular: "priorityclass", ShortNames: []string{"pc"}, Type: reflect.TypeFor[PriorityClass]()},
	{Kind: "StorageClass", Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses", Singular: "storageclass", ShortNames: []string{"sc"}, Type: reflect.TypeFor[StorageClass]()},
	{Kind: "PodGroup", Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups", Singular: "podgroup", ShortNames: []string{"pg", "pgs"}, Namespaced: true, HasStatus: true, Type: reflect.TypeFor[PodGroup](), CustomResource: true},
	{Kind: "DeviceClass", Group: ResourceGroup, Version: "v1", Resource: "deviceclasses", Singular: "deviceclass", Served: resourceServed("DeviceClass"), Type: reflect.TypeFor[DeviceClass]()},
	{Kind: "ResourceClaim", Group: ResourceGroup, Version: "v1", Resource: "resourceclaims", Singular: "resourceclaim", Namespaced: true, HasStatus: true, Served: resourceServed("ResourceClaim"), Type: reflect.TypeFor[ResourceClaim]()},
	{Kind: "ResourceClaimTemplate", Group: ResourceGroup, Version: "v1", Resource: "resourceclaimtemplates", Singular: "resourceclaimtemplate", Namespaced: true, Served: resourceServed("ResourceClaimTemplate"), Type: reflect.TypeFor[ResourceClaimTemplate]()},
	{Kind: "ResourceSlice", Group: ResourceGroup, Version: "v1", Resource: "resourceslices", Singular: "resourceslice", Served: resourceServed("ResourceSlice"), Type: reflect.TypeFor[ResourceSlice]()},
	{Kind: "ResourceFlavor", Group: KueueGroup, Version: "v1beta2", Resource: "resourceflavors", Singular: "resourceflavor", ShortNames: []string{"flavor", "flavors", "rf"}, Type: reflect.TypeFor[ResourceFlavor](), CustomResource: true, Served: kueueV1beta1(nil, nil)},
	{Kind: "ClusterQueue", Group: KueueGroup, Version: "v1beta2", Resource: "clusterqueues", Singular: "clusterqueue", ShortNames: []string{"cq"}, HasStatus: true, Type: reflect.TypeFor[ClusterQueue](), CustomResource: true, Served: kueueV1beta1(clusterQueueToV1beta2, clusterQueueToV1beta1)},
	{Kind: "LocalQueue", Group: KueueGroup, Version: "v1beta2", Resource: "localqueues", Singular: "localqueue", ShortNames: []string{"queue", "queues", "lq"}, Namespaced: true, HasStatus: true, Type: reflect.TypeFor[LocalQueue](), CustomResource: true, Served: kueueV1beta1(localQueueToV1beta2, localQueueToV1beta1)},
	{Kind: "Workload", Group: KueueGroup, Version: "v1beta2", Resource: "workloads", Singular: "workload", ShortNames: []string{"kwl", "kueueworkload", "kueueworkloads"}, Namespaced: true, HasStatus: true, Type: reflect.TypeFor[Workload](), CustomResource: true, Served: kueueV1beta1(workloadToV1beta2, workloadToV1beta1)},
	{Kind: "Topology", Group: KueueGroup, Version: "v1beta2", Resource: "topologies", Singular: "topology", ShortNames: []string{"topo"}, Type: reflect.TypeFor[Topology](), CustomResource: true, Served: kueueV1beta1(nil, nil)},
	{Kind: "Role", Group: RBACGroup, Version: "v1", Resource: "roles", Singular: "role", Namespaced: true, Type: reflect.TypeFor[Role]()},
	{Kind: "ClusterRole", Group: RBACGroup, Version: "v1", Resource: "clusterroles", Singular: "clusterrole", Type: reflect.TypeFor[ClusterRole]()},
	{Kind: "RoleBinding", Group: RBACGroup, Version: "v1", Resource: "rolebindings", Singular: "rolebinding", Namespaced: true, Type: reflect.TypeFor[RoleBinding]()},
	{Kind: "ClusterRoleBinding", Group: RBACGroup, Version: "v1", Resource: "clusterrolebindings", Singular: "clusterrolebinding", Type: reflect.TypeFor[ClusterRoleBinding]()},
	{Kind: "CertificateSigningRequest", Group: CertificatesGroup, Version: "v1", Resource: "certificatesigningrequests", Singular: "certificatesigningrequest", ShortNames: []string{"csr"}, HasStatus: true, Type: reflect.TypeFor[CertificateSigningRequest]()},
	{Kind: "PodTrace", Group: "skiff.dev", Version: "v1", Resource: "podtraces", Singular: "podtrace", Namespaced: true, Internal: true, Type: reflect.TypeFor[PodTrace]()},
	{Kind: "ServiceAllocation", Group: "skiff.dev", Version: "v1", Resource: "serviceallocations", Singular: "serviceallocation", Internal: true, Type: reflect.TypeFor[ServiceAllocation]()},
}

// KindOf returns the registered kind of an object, by its Go type: one of
// Kinds, or of the create-only ReviewKinds.
func KindOf(o Object) (*Kind, error) {
	t := reflect.TypeOf(o)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for _, k := range Kinds {
		if k.Type == t {
			return k, nil
		}
	}
	for _, k := range ReviewKinds { // create only (authorization.go)
		if k.Type == t {
			return k, nil
		}
	}
	return nil, fmt.Errorf("no kind registered for Go type %v", t)
}

// MustKindOf is KindOf for objects known to be registered.
func MustKindOf(o Object) *Kind {
	k, err := KindOf(o)
	if err != nil {
		panic(err)
	}
	return k
}

// LookupKind finds a kind by apiVersion and kind, as in a YAML document.
func LookupKind(apiVersion, kind string) (*Kind, error) {
	var versions []string
	for _, k := range Kinds {
		if k.Kind == kind {
			if k.APIVersion() == apiVersion {
				return k, nil
			}
			if _, ok := k.servedByAPIVersion(apiVersion); ok {
				return k, nil // a further served version (versions.go)
			}
			versions = append(versions, k.APIVersion())
			for i := range k.Served {
				versions = append(versions, k.APIVersionOf(&k.Served[i]))
			}
		}
	}
	if len(versions) > 0 {
		return nil, fmt.Errorf("no matches for kind %q in version %q (skiff serves %s %s)", kind, apiVersion, kind, strings.Join(versions, ", "))
	}
	return nil, fmt.Errorf("no matches for kind %q in version %q", kind, apiVersion)
}

// LookupResource finds a kind by any name kubectl accepts: plural, singular,
// short name, Kind, or "resource.group" ("deployments.apps").
// Matching is case-insensitive.
func LookupResource(name string) (*Kind, error) {
	n := strings.ToLower(name)
	group := ""
	if i := strings.Index(n, "."); i >= 0 {
		n, group = n[:i], n[i+1:]
	}
	for _, k := range Kinds {
		if group != "" && k.Group != group {
			continue
		}
		if n == k.Resource || n == k.Singular || n == strings.ToLower(k.Kind) {
			return k, nil
		}
		for _, s := range k.ShortNames {
			if n == s {
				return k, nil
			}
		}
	}
	return nil, fmt.Errorf("the server doesn't have a resource type %q", name)
}

// KindForResource finds the kind served at a REST path's group and
// resource ("apps", "deployments"), among Kinds and ReviewKinds. With a
// version it must be served at that version (ServedAt: the stored one or
// one of Served); version "" is any. nil when none is.
func KindForResource(group, version, resource string) *Kind {
	for _, kinds := range [][]*Kind{Kinds, ReviewKinds} {
		for _, k := range kinds {
			if k.Group != group || k.Resource != resource {
				continue
			}
			if _, served := k.ServedAt(version); version == "" || served {
				return k
			}
		}
	}
	return nil
}

// ResourceNames lists every resource name, for completion and help.
func ResourceNames() []string {
	var out []string
	for _, k := range Kinds {
		if !k.Internal {
			out = append(out, k.Resource)
		}
	}
	sort.Strings(out)
	return out
}

// newLike returns a new zero object of the same type as o.
func newLike(o Object) Object {
	t := reflect.TypeOf(o)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return reflect.New(t).Interface().(Object)
}

// SetTypeMeta fills apiVersion and kind of o from the registry.
func SetTypeMeta(o Object) {
	if k, err := KindOf(o); err == nil {
		*o.GetTypeMeta() = TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
	}
}
