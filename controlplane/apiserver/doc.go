// Package apiserver is skiff's API server: the only component that writes
// to the store. Everything else (CLI, scheduler, controllers, node agents)
// reads and changes the cluster through it.
//
// A request goes: authenticate (authn.go: the admin token, a client
// certificate of the cluster CA, a ServiceAccount token; the dashboard's
// session cookie on its own paths) → authorize (authz.go) → decode
// strictly → prepare the server-owned fields (uid, generation, status:
// api/strategy) → defaults → admission (priority, ServiceAccount, Kueue,
// storage) → validate → the namespace exists and is not terminating →
// Pod Security → write to the store with optimistic concurrency (a stale
// resourceVersion is a 409 Conflict) → answer. Watches stream the
// store's changes after a resourceVersion; one that is too old gets 410 Gone
// and the client lists again. Lists read at a resourceVersion as
// resourceVersionMatch says, and a list or watch from a revision the store
// has not reached gets 504 "Too large resource version" after a short wait
// (resourceversion.go), so that a client relists.
//
// # Pieces
//
//   - Registry (registry.go) holds the rules: create, update, status, delete
//     (graceful for pods on a node, finalizers, namespace termination),
//     binding, scale and traces. Both front doors call it. Its rules on a
//     write (what the server owns, preconditions, binding, selectors) are
//     api/strategy's, which client/fake calls too, so the fake of unit
//     tests cannot drift from the server.
//   - Server (server.go, handlers.go) serves the rules over HTTP on
//     Kubernetes-shaped paths (/api/v1/namespaces/NS/pods/NAME/status).
//   - Local (local.go) serves the same rules in process as a
//     client.Interface, for the controllers that run inside the server.
//   - resourceversion.go: what a resourceVersion means to list, watch and
//     update, as kube-apiserver.
//   - What admission remembers between requests, exact by construction:
//     lists that change a few times a term (LimitRanges, ResourceQuotas,
//     PriorityClasses), kept while the store's count of writes to them has
//     not moved (sharedlist.go); work that depends on an object's contents
//     alone, by its shape key (shapekey.go, recentcache.go): a create's
//     managedFields (createfields.go), Pod Security's verdict on a pod
//     (admission_podsecurity.go).
//
// Invariants: objects handed in are copied, never retained; a request that
// fails changes nothing; the store is never written without validation.
package apiserver
