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
// behind its authentication and authorization; the dashboard then
// checks the user is in system:masters itself (403 otherwise) and refuses
// a request with an unknown field or view (400). The URL it prints
// carries the code once; GET /dashboard/login
// exchanges it for a session cookie (random, HttpOnly, Secure,
// SameSite=Strict, kept server-side with an expiry) and redirects to the
// view without the code. A code works once and expires after CodeTTL;
// a session after SessionTTL.
//
// Every other path under /dashboard/ answers 401 without a live session.
// The data endpoints read through a client.Interface (the API server's
// Local) with the session's user on the context (apiserver.WithUser): the
// admin who asked for the code. Local does not authorize again; a
// session only ever holds a system:masters user (the check above), who
// may read everything.
package dashboard
