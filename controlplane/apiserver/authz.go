package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/fields"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/apiserver/authz"
	"skiff.dev/skiff/pki"
)

// Authorization: who may do what, decided as kube-apiserver with
// --authorization-mode=Node,RBAC decides it, from the user and the request
// (authorizer.Attributes):
//
//   - system:masters (the admin token, the API server's own client
//     certificate) may do everything, before anything is asked;
//   - the Node authorizer: a node (system:node:NAME in system:nodes) may do
//     what Kubernetes' Node authorizer and NodeRestriction admission let a
//     kubelet do: its own Node and its status, its Lease in
//     kube-node-lease, the ResourceSlices of its own devices, the
//     ResourceClaims of its pods (and, for its DRA driver, list and watch
//     of all claims), the pods bound to it (read, status, delete, evict),
//     storage as its local-path provisioner needs (authz_storage.go),
//     events, reading nodes, services, endpoints and endpointslices,
//     getting the secrets, configmaps and serviceaccounts its own pods use
//     (and their tokens), reading the ConfigMaps of kube-system and
//     gpu-operator (the GPU sharing and MIG configs). What it does not
//     allow, it has no opinion on;
//   - RBAC (authz/): the Roles, ClusterRoles and their bindings, the
//     default ones (authz/bootstrap.go: discovery, /openapi, /version and
//     the self reviews for everyone authenticated; admin, edit, view ...)
//     and those the cluster's users made.
//
// Anything no one allows is 403 in Kubernetes' words.

// NodeLeaseNamespace holds the nodes' heartbeat Leases, one per node.
const NodeLeaseNamespace = "kube-node-lease"

// attributes are what a request asks, as Kubernetes' authorizer.Attributes.
type attributes struct {
	user User
	// verb: get list watch create update patch delete deletecollection for
	// a resource request; the lowercased HTTP method for a path.
	verb string
	// resourceRequest: an API resource (the fields below); otherwise path.
	resourceRequest bool
	group, version  string
	resource, sub   string
	namespace, name string
	// fieldSelector of a list or watch (a node may list only its own pods).
	fieldSelector string
	path          string
}

// requestAttributes says what r asks, from the same parse the handlers
// use (parseRequest, nodeProxyPath). A path that is not an API resource
// the server knows is a non-resource request.
func requestAttributes(r *http.Request, u User) attributes {
	a := attributes{user: u, verb: strings.ToLower(r.Method), path: r.URL.Path}
	if vp, ok := parseVisibilityPath(r.URL.Path); ok { // visibility.go
		return vp.attributes(a, r.Method)
	}
	ri := requestInfo{verb: a.verb}
	if name, _, ok := nodeProxyPath(r.URL.Path); ok {
		ri.kind, ri.name, ri.sub = nodeKind, name, "proxy"
		ri.verb = methodVerb(r.Method)
	} else if parseRequest(r, &ri) != nil {
		return shapeAttributes(a, r)
	}
	a.verb = ri.verb
	a.group, a.version, a.resource = ri.kind.Group, ri.kind.Version, ri.kind.Resource
	a.namespace, a.name, a.sub = ri.namespace, ri.name, ri.sub
	if a.verb == "list" || a.verb == "watch" {
		a.fieldSelector = queryGet(r, "fieldSelector")
	}
	return resourceAttributes(a)
}

// resourceAttributes ends a resource request's attributes as Kubernetes'
// RequestInfo: a DELETE of no name deletes a collection, and a namespace
// is in itself.
func resourceAttributes(a attributes) attributes {
	a.resourceRequest = true
	if a.verb == "delete" && a.name == "" {
		a.verb = "deletecollection"
	}
	if a.resource == "namespaces" && a.namespace == "" {
		a.namespace = a.name
	}
	return a
}

// shapeAttributes reads a path under /api/VERSION or /apis/GROUP/VERSION
// that names no resource this server serves by its shape alone, as
// Kubernetes' RequestInfoFactory: a resource request (RBAC then refuses
// it, 403, unless a rule covers it; the handler answers 404 after), not a
// path under /apis/* that discovery's rule would let everyone get. The
// discovery documents themselves (/api, /api/v1, /apis/GROUP/VERSION)
// stay non-resource requests.
func shapeAttributes(a attributes, r *http.Request) attributes {
	var buf [8]string
	group, version, parts, ok := apiPath(r.URL.Path, &buf) // handlers.go
	if !ok {
		return a
	}
	a.group, a.version = group, version
	if parts[0] == "namespaces" && len(parts) >= 3 {
		a.namespace, parts = parts[1], parts[2:]
	}
	a.resource = parts[0]
	if len(parts) > 1 {
		a.name = parts[1]
	}
	if len(parts) > 2 {
		a.sub = parts[2]
	}
	a.verb = resourceVerb(r, a.name)
	return resourceAttributes(a)
}

