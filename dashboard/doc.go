// Package dashboard is skiff's web dashboard: the course's two visuals
// ("the whole chain of GPU scheduling" and "the device plugin gRPC
// sequence") drawn from a real run, a live view of the cluster and the
// control loops, served by the API server under /dashboard/.
//
// # Views
//
//   - chain: the seven steps of one pod from its trace (`skiff trace pod`),
//     each with its real time, duration and details; a Pending pod shows why,
//     per node, and is drawn again when it schedules.
//   - sequence: per node, the real gRPC calls between the agent's device
//     manager and each device plugin (agent/devices calllog.go), fetched
//     through the nodes/NAME/proxy path.
//   - cluster: nodes with their GPUs (holder, health, link matrix), pods by
//     phase with Pending reasons, queues and claims when those kinds exist.
//   - loops: the reconcile lines of the controllers (Reconciles, fed by
//     their logReconcile through TeeReconciles) as they happen.
//   - hpa: per HorizontalPodAutoscaler (hpa.go, assets/static/hpa.js),
//     each pod's metric value and the replica count over time, every
//     rescale marked, each sync's steps on hover and in a list: the
//     decisions the controller posted to the autoscaler's trace (one
//     sample per sync, in the API server's bounded ring), fetched again
//     when its reconcile line or the autoscaler's status arrives.
//
// The page is plain HTML, CSS and JavaScript embedded in the binary
// (assets/): no CDN, no build step, nothing fetched from outside the
// server, so it works in an offline lab room. Live data comes from one
// Server-Sent Events stream (GET /dashboard/api/watch) fed by the API's
// watch and the reconcile ring: nothing polls.
//
// # Login and sessions
//
// `skiff dashboard` asks the API server (with its credential) for a
// one-time login code: POST LoginCodePath, which the API server serves
// behind its authentication and authorization (every authenticated user
// may: the default ClusterRole system:skiff:dashboard-user); the
// dashboard refuses a request with an unknown field or view (400). The URL it prints
// carries the code once; GET /dashboard/login
// exchanges it for a session cookie (random, HttpOnly, Secure,
// SameSite=Strict, kept server-side with an expiry) and redirects to the
// view without the code. A code works once and expires after CodeTTL;
// a session after SessionTTL.
//
// Every other path under /dashboard/ answers 401 without a live session.
// The data endpoints read through a client.Interface (the API server's
// Local) with the session's user on the context (apiserver.WithUser): the
// user who asked for the code, authorized by Local on every read exactly
// as their own requests are. A student sees what their credential may
// read: the live view watches each kind cluster-wide when they may, else
// in the namespaces where they may (found when the stream starts); a
// pod's chain is refused (403) in another namespace; a node's device
// calls need nodes/proxy; the control loops' lines are those about
// objects of namespaces where they may list pods (system:masters sees
// them all).
package dashboard
