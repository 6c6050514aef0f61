package authz

import (
	"skiff.dev/skiff/api"
)

// The default roles and bindings: Kubernetes' bootstrap policy
// (plugin/pkg/auth/authorizer/rbac/bootstrappolicy, 1.33+: DRA claims in
// edit and view), the ClusterRole metrics-server ships for `kubectl top`,
// and Kueue's roles for batch users and administrators (its
// config/components/rbac, with the kueue- prefix its manifests add). The
// server reconciles them at every start (controlplane: missing rules and
// subjects are added, nothing removed; an object annotated
// rbac.authorization.kubernetes.io/autoupdate: "false" is left alone).
//
// Rules name resources skiff does not serve yet (statefulsets, cronjobs,
// persistentvolumeclaims ...) exactly as Kubernetes does: a rule grants
// nothing on what does not exist, and grants it the day it does.

var (
	write      = []string{"create", "update", "patch", "delete", "deletecollection"}
	readWrite  = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	read       = []string{"get", "list", "watch"}
	readWrite7 = []string{"create", "delete", "get", "list", "patch", "update", "watch"}
)

// Users and groups the default bindings name, as Kubernetes spells them.
const (
	MastersGroup          = "system:masters"
	AuthenticatedGroup    = "system:authenticated"
	UnauthenticatedGroup  = "system:unauthenticated"
	ServiceAccountsGroup  = "system:serviceaccounts"
	MonitoringGroup       = "system:monitoring"
	KubeScheduler         = "system:kube-scheduler"
	KubeControllerManager = "system:kube-controller-manager"
	KubeProxy             = "system:kube-proxy"
)

// rule builds a PolicyRule: verbs, then groups and resources.
func rule(verbs []string, groups []string, resources ...string) api.PolicyRule {
	return api.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources}
}

func urls(verbs []string, paths ...string) api.PolicyRule {
	return api.PolicyRule{Verbs: verbs, NonResourceURLs: paths}
}

func g(groups ...string) []string { return groups }

func v(verbs ...string) []string { return verbs }

const (
	core    = ""
	apps    = "apps"
	batch   = "batch"
	authn   = "authentication.k8s.io"
	authzG  = "authorization.k8s.io"
	autosc  = "autoscaling"
	ext     = "extensions"
	policyG = "policy"
	netG    = "networking.k8s.io"
	discG   = "discovery.k8s.io"
	coordG  = "coordination.k8s.io"
	storeG  = "storage.k8s.io"
	certG   = "certificates.k8s.io"
	resG    = "resource.k8s.io"
	eventsG = "events.k8s.io"
	kueueG  = "kueue.x-k8s.io"
	visG    = "visibility.kueue.x-k8s.io"
)

func eventsRule() api.PolicyRule {
	return rule(v("create", "update", "patch"), g(core, eventsG), "events")
}

