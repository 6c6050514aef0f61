// Package kubectl is what kubectl does on the client side, as a library
// (the way k8s.io/kubectl/pkg and client-go's tools hold it, apart from
// the commands): the CLI's verbs parse flags, call it and print.
//
//   - apply.go: client-side apply, kubectl's three-way patch between the
//     last-applied annotation, the file and the live object (Applier).
//   - drain.go: cordon, uncordon and drain of a node (Drainer), as
//     k8s.io/kubectl/pkg/drain.
//   - update.go: read-modify-write with conflict retries (Update).
//   - stream.go: the client side of exec, attach and port-forward, the
//     connections kubectl 1.32 makes (WebSocket first, SPDY on refusal).
//   - reconcile.go: `kubectl auth reconcile` of RBAC objects (Reconcile).
//   - access.go: the table of `kubectl auth can-i --list` from a
//     SelfSubjectRulesReview (AccessList: kubectl's breakdown, compaction
//     and order).
//   - classroom*.go: `skiff classroom`, the teacher's kubectl session for
//     a room of students (namespaces, quotas, edit bindings, kubeconfigs
//     through the CSR API) as one idempotent, checked-first call
//     (CreateClassroom, ClassroomStatus, DeleteClassroom).
//
// It talks to the API through client.Interface only (so client/fake runs
// it in unit tests) and keeps no state between calls.
//
// Moved here from cli/apply.go, cli/cordon.go and the client halves of
// agent/remotecommand and agent/portforward (issue 25: a thin CLI).
package kubectl