// authorize decides a. allowed false with a nil error is a refusal,
// reason (maybe "") saying why; an error means the decision could not be
// made (a store lookup failed, the RBAC cache is not filled yet when ctx
// ends).
func (s *Server) authorize(ctx context.Context, a attributes) (allowed bool, reason string, err error) {
	u := a.user
	if u.InGroup(pki.MastersGroup) {
		return true, "", nil
	}
	var reasons []string
	if node, ok := nodeOf(u); ok {
		allowed, reason, err := s.authorizeNode(ctx, node, a)
		if err != nil || allowed {
			return allowed, reason, err
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	if s.cfg.Authorization == AuthorizationAlwaysAllow {
		return u.InGroup(AuthenticatedGroup), "", nil // benchmarks only (config.go)
	}
	ix, err := s.rbac.index(ctx) // rbac.go
	if err != nil {
		return false, "", err
	}
	ok, reason := ix.Authorize(a.authz())
	if ok {
		return true, reason, nil
	}
	if reason != "" {
		reasons = append(reasons, reason)
	}
	return false, strings.Join(reasons, "\n"), nil
}

// authz is a as the RBAC authorizer takes it.
func (a attributes) authz() authz.Attributes {
	return authz.Attributes{User: authz.User{Name: a.user.Name, Groups: a.user.Groups}, Verb: a.verb,
		ResourceRequest: a.resourceRequest, APIGroup: a.group, Resource: a.resource, Subresource: a.sub,
		Namespace: a.namespace, Name: a.name, Path: a.path}
}

// nodeOf returns the node name of a node's user: system:node:NAME in
// system:nodes, as Kubernetes' NodeIdentifier requires both.
func nodeOf(u User) (string, bool) {
	name, ok := strings.CutPrefix(u.Name, pki.NodeUserPrefix)
	if !ok || name == "" || !u.InGroup(pki.NodesGroup) {
		return "", false
	}
	return name, true
}

// serviceAccountOf splits system:serviceaccount:NS:NAME.
func serviceAccountOf(u User) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(u.Name, ServiceAccountUserPrefix)
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	if !ok || namespace == "" || name == "" || strings.Contains(name, ":") {
		return "", "", false
	}
	return namespace, name, true
}

// authorizeNode is Kubernetes' Node authorizer (with the
// AuthorizeNodeWithSelectors rules of 1.32) for the resources skiff
// serves; the reasons are its words.
func (s *Server) authorizeNode(ctx context.Context, node string, a attributes) (bool, string, error) {
	verb := a.verb
	read := verb == "get" || verb == "list" || verb == "watch"
	switch a.group + "/" + a.resource {
	case "/nodes":
		switch a.sub {
		case "":
			if read {
				return true, "", nil
			}
			// The name of a create is in the body: NodeRestriction
			// (nodeRestriction, at admission) checks it.
			if (verb == "create" && a.name == "") || (slices.Contains([]string{"update", "patch", "delete"}, verb) && a.name == node) {
				return true, "", nil
			}
			return false, fmt.Sprintf("node %q is not allowed to modify node %q", node, a.name), nil
		case "status":
			if (verb == "get" || verb == "update" || verb == "patch") && a.name == node {
				return true, "", nil
			}
			return false, fmt.Sprintf("node %q is not allowed to modify node %q", node, a.name), nil
		}
		return false, "", nil // nodes/proxy: masters only
	case "/pods":
		return s.authorizeNodePod(ctx, node, a)
	case "/events", "events.k8s.io/events":
		return a.sub == "" && (verb == "create" || verb == "update" || verb == "patch"), "", nil
	case "/services", "/endpoints", "discovery.k8s.io/endpointslices":
		return a.sub == "" && read, "", nil
	case "coordination.k8s.io/leases":
		switch {
		case !slices.Contains([]string{"get", "create", "update", "patch", "delete"}, verb):
			return false, "can only get, create, update, patch, or delete a node lease", nil
		case a.namespace != NodeLeaseNamespace:
			return false, fmt.Sprintf("can only access leases in the %q system namespace", NodeLeaseNamespace), nil
		case verb != "create" && a.name != node:
			// The name of a create is in the body: nodeRestriction checks it.
			return false, "can only access node lease with the same name as the requesting node", nil
		}
		return true, "", nil
	case "resource.k8s.io/resourceslices":
		return s.authorizeNodeSlice(ctx, node, a)
	case "/persistentvolumeclaims", "/persistentvolumes":
		return s.authorizeNodeStorage(ctx, node, a) // authz_storage.go
	case "resource.k8s.io/resourceclaims":
		// Beyond the Node authorizer (which lets a kubelet get its pods'
		// claims): skiff's in-process GPU driver runs with the node's
		// credentials, and a DRA driver lists and watches claims (NVIDIA's
		// chart grants its service account that), to hold the GPUs the
		// scheduler allocated before their pods arrive. Read only.
		if a.sub == "" && (verb == "list" || verb == "watch") {
			return true, "", nil
		}
		if verb != "get" || a.name == "" {
			return false, "can only get individual resources of this type", nil
		}
		if a.sub != "" {
			return false, "cannot get subresource", nil
		}
		return s.nodeUses(ctx, node, a)
	case "/secrets", "/configmaps", "/serviceaccounts":
		if a.resource == "configmaps" && gpuConfigNamespace(a.namespace) && a.sub == "" && read {
			// Beyond the Node authorizer: skiff's in-process NVIDIA
			// device plugin and MIG manager read their configs (the GPU
			// operator grants its service account the same).
			return true, "", nil
		}
		if a.resource == "serviceaccounts" && a.sub == "token" {
			if verb != "create" || a.name == "" {
				return false, "can only create tokens for individual service accounts", nil
			}
		} else {
			if verb != "get" || a.name == "" {
				return false, "can only get individual resources of this type", nil
			}
			if a.sub != "" {
				return false, "cannot get subresource", nil
			}
		}
		return s.nodeUses(ctx, node, a)
	}
	return false, "", nil
}

// gpuConfigNamespace: the namespaces of the GPU stack's ConfigMaps
// (the device plugin's sharing configs, mig-parted's), which a node reads.
func gpuConfigNamespace(ns string) bool {
	return ns == api.NVIDIAConfigNamespace || ns == "gpu-operator"
}

// authorizeNodePod: a node reads, updates the status of, deletes, evicts
// and adds trace spans to the pods bound to it; it lists and watches pods only with the
// field selector spec.nodeName=NODE.
func (s *Server) authorizeNodePod(ctx context.Context, node string, a attributes) (bool, string, error) {
	switch {
	case a.verb == "list" || a.verb == "watch":
		if a.sub == "" && selectsNode(a.fieldSelector, node) {
			return true, "", nil
		}
		return false, "can only list/watch pods with spec.nodeName field selector", nil
	case a.name == "":
		return false, "", nil
	case a.sub == "" && (a.verb == "get" || a.verb == "delete"),
		a.sub == "status" && (a.verb == "get" || a.verb == "update" || a.verb == "patch"),
		a.sub == "" && (a.verb == "update" || a.verb == "patch"), // HAMi's bind phase only: nodeRestrictUpdate
		a.sub == "eviction" && a.verb == "create",
		a.sub == "trace" && a.verb == "create": // skiff's pod traces: the agent adds its spans
	default:
		return false, "", nil
	}
	o, err := s.reg.Get(ctx, podKind, a.namespace, a.name)
	if api.IsNotFound(err) {
		return false, noRelationship(node), nil
	}
	if err != nil {
		return false, "", fmt.Errorf("authorize node %s: %w", node, err)
	}
	if o.(*api.Pod).Spec.NodeName != node {
		return false, noRelationship(node), nil
	}
	return true, "", nil
}

// authorizeNodeSlice is the Node authorizer's rule for ResourceSlices (DRA):
// a node's drivers publish the slices of its own devices. A create is
// allowed here and checked by nodeRestriction (the name is in the body);
// get, update, patch and delete need an existing slice with
// spec.nodeName=NODE; list and watch need that field selector.
func (s *Server) authorizeNodeSlice(ctx context.Context, node string, a attributes) (bool, string, error) {
	if a.sub != "" {
		return false, "cannot authorize ResourceSlice subresources", nil
	}
	switch a.verb {
	case "create":
		return true, "", nil
	case "list", "watch", "deletecollection":
		if selectsField(a.fieldSelector, "spec.nodeName", node) {
			return true, "", nil
		}
		return false, "can only list/watch/deleteCollection resourceslices with nodeName field selector", nil
	case "get", "update", "patch", "delete":
		if a.name == "" {
			return false, noRelationship(node), nil
		}
		o, err := s.reg.Get(ctx, resourceSliceKind, "", a.name)
		if api.IsNotFound(err) {
			return false, noRelationship(node), nil
		}
		if err != nil {
			return false, "", fmt.Errorf("authorize node %s: %w", node, err)
		}
		if n := o.(*api.ResourceSlice).Spec.NodeName; n == nil || *n != node {
			return false, noRelationship(node), nil
		}
		return true, "", nil
	}
	return false, fmt.Sprintf("Node %q is not allowed to %q ResourceSlices", node, a.verb), nil
}

var resourceSliceKind = api.MustKindOf(&api.ResourceSlice{})

// selectsNode reports whether a field selector requires spec.nodeName=node.
func selectsNode(selector, node string) bool { return selectsField(selector, "spec.nodeName", node) }

// selectsField reports whether a field selector requires field=value.
func selectsField(selector, field, value string) bool {
	sel, err := fields.ParseSelector(selector)
	if err != nil {
		return false
	}
	v, ok := sel.RequiresExactMatch(field)
	return ok && v == value
}

// nodeUses answers a node's get of a secret, configmap or serviceaccount
// (or a serviceaccount token's create): allowed when a pod bound to the
// node in that namespace uses it. One list of the namespace's pods on the
// node: agents ask when they start a pod, not per request of the pod.
func (s *Server) nodeUses(ctx context.Context, node string, a attributes) (bool, string, error) {
	pods, _, err := s.reg.List(ctx, podKind, a.namespace, api.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return false, "", fmt.Errorf("authorize node %s: %w", node, err)
	}
	for _, o := range pods {
		if podUses(o.(*api.Pod), a.resource, a.name) {
			return true, "", nil
		}
	}
	return false, noRelationship(node), nil
}

// podUses reports whether pod refers to the object: a secret or configmap
// in a volume (projected ones included: the API access volume's
// kube-root-ca.crt) or the environment, or its service account.
func podUses(pod *api.Pod, resource, name string) bool {
	if resource == "serviceaccounts" {
		return api.ServiceAccountNameOf(&pod.Spec) == name
	}
	if resource == "resourceclaims" {
		for i := range pod.Spec.ResourceClaims {
			if n, ok := api.ClaimName(pod, &pod.Spec.ResourceClaims[i]); ok && n == name {
				return true
			}
		}
		return false
	}
	for _, v := range pod.Spec.Volumes {
		if resource == "secrets" && v.Secret != nil && v.Secret.SecretName == name ||
			resource == "configmaps" && v.ConfigMap != nil && v.ConfigMap.Name == name {
			return true
		}
		if v.Projected != nil && resource == "configmaps" {
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil && src.ConfigMap.Name == name {
					return true
				}
			}
		}
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		for _, e := range c.EnvFrom {
			if resource == "secrets" && e.SecretRef != nil && e.SecretRef.Name == name ||
				resource == "configmaps" && e.ConfigMapRef != nil && e.ConfigMapRef.Name == name {
				return true
			}
		}
		for _, e := range c.Env {
			if f := e.ValueFrom; f != nil && (resource == "secrets" && f.SecretKeyRef != nil && f.SecretKeyRef.Name == name ||
				resource == "configmaps" && f.ConfigMapKeyRef != nil && f.ConfigMapKeyRef.Name == name) {
				return true
			}
		}
	}
	return false
}

