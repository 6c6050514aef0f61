// Package client is how every part of skiff talks to the API server: the
// CLI, the controllers, the scheduler, the node agent and the tests.
//
// # Pieces
//
//   - Interface (interface.go) is the seam: create, update, status update,
//     delete, get, list, watch and the pod/scale/trace subresources.
//     *Client implements it over HTTP with Kubernetes-shaped paths;
//     client/fake implements it in memory for unit tests.
//   - Config (config.go) is the small YAML file `skiff up` writes so the CLI
//     finds the server: its address and bearer token.
//   - Informer (informer.go) is a cache filled by list + watch, like
//     client-go's informer: it lists once, then follows the watch stream,
//     relists when the server cannot resume it (410 Gone, or 504 "Too large
//     resource version"), and tells handlers what changed.
//   - InformerFactory (factory.go) gives a process one shared Informer per
//     kind, as client-go's SharedInformerFactory: the controllers, the
//     scheduler, its DRA plugin and the queue manager of the leader read
//     one cache and one watch stream per kind (controlplane.lead). A new
//     controller takes its informers from it; factory.go's doc shows the
//     five lines. Handlers may be added while an informer runs (they are
//     first told every cached object) and removed again.
//   - Loop (loop.go) is the control loop every controller, the scheduler and
//     the agent share: a deduplicating queue of keys, workers that call
//     Reconcile(ctx, key), per-key exponential backoff on error and a
//     periodic resync.
//   - client/backoff is the one exponential backoff every retry in skiff
//     uses (Loop, Informer, the scheduler queue, the pod worker's restarts
//     and image pulls, the GPU plugin, the containerd runtime).
//   - Recorder (events.go) writes Events, deduplicated like Kubernetes: a
//     repeat bumps the count of the existing Event.
//
// # Invariants
//
//   - Errors from the server are *api.StatusError; branch with api.IsNotFound,
//     api.IsConflict, api.IsGone and friends, never on strings.
//   - Objects returned by Client belong to the caller. Objects returned by an
//     Informer are shared with its cache and every other reader: never
//     modify them; api.Clone first (STYLE 8).
//   - Handlers only enqueue keys; the work happens in Reconcile, which reads
//     current state and is safe to repeat (STYLE 7).
package client
