package apiserver

import (
	"net/http"
	"slices"
)

// Discovery documents, shaped like Kubernetes' (APIVersions, APIGroupList,
// APIGroup, APIResourceList), built from api.Kinds.

type groupVersion struct {
	GroupVersion string `json:"groupVersion"`
	Version      string `json:"version"`
}

type apiGroup struct {
	Name             string         `json:"name"`
	Versions         []groupVersion `json:"versions"`
	PreferredVersion groupVersion   `json:"preferredVersion"`
}

type apiResource struct {
	Name         string   `json:"name"`
	SingularName string   `json:"singularName"`
	Namespaced   bool     `json:"namespaced"`
	Group        string   `json:"group,omitempty"`
	Version      string   `json:"version,omitempty"`
	Kind         string   `json:"kind"`
	Verbs        []string `json:"verbs"`
	ShortNames   []string `json:"shortNames,omitempty"`
	// Categories: "all" puts the resource in `kubectl get all` (api.Kind.Categories).
	Categories []string `json:"categories,omitempty"`
}

// serveDiscovery answers /api, /api/v1, /apis, /apis/GROUP and
// /apis/GROUP/VERSION; it reports false for any other path.
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	var buf [8]string
	parts := pathSegments(r.URL.Path, &buf)
	switch {
	case len(parts) == 1 && parts[0] == "api":
		writeJSON(w, http.StatusOK, map[string]any{"kind": "APIVersions", "apiVersion": "v1", "versions": []string{"v1"}})
	case len(parts) == 2 && parts[0] == "api" && parts[1] == "v1":
		writeJSON(w, http.StatusOK, resourceList("", "v1"))
	case len(parts) == 1 && parts[0] == "apis":
		writeJSON(w, http.StatusOK, map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": groups()})
	case len(parts) == 2 && parts[0] == "apis":
		for _, g := range groups() {
			if g.Name == parts[1] {
				writeAPIGroup(w, g)
				return true
			}
		}
		return false
	case len(parts) == 3 && parts[0] == "apis":
		rl := resourceList(parts[1], parts[2])
		if len(rl["resources"].([]apiResource)) == 0 {
			return false
		}
		writeJSON(w, http.StatusOK, rl)
	default:
		return false
	}
	return true
}

// writeAPIGroup answers g's APIGroup document (/apis/GROUP).
func writeAPIGroup(w http.ResponseWriter, g apiGroup) {
	writeJSON(w, http.StatusOK, map[string]any{"kind": "APIGroup", "apiVersion": "v1", "name": g.Name, "versions": g.Versions, "preferredVersion": g.PreferredVersion})
}

func groups() []apiGroup {
	var out []apiGroup
	for _, k := range servedKinds {
		if k.Group == "" || slices.ContainsFunc(out, func(g apiGroup) bool { return g.Name == k.Group }) {
			continue
		}
		gv := groupVersion{GroupVersion: k.APIVersion(), Version: k.Version}
		g := apiGroup{Name: k.Group, Versions: []groupVersion{gv}, PreferredVersion: gv}
		for _, other := range servedKinds { // further served versions (versions.go), after the stored one
			for i := range other.Served {
				if v := other.Served[i].Version; other.Group == k.Group && !slices.ContainsFunc(g.Versions, func(x groupVersion) bool { return x.Version == v }) {
					g.Versions = append(g.Versions, groupVersion{GroupVersion: other.APIVersionOf(&other.Served[i]), Version: v})
				}
			}
		}
		out = append(out, g)
	}
	return append(out, metricsAPIGroup(), customMetricsAPIGroup(), externalMetricsAPIGroup(), visibilityAPIGroup()) // metrics_api.go, custom_metrics.go, visibility.go
}

func resourceList(group, version string) map[string]any {
	rw := []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	res := []apiResource{}
	for _, k := range servedKinds {
		if _, served := k.ServedAt(version); k.Group != group || !served {
			continue
		}
		r := apiResource{Name: k.Resource, SingularName: k.Singular, Namespaced: k.Namespaced, Kind: k.Kind, Verbs: rw, ShortNames: k.ShortNames, Categories: k.Categories}
		if k.Internal {
			r.Verbs = []string{"get", "list", "watch"}
		}
		if k.CreateOnly {
			r.Verbs, r.ShortNames = []string{"create"}, nil
		}
		res = append(res, r)
		sub := func(name, kind, gr, ver string, verbs ...string) {
			res = append(res, apiResource{Name: k.Resource + "/" + name, Namespaced: k.Namespaced, Group: gr, Version: ver, Kind: kind, Verbs: verbs})
		}
		if k.HasStatus {
			sub("status", k.Kind, "", "", "get", "patch", "update")
		}
		switch k {
		case podKind:
			sub("binding", "Binding", "", "", "create")
			sub("ephemeralcontainers", "Pod", "", "", "get", "patch", "update") // ephemeral.go
			sub("eviction", "Eviction", "policy", "v1", "create")               // eviction.go
			sub("attach", "PodAttachOptions", "", "", "create", "get")          // streaming: proxy.go
			sub("exec", "PodExecOptions", "", "", "create", "get")
			sub("log", "Pod", "", "", "get")
			sub("portforward", "PodPortForwardOptions", "", "", "create", "get")
			sub("trace", "PodTrace", "skiff.dev", "v1", "create", "get")
		case hpaKind: // the controller's last decisions (controllers/hpa.go)
			sub("trace", "PodTrace", "skiff.dev", "v1", "create", "get")
		case deploymentKind, replicaSetKind, statefulSetKind:
			sub("scale", "Scale", "autoscaling", "v1", "get", "patch", "update")
		case namespaceKind:
			sub("finalize", "Namespace", "", "", "update")
		case csrKind:
			sub("approval", "CertificateSigningRequest", "", "", "get", "patch", "update")
		}
	}
	gv := version
	if group != "" {
		gv = group + "/" + version
	}
	return map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": res}
}