func noRelationship(node string) string {
	return fmt.Sprintf("no relationship found between node '%s' and this object", node)
}

// nodeRestriction is Kubernetes' NodeRestriction admission for creates,
// whose object name the authorizer could not see: a node creates only its
// own Node and its own Lease. Requests without a user (in-process
// callers) and other users pass.
func nodeRestriction(ctx context.Context, k *api.Kind, obj api.Object) error {
	u, ok := UserFrom(ctx)
	if !ok {
		return nil
	}
	node, ok := nodeOf(u)
	if !ok {
		return nil
	}
	name := obj.GetObjectMeta().Name
	switch {
	case k == nodeKind && name != node:
		return forbidden(k, name, fmt.Sprintf("node %q is not allowed to modify node %q", node, name))
	case k.Group == "coordination.k8s.io" && k.Resource == "leases" && name != node:
		return forbidden(k, name, "can only access node lease with the same name as the requesting node")
	case k == resourceSliceKind:
		if n := obj.(*api.ResourceSlice).Spec.NodeName; n == nil || *n != node {
			return forbidden(k, name, "can only create ResourceSlice with the same NodeName as the requesting node")
		}
	case k == persistentVolumeKind:
		return nodeRestrictVolume(obj.(*api.PersistentVolume), node) // authz_storage.go
	}
	return nil
}

