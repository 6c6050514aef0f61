package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/kueue/queueorder"
)

// Kueue's on-demand visibility API (visibility.kueue.x-k8s.io, served in
// Kueue by its own aggregated API server), here inside the API server:
//
//	GET /apis/visibility.kueue.x-k8s.io/{v1beta2,v1beta1}/clusterqueues/CQ/pendingworkloads
//	GET /apis/visibility.kueue.x-k8s.io/{v1beta2,v1beta1}/namespaces/NS/localqueues/LQ/pendingworkloads
//
// answered with a PendingWorkloadsSummary whose items are the pending
// workloads in the order the queue manager's cycle takes them
// (queueorder.PendingInOrder, read from the store at the request), each with
// its metadata (name, namespace, ownerReferences, creationTimestamp),
// priority, localQueueName, positionInClusterQueue and
// positionInLocalQueue, counted from 0. ?offset= and ?limit= (default
// 1000; negative values count as 0) page through them as Kueue's
// pendingWorkloadsInCqREST and pendingWorkloadsInLqREST do. An unknown
// ClusterQueue or LocalQueue is 404 in Kueue's words
// (clusterqueue.visibility.kueue.x-k8s.io "x" not found).
//
// Authorization is by resource, as Kueue's RBAC roles grant it
// (clusterqueues/pendingworkloads cluster-wide, localqueues/pendingworkloads
// in a namespace): a service account may read its own namespace's
// LocalQueues, the cluster-wide view needs system:masters.

const (
	visibilityGroup  = "visibility.kueue.x-k8s.io"
	visibilityPrefix = "/apis/" + visibilityGroup
	// defaultPendingWorkloadsLimit is Kueue's constants.DefaultPendingWorkloadsLimit.
	defaultPendingWorkloadsLimit = 1000
)

// visibilityVersions are the versions served, preferred first (Kueue 0.19
// serves both with the same shape).
var visibilityVersions = []string{"v1beta2", "v1beta1"}

// visibilityAPIGroup is the group as /apis lists it (discovery.go).
func visibilityAPIGroup() apiGroup {
	g := apiGroup{Name: visibilityGroup}
	for _, v := range visibilityVersions {
		g.Versions = append(g.Versions, groupVersion{GroupVersion: visibilityGroup + "/" + v, Version: v})
	}
	g.PreferredVersion = g.Versions[0]
	return g
}

// visibilityPath is a parsed path under /apis/visibility.kueue.x-k8s.io.
type visibilityPath struct {
	version, namespace, resource, name, sub string
}

// parseVisibilityPath reads the path of a pendingworkloads request (ok
// false for any other path, the group and version documents included).
func parseVisibilityPath(p string) (visibilityPath, bool) {
	rest, ok := strings.CutPrefix(p, visibilityPrefix+"/")
	if !ok {
		return visibilityPath{}, false
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	var vp visibilityPath
	switch {
	case len(parts) == 4 && parts[1] == "clusterqueues":
		vp = visibilityPath{version: parts[0], resource: parts[1], name: parts[2], sub: parts[3]}
	case len(parts) == 6 && parts[1] == "namespaces" && parts[3] == "localqueues":
		vp = visibilityPath{version: parts[0], namespace: parts[2], resource: parts[3], name: parts[4], sub: parts[5]}
	default:
		return visibilityPath{}, false
	}
	return vp, vp.sub == "pendingworkloads" && vp.name != "" && (vp.namespace != "" || vp.resource == "clusterqueues")
}

// pendingWorkload is Kueue's visibility PendingWorkload.
type pendingWorkload struct {
	Metadata               pendingWorkloadMeta `json:"metadata"`
	Priority               int32               `json:"priority"`
	LocalQueueName         string              `json:"localQueueName"`
	PositionInClusterQueue int32               `json:"positionInClusterQueue"`
	PositionInLocalQueue   int32               `json:"positionInLocalQueue"`
}

type pendingWorkloadMeta struct {
	Name              string               `json:"name"`
	Namespace         string               `json:"namespace"`
	OwnerReferences   []api.OwnerReference `json:"ownerReferences,omitempty"`
	CreationTimestamp api.Time             `json:"creationTimestamp"`
}

// pendingWorkloadsSummary is Kueue's PendingWorkloadsSummary.
type pendingWorkloadsSummary struct {
	api.TypeMeta `json:",inline"`
	Metadata     struct {
		CreationTimestamp *api.Time `json:"creationTimestamp"`
	} `json:"metadata"`
	Items []pendingWorkload `json:"items"`
}

// serveVisibilityAPI answers the paths under /apis/visibility.kueue.x-k8s.io;
// it reports false for any other path.
func (s *Server) serveVisibilityAPI(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != visibilityPrefix && !strings.HasPrefix(r.URL.Path, visibilityPrefix+"/") {
		return false
	}
	if r.Method != http.MethodGet {
		writeError(w, api.NewStatusError(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowd,
			"the server does not allow this method on the requested resource"))
		return true
	}
	parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, visibilityPrefix), "/"), "/")
	switch {
	case len(parts) == 1 && parts[0] == "":
		writeAPIGroup(w, visibilityAPIGroup())
		return true
	case !slices.Contains(visibilityVersions, parts[0]):
		writeError(w, notFoundPath())
		return true
	case len(parts) == 1:
		writeJSON(w, http.StatusOK, visibilityResourceList(parts[0]))
		return true
	}
	vp, ok := parseVisibilityPath(r.URL.Path)
	if !ok {
		writeError(w, notFoundPath())
		return true
	}
	limit, offset, err := pendingWorkloadOptions(r)
	if err != nil {
		writeError(w, err)
		return true
	}
	// Positions count every queued workload: read as the server (the
	// request was authorized for its queue's pending workloads).
	pending, err := queueorder.ListPending(WithoutUser(r.Context()), s.Local(), "")
	if err != nil {
		writeError(w, err)
		return true
	}
	items, err := s.pendingItems(r, vp, pending, limit, offset)
	if err != nil {
		writeError(w, err)
		return true
	}
	out := pendingWorkloadsSummary{TypeMeta: api.TypeMeta{APIVersion: visibilityGroup + "/" + vp.version, Kind: "PendingWorkloadsSummary"}, Items: items}
	writeJSON(w, http.StatusOK, out)
	return true
}