// named is a ClusterRole named name with labels and rules.
func named(name string, labels map[string]string, rules ...api.PolicyRule) *api.ClusterRole {
	return &api.ClusterRole{ObjectMeta: api.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
}

// aggregated is a ClusterRole whose rules are those of the ClusterRoles
// labelled selector=true.
func aggregated(name string, labels map[string]string, selector string) *api.ClusterRole {
	return &api.ClusterRole{ObjectMeta: api.ObjectMeta{Name: name, Labels: labels},
		AggregationRule: &api.AggregationRule{ClusterRoleSelectors: []api.LabelSelector{{MatchLabels: map[string]string{selector: "true"}}}}}
}

func labelled(keys ...string) map[string]string {
	m := map[string]string{}
	for _, k := range keys {
		m[k] = "true"
	}
	return m
}

// DefaultClusterRoles are the ClusterRoles every skiff cluster has.
func DefaultClusterRoles() []*api.ClusterRole {
	roles := []*api.ClusterRole{
		named("cluster-admin", nil,
			rule(v("*"), g("*"), "*"),
			urls(v("*"), "*")),
		named("system:discovery", nil,
			urls(v("get"), "/livez", "/readyz", "/healthz", "/version", "/version/", "/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*")),
		named("system:monitoring", nil,
			urls(v("get"), "/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz", "/livez/*", "/readyz/*", "/healthz/*")),
		named("system:basic-user", nil,
			rule(v("create"), g(authzG), "selfsubjectaccessreviews", "selfsubjectrulesreviews"),
			rule(v("create"), g(authn), "selfsubjectreviews")),
		named("system:public-info-viewer", nil,
			urls(v("get"), "/livez", "/readyz", "/healthz", "/version", "/version/")),
		aggregated("admin", nil, api.LabelAggregateToAdmin),
		aggregated("edit", labelled(api.LabelAggregateToAdmin), api.LabelAggregateToEdit),
		aggregated("view", labelled(api.LabelAggregateToEdit), api.LabelAggregateToView),
		named("system:aggregate-to-admin", labelled(api.LabelAggregateToAdmin),
			rule(v("create"), g(authzG), "localsubjectaccessreviews"),
			rule(readWrite, g(api.RBACGroup), "roles", "rolebindings")),
		named("system:aggregate-to-edit", labelled(api.LabelAggregateToEdit), aggregateToEdit()...),
		named("system:aggregate-to-view", labelled(api.LabelAggregateToView), aggregateToView()...),
		named("system:node", nil, nodeRules()...),
		named("system:node-proxier", nil,
			rule(v("list", "watch"), g(core), "services", "endpoints"),
			rule(read, g(core), "nodes"),
			eventsRule(),
			rule(v("list", "watch"), g(discG), "endpointslices")),
		named("system:node-bootstrapper", nil,
			rule(v("create", "get", "list", "watch"), g(certG), "certificatesigningrequests")),
		named("system:auth-delegator", nil,
			rule(v("create"), g(authn), "tokenreviews"),
			rule(v("create"), g(authzG), "subjectaccessreviews")),
		named("system:kube-controller-manager", nil,
			eventsRule(),
			rule(v("create"), g(coordG), "leases"),
			api.PolicyRule{Verbs: v("get", "update"), APIGroups: g(coordG), Resources: []string{"leases"}, ResourceNames: []string{"kube-controller-manager"}},
			rule(v("create"), g(core), "secrets", "serviceaccounts"),
			rule(v("delete"), g(core), "secrets"),
			rule(v("get"), g(core), "namespaces", "secrets", "serviceaccounts", "configmaps"),
			rule(v("update"), g(core), "secrets", "serviceaccounts"),
			rule(v("create"), g(authn), "tokenreviews"),
			rule(v("create"), g(authzG), "subjectaccessreviews"),
			rule(v("list", "watch"), g("*"), "*"),
			rule(v("create"), g(core), "serviceaccounts/token")),
		named("system:kube-scheduler", nil, kubeSchedulerRules()...),
		named("system:volume-scheduler", nil,
			rule(v("get", "list", "watch", "update", "patch"), g(core), "persistentvolumes"),
			rule(read, g(storeG), "storageclasses"),
			rule(v("get", "list", "watch", "update", "patch"), g(core), "persistentvolumeclaims")),
		named("system:kube-dns", nil,
			rule(v("list", "watch"), g(core), "endpoints", "services")),
		named("system:service-account-issuer-discovery", nil,
			urls(v("get"), "/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks", "/openid/v1/jwks/")),
		// skiff's own: the web dashboard's login codes, for anyone
		// authenticated (a session then reads as its user: dashboard/).
		named("system:skiff:dashboard-user", nil,
			urls(v("post"), "/skiff/v1/dashboard/login-codes")),
		// skiff's own: a pod's trace (`skiff trace pod`, the dashboard's
		// chain) and an autoscaler's last decisions (`skiff trace hpa`,
		// describe hpa) for whoever may view the namespace's pods and
		// autoscalers.
		named("system:skiff:aggregate-to-view", labelled(api.LabelAggregateToView),
			rule(v("get"), g(core), "pods/trace"), rule(v("get"), g("autoscaling"), "horizontalpodautoscalers/trace")),
		named("system:certificates.k8s.io:kube-apiserver-client-approver", nil,
			api.PolicyRule{Verbs: v("approve"), APIGroups: g(certG), Resources: []string{"signers"}, ResourceNames: []string{"kubernetes.io/kube-apiserver-client"}}),
		named("system:certificates.k8s.io:kube-apiserver-client-kubelet-approver", nil,
			api.PolicyRule{Verbs: v("approve"), APIGroups: g(certG), Resources: []string{"signers"}, ResourceNames: []string{"kubernetes.io/kube-apiserver-client-kubelet"}}),
	}
	for _, r := range roles {
		markDefault(&r.ObjectMeta)
	}
	return append(roles, addOnClusterRoles()...)
}

// aggregateToEdit is system:aggregate-to-edit: what an editor of a
// namespace may do; no status subresources, no quota or limits, no RBAC.
func aggregateToEdit() []api.PolicyRule {
	return []api.PolicyRule{
		rule(read, g(core), "pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"),
		rule(v("impersonate"), g(core), "serviceaccounts"),
		rule(write, g(core), "pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"),
		rule(v("create"), g(core), "pods/eviction"),
		rule(write, g(core), "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
			"services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets", "events"),
		rule(v("create"), g(core), "serviceaccounts/token"),
		rule(write, g(apps), "statefulsets", "statefulsets/scale", "daemonsets", "deployments", "deployments/scale",
			"deployments/rollback", "replicasets", "replicasets/scale"),
		rule(write, g(autosc), "horizontalpodautoscalers"),
		rule(write, g(batch), "jobs", "cronjobs"),
		rule(write, g(ext), "daemonsets", "deployments", "deployments/scale", "deployments/rollback", "ingresses",
			"replicasets", "replicasets/scale", "replicationcontrollers/scale", "networkpolicies"),
		rule(write, g(policyG), "poddisruptionbudgets"),
		rule(write, g(netG), "networkpolicies", "ingresses"),
		rule(read, g(resG), "resourceclaims", "resourceclaims/status", "resourceclaimtemplates"),
		rule(write, g(resG), "resourceclaims", "resourceclaimtemplates"),
	}
}

// aggregateToView is system:aggregate-to-view: read what is not secret.
func aggregateToView() []api.PolicyRule {
	return []api.PolicyRule{
		rule(read, g(core), "pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
			"services", "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps"),
		rule(read, g(core), "limitranges", "resourcequotas", "bindings", "events",
			"pods/status", "resourcequotas/status", "namespaces/status", "replicationcontrollers/status", "pods/log"),
		rule(read, g(core), "namespaces"),
		rule(read, g(discG), "endpointslices"),
		rule(read, g(apps), "controllerrevisions", "statefulsets", "statefulsets/status", "statefulsets/scale",
			"daemonsets", "daemonsets/status", "deployments", "deployments/status", "deployments/scale",
			"replicasets", "replicasets/status", "replicasets/scale"),
		rule(read, g(autosc), "horizontalpodautoscalers", "horizontalpodautoscalers/status"),
		rule(read, g(batch), "jobs", "cronjobs", "cronjobs/status", "jobs/status"),
		rule(read, g(ext), "daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status",
			"ingresses", "ingresses/status", "replicasets", "replicasets/scale", "replicasets/status", "replicationcontrollers/scale",
			"networkpolicies"),
		rule(read, g(policyG), "poddisruptionbudgets", "poddisruptionbudgets/status"),
		rule(read, g(netG), "networkpolicies", "ingresses", "ingresses/status"),
		rule(read, g(resG), "resourceclaims", "resourceclaims/status", "resourceclaimtemplates"),
	}
}

// nodeRules is the system:node role (bound to no one: the Node authorizer
// decides what a node may do, as in Kubernetes since 1.8).
func nodeRules() []api.PolicyRule {
	return []api.PolicyRule{
		rule(v("create"), g(authn), "tokenreviews"),
		rule(v("create"), g(authzG), "subjectaccessreviews", "localsubjectaccessreviews"),
		rule(read, g(core), "services"),
		rule(v("create", "get", "list", "watch"), g(core), "nodes"),
		rule(v("update", "patch"), g(core), "nodes/status"),
		rule(v("update", "patch"), g(core), "nodes"),
		rule(v("create", "update", "patch"), g(core), "events"),
		rule(read, g(core), "pods"),
		rule(v("create", "delete"), g(core), "pods"),
		rule(v("update", "patch"), g(core), "pods/status"),
		rule(v("create"), g(core), "pods/eviction"),
		rule(read, g(core), "secrets", "configmaps"),
		rule(v("get"), g(core), "persistentvolumeclaims", "persistentvolumes"),
		rule(v("get"), g(core), "endpoints"),
		rule(v("create", "get", "list", "watch"), g(certG), "certificatesigningrequests"),
		rule(v("get", "create", "update", "patch", "delete"), g(coordG), "leases"),
		rule(v("get"), g(storeG), "volumeattachments"),
		rule(v("create"), g(core), "serviceaccounts/token"),
		rule(v("get", "update", "patch"), g(core), "persistentvolumeclaims/status"),
		rule(v("get", "watch", "list"), g(storeG), "csidrivers"),
		rule(v("get", "create", "update", "patch", "delete"), g(storeG), "csinodes"),
		rule(read, g("node.k8s.io"), "runtimeclasses"),
		rule(v("get"), g(resG), "resourceclaims"),
	}
}

// kubeSchedulerRules is system:kube-scheduler.
func kubeSchedulerRules() []api.PolicyRule {
	return []api.PolicyRule{
		eventsRule(),
		rule(v("create"), g(coordG), "leases"),
		{Verbs: v("get", "update"), APIGroups: g(coordG), Resources: []string{"leases"}, ResourceNames: []string{"kube-scheduler"}},
		rule(read, g(core), "nodes"),
		rule(v("get", "list", "watch", "delete"), g(core), "pods"),
		rule(v("create"), g(core), "pods/binding", "bindings"),
		rule(v("patch", "update"), g(core), "pods/status"),
		rule(read, g(core), "services", "replicationcontrollers"),
		rule(read, g(apps, ext), "replicasets"),
		rule(read, g(apps), "statefulsets"),
		rule(read, g(policyG), "poddisruptionbudgets"),
		rule(read, g(core), "persistentvolumeclaims", "persistentvolumes"),
		rule(v("create"), g(authn), "tokenreviews"),
		rule(v("create"), g(authzG), "subjectaccessreviews"),
		rule(read, g(storeG), "csinodes"),
		rule(read, g(core), "namespaces"),
		rule(read, g(storeG), "csidrivers"),
		rule(read, g(storeG), "csistoragecapacities"),
		rule(read, g(resG), "resourceclaims", "deviceclasses", "resourceslices"),
		rule(v("get", "list", "watch", "update", "patch"), g(resG), "resourceclaims/status"),
		rule(v("get", "list", "watch", "update", "patch"), g(core), "pods/finalizers"),
	}
}

// addOnClusterRoles are the roles the add-ons Kubernetes clusters install
// ship, skiff serving their APIs itself: metrics-server's
// system:aggregated-metrics-reader (`kubectl top` for whoever may view)
// and Kueue's (batch users may write Jobs and read their queues and
// Workloads, batch administrators manage the queues).
func addOnClusterRoles() []*api.ClusterRole {
	const (
		batchAdmin = "rbac.kueue.x-k8s.io/batch-admin"
		batchUser  = "rbac.kueue.x-k8s.io/batch-user"
	)
	toAll := []string{api.LabelAggregateToView, api.LabelAggregateToEdit, api.LabelAggregateToAdmin}
	kueue := func(name string, lbls []string, rules ...api.PolicyRule) *api.ClusterRole {
		return named("kueue-"+name, labelled(lbls...), rules...)
	}
	editor := func(name, resource string, status bool, lbls ...string) *api.ClusterRole {
		rules := []api.PolicyRule{rule(readWrite7, g(kueueG), resource)}
		if status {
			rules = append(rules, rule(v("get"), g(kueueG), resource+"/status"))
		}
		return kueue(name, lbls, rules...)
	}
	viewer := func(name, resource string, status bool, lbls ...string) *api.ClusterRole {
		rules := []api.PolicyRule{rule(read, g(kueueG), resource)}
		if status {
			rules = append(rules, rule(v("get"), g(kueueG), resource+"/status"))
		}
		return kueue(name, lbls, rules...)
	}
	roles := []*api.ClusterRole{
		named("system:aggregated-metrics-reader", labelled(toAll...),
			rule(read, g("metrics.k8s.io"), "pods", "nodes")),
		aggregated("kueue-batch-admin-role", nil, batchAdmin),
		aggregated("kueue-batch-user-role", nil, batchUser),
		kueue("job-editor-role", []string{batchAdmin, batchUser},
			rule(readWrite7, g(batch), "jobs"), rule(v("get"), g(batch), "jobs/status")),
		kueue("job-viewer-role", append([]string{batchAdmin, batchUser}, toAll...),
			rule(read, g(batch), "jobs"), rule(v("get"), g(batch), "jobs/status")),
		editor("clusterqueue-editor-role", "clusterqueues", true, batchAdmin),
		viewer("clusterqueue-viewer-role", "clusterqueues", true, batchAdmin, api.LabelAggregateToAdmin),
		editor("localqueue-editor-role", "localqueues", true, batchAdmin),
		viewer("localqueue-viewer-role", "localqueues", true, append([]string{batchAdmin, batchUser}, toAll...)...),
		editor("resourceflavor-editor-role", "resourceflavors", false, batchAdmin),
		viewer("resourceflavor-viewer-role", "resourceflavors", false, batchAdmin, api.LabelAggregateToAdmin),
		editor("workload-editor-role", "workloads", true, batchAdmin),
		viewer("workload-viewer-role", "workloads", true, append([]string{batchAdmin, batchUser}, toAll...)...),
		editor("topology-editor-role", "topologies", false, batchAdmin),
		viewer("topology-viewer-role", "topologies", false, batchAdmin, api.LabelAggregateToAdmin),
		kueue("pending-workloads-cq-viewer-role", append([]string{batchAdmin}, toAll...),
			rule(read, g(visG), "clusterqueues/pendingworkloads")),
		kueue("pending-workloads-lq-viewer-role", append([]string{batchAdmin, batchUser}, toAll...),
			rule(read, g(visG), "localqueues/pendingworkloads")),
	}
	for _, r := range roles {
		setAnnotation(&r.ObjectMeta, api.AnnotationRBACAutoUpdate, "true")
	}
	return roles
}

// DefaultClusterRoleBindings are the ClusterRoleBindings every skiff
// cluster has.
func DefaultClusterRoleBindings() []*api.ClusterRoleBinding {
	bind := func(role string, subjects ...api.Subject) *api.ClusterRoleBinding {
		b := &api.ClusterRoleBinding{ObjectMeta: api.ObjectMeta{Name: role},
			RoleRef: api.RoleRef{APIGroup: api.RBACGroup, Kind: "ClusterRole", Name: role}, Subjects: subjects}
		markDefault(&b.ObjectMeta)
		return b
	}
	group := func(name string) api.Subject {
		return api.Subject{Kind: api.SubjectGroup, APIGroup: api.RBACGroup, Name: name}
	}
	user := func(name string) api.Subject {
		return api.Subject{Kind: api.SubjectUser, APIGroup: api.RBACGroup, Name: name}
	}
	return []*api.ClusterRoleBinding{
		bind("cluster-admin", group(MastersGroup)),
		bind("system:monitoring", group(MonitoringGroup)),
		bind("system:discovery", group(AuthenticatedGroup)),
		bind("system:basic-user", group(AuthenticatedGroup)),
		bind("system:public-info-viewer", group(AuthenticatedGroup), group(UnauthenticatedGroup)),
		bind("system:node-proxier", user(KubeProxy)),
		bind("system:kube-controller-manager", user(KubeControllerManager)),
		bind("system:kube-dns", api.Subject{Kind: api.SubjectServiceAccount, Name: "kube-dns", Namespace: "kube-system"}),
		bind("system:kube-scheduler", user(KubeScheduler)),
		bind("system:volume-scheduler", user(KubeScheduler)),
		bind("system:node"),
		bind("system:service-account-issuer-discovery", group(ServiceAccountsGroup)),
		bind("system:skiff:dashboard-user", group(AuthenticatedGroup)),
	}
}

// markDefault labels and annotates a default object as Kubernetes'
// bootstrap policy does.
func markDefault(m *api.ObjectMeta) {
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[api.LabelBootstrapping] = "rbac-defaults"
	setAnnotation(m, api.AnnotationRBACAutoUpdate, "true")
}

func setAnnotation(m *api.ObjectMeta, k, val string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[k] = val
}