// nodeRestrictUpdate: a node's update of one of its pods (its HAMi device
// plugin's, which HAMi's service account may patch) changes nothing but
// the annotation hami.io/bind-phase. Other users and kinds pass.
func nodeRestrictUpdate(ctx context.Context, k *api.Kind, next, cur api.Object) error {
	u, ok := UserFrom(ctx)
	if !ok || k != podKind {
		return nil
	}
	node, ok := nodeOf(u)
	if !ok {
		return nil
	}
	a, b := api.Clone(next).(*api.Pod), api.Clone(cur).(*api.Pod)
	delete(a.Annotations, api.HAMiBindPhase)
	delete(b.Annotations, api.HAMiBindPhase)
	if len(a.Annotations) == 0 {
		a.Annotations = nil
	}
	if len(b.Annotations) == 0 {
		b.Annotations = nil
	}
	a.ResourceVersion, a.ManagedFields, a.Generation = b.ResourceVersion, b.ManagedFields, b.Generation
	if !reflect.DeepEqual(a.ObjectMeta, b.ObjectMeta) || !reflect.DeepEqual(a.Spec, b.Spec) {
		return forbidden(k, a.Name, fmt.Sprintf("node %q may only change the annotation %s of its pods", node, api.HAMiBindPhase))
	}
	return nil
}

