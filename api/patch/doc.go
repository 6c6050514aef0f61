// Package patch changes a stored object by a patch, the way kube-apiserver
// and kubectl do. The API server uses it for PATCH requests; `skiff apply`
// uses its three-way patch to change only what the user's file changed.
//
// # Three patch types
//
// A PATCH request names its patch type by its Content-Type:
//
//   - application/json-patch+json (RFC 6902): a list of operations
//     (add, remove, replace, move, copy, test) on JSON pointers. A failed
//     test or a path that is not there fails the whole patch.
//   - application/merge-patch+json (RFC 7386): a partial object; maps merge
//     key by key, null deletes a key, anything else (lists too) replaces.
//   - application/strategic-merge-patch+json: a merge patch that knows the
//     Kubernetes schema. Lists of named things merge by their merge key
//     (containers and volumes by name, ports by containerPort, tolerations
//     and finalizers as sets, ...), so patching one container's image keeps
//     every other container and field. Directives steer it: "$patch":
//     "delete" or "replace" on a list item or map, "$setElementOrder/FIELD"
//     to order a merged list, "$retainKeys" to drop the other keys of a map
//     (a Deployment's strategy), "$deleteFromPrimitiveList/FIELD".
//
// Server-side apply (application/apply-patch+yaml) is not implemented.
//
// # Where the strategic metadata comes from
//
// skiff has its own Go types (package api) with Kubernetes' JSON field
// names. Which list merges by which key is read from the Kubernetes structs
// themselves (k8s.io/api: corev1.Pod, appsv1.Deployment, ...; the
// patchStrategy and patchMergeKey struct tags), one per skiff kind, so skiff
// merges exactly as kube-apiserver does. A kind without a Kubernetes struct
// (a custom kind) has no strategic merge patch, as custom resources in
// Kubernetes: ErrNoSchema.
//
// # Three-way patch (client-side apply)
//
// kubectl apply remembers the file it last applied in the annotation
// kubectl.kubernetes.io/last-applied-configuration. ThreeWay compares three
// documents: original (that annotation), modified (the file now) and current
// (the live object). Its patch sets what the file sets and deletes what the
// file used to set and no longer does; fields nobody wrote in a file (a
// Service's allocated clusterIP, a pod's nodeName, defaults, a controller's
// annotations) are left alone. An empty patch ("{}") means unchanged.
// ThreeWayFor does the same for every kind: a kind without strategic
// metadata (a custom resource) gets a three-way JSON merge patch, as
// kubectl sends for custom resources.
//
// Every function works on JSON documents and returns a new document; its
// inputs are never modified. Errors are *Error, whose Reason says whether
// the patch was malformed or did not fit the document.
package patch