// visibilityResourceList is the group version's APIResourceList, as
// Kueue's visibility server installs it: clusterqueues and localqueues
// (no verbs of their own) and their pendingworkloads subresources.
func visibilityResourceList(version string) map[string]any {
	none := []string{}
	return map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": visibilityGroup + "/" + version,
		"resources": []apiResource{
			{Name: "clusterqueues", SingularName: "clusterqueue", Namespaced: false, Kind: "PendingWorkloadsSummary", Verbs: none},
			{Name: "clusterqueues/pendingworkloads", Namespaced: false, Kind: "PendingWorkloadsSummary", Verbs: []string{"get"}},
			{Name: "localqueues", SingularName: "localqueue", Namespaced: true, Kind: "PendingWorkloadsSummary", Verbs: none},
			{Name: "localqueues/pendingworkloads", Namespaced: true, Kind: "PendingWorkloadsSummary", Verbs: []string{"get"}},
		}}
}

// pendingWorkloadOptions reads ?limit= and ?offset= (Kueue's
// PendingWorkloadOptions, bounded as its boundedLimitOffset).
func pendingWorkloadOptions(r *http.Request) (limit, offset int64, err error) {
	q := r.URL.Query()
	for name, dst := range map[string]*int64{"limit": &limit, "offset": &offset} {
		if v := q.Get(name); v != "" {
			n, perr := strconv.ParseInt(v, 10, 64)
			if perr != nil {
				return 0, 0, api.NewBadRequest(fmt.Sprintf("%s %q: must be an integer", name, v))
			}
			*dst = n
		}
	}
	if limit == 0 {
		limit = defaultPendingWorkloadsLimit // Kueue's SetDefaults_PendingWorkloadOptions
	}
	return max(limit, 0), max(offset, 0), nil
}

var (
	localQueueKind   = api.MustKindOf(&api.LocalQueue{})
	clusterQueueKind = api.MustKindOf(&api.ClusterQueue{})
	// for the error messages only (clusterqueue.visibility.kueue.x-k8s.io "x" not found)
	visibilityCQKind = &api.Kind{Kind: "PendingWorkloadsSummary", Group: visibilityGroup, Version: "v1beta2", Resource: "clusterqueue"}
	visibilityLQKind = &api.Kind{Kind: "PendingWorkloadsSummary", Group: visibilityGroup, Version: "v1beta2", Resource: "localqueue"}
)

// pendingItems selects the page of the ClusterQueue's or LocalQueue's
// pending workloads, as Kueue: in a ClusterQueue, positions in the
// LocalQueue are counted from the start of the list; in a LocalQueue, from
// the offset.
func (s *Server) pendingItems(r *http.Request, vp visibilityPath, pending []queueorder.Pending, limit, offset int64) ([]pendingWorkload, error) {
	ctx := r.Context()
	cq := vp.name
	if vp.resource == "localqueues" {
		lq, err := s.reg.Get(ctx, localQueueKind, vp.namespace, vp.name)
		if api.IsNotFound(err) {
			return nil, api.NewNotFound(visibilityLQKind, vp.name)
		}
		if err != nil {
			return nil, err
		}
		cq = lq.(*api.LocalQueue).Spec.ClusterQueue
	} else if _, err := s.reg.Get(ctx, clusterQueueKind, "", cq); api.IsNotFound(err) {
		return nil, api.NewNotFound(visibilityCQKind, cq)
	} else if err != nil {
		return nil, err
	}
	items := []pendingWorkload{}
	var index int64
	for _, p := range pending {
		if p.Position.ClusterQueue != cq {
			continue
		}
		if vp.resource == "localqueues" && (p.Workload.Namespace != vp.namespace || p.Workload.Spec.QueueName != vp.name) {
			continue
		}
		if index >= offset && int64(len(items)) < limit {
			items = append(items, newPendingWorkload(p))
		}
		index++
	}
	return items, nil
}

func newPendingWorkload(p queueorder.Pending) pendingWorkload {
	wl := p.Workload
	var refs []api.OwnerReference
	for _, ref := range wl.OwnerReferences {
		refs = append(refs, api.OwnerReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID})
	}
	prio := int32(0)
	if wl.Spec.Priority != nil {
		prio = *wl.Spec.Priority
	}
	return pendingWorkload{
		Metadata:       pendingWorkloadMeta{Name: wl.Name, Namespace: wl.Namespace, OwnerReferences: refs, CreationTimestamp: wl.CreationTimestamp},
		Priority:       prio,
		LocalQueueName: wl.Spec.QueueName, PositionInClusterQueue: p.Position.InClusterQueue, PositionInLocalQueue: p.Position.InLocalQueue,
	}
}

// attributes are what a pendingworkloads request asks (authz.go): the
// subresource of a visibility resource, as Kueue's RBAC names it.
func (vp visibilityPath) attributes(a attributes, method string) attributes {
	a.resourceRequest = true
	a.verb = methodVerb(method)
	a.group, a.version, a.resource, a.sub = visibilityGroup, vp.version, vp.resource, vp.sub
	a.namespace, a.name = vp.namespace, vp.name
	return a
}