// forbiddenError is the 403 of a refused request, word for word as
// kube-apiserver's responsewriters.Forbidden and apierrors.NewForbidden:
//
//	pods is forbidden: User "system:serviceaccount:a:default" cannot list resource "pods" in API group "" in the namespace "b"
func forbiddenError(a attributes, reason string) *api.StatusError {
	var msg string
	switch {
	case !a.resourceRequest:
		msg = fmt.Sprintf("User %q cannot %s path %q", a.user.Name, a.verb, a.path)
	default:
		res := a.resource
		if a.sub != "" {
			res += "/" + a.sub
		}
		if a.namespace != "" {
			msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", a.user.Name, a.verb, res, a.group, a.namespace)
		} else {
			msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", a.user.Name, a.verb, res, a.group)
		}
	}
	if reason != "" {
		msg += ": " + reason
	}
	gr := a.resource
	if a.group != "" && gr != "" {
		gr += "." + a.group
	}
	switch {
	case gr == "":
		msg = "forbidden: " + msg
	case a.name == "":
		msg = gr + " is forbidden: " + msg
	default:
		msg = fmt.Sprintf("%s %q is forbidden: %s", gr, a.name, msg)
	}
	e := api.NewStatusError(http.StatusForbidden, api.ReasonForbidden, msg)
	e.Status.Details = &api.StatusDetails{Name: a.name, Group: a.group, Kind: a.resource}
	return e
}

// checkAuthorized authorizes r and answers 403 (or 500 when the decision
// failed) when it is refused; it reports whether to go on.
func (s *Server) checkAuthorized(w http.ResponseWriter, r *http.Request) bool {
	u, _ := UserFrom(r.Context())
	a := requestAttributes(r, u)
	ok, reason, err := s.authorize(r.Context(), a)
	if ok {
		return true
	}
	if err != nil {
		s.log.Warn("authorization failed", "user", u.Name, "path", r.URL.Path, "err", err)
		writeError(w, api.NewStatusError(http.StatusInternalServerError, api.ReasonInternal, "Internal error occurred: "+err.Error()))
		return false
	}
	s.log.Debug("forbidden", "user", u.Name, "verb", a.verb, "path", r.URL.Path, "reason", reason)
	writeError(w, forbiddenError(a, reason))
	return false
}
