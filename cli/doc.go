// Package cli is skiff's command line: the kubectl-compatible verbs (apply,
// get, describe, delete, scale, rollout, explain, ...) plus skiff's own
// (trace, and up/server/agent/version: cluster_commands.go).
//
// # A thin CLI
//
// As kind's and k3s's, the CLI parses flags and prints; the work is in the
// package of its concept: the processes `up`, `server`, `agent` and
// `device-plugin` run are package cluster's (a cluster.Config per
// command), the join and TLS bootstrap node's, client-side apply, drain
// and the exec/port-forward connections client/kubectl's, snapshots
// controlplane/store/snapshot's, the scheduling explanation api's. A new
// verb follows suit: flags and printing here, anything else below.
// repo_test.go holds cli to ten skiff packages (TestCLIImports).
//
// # Shape
//
// Every verb is a small struct holding its flags with a Run(ctx) method, in
// a file of its own (get.go, apply.go, ...). A verb gets the API through
// Root.Client, which returns a client.Interface: *client.Client against a
// real server, or client/fake in unit tests. Printing (tables, describe
// sections, ages, -o json|yaml|name|jsonpath) lives in print*.go so later
// verbs reuse it.
//
// # Errors
//
// Errors read like kubectl's: `Error from server (NotFound): pods "x" not
// found` for API errors, `error: ...` for local ones. Main prints them and
// returns a non-nil error; ExitCode turns it into the process exit status.
// A verb that already printed its own per-object errors returns an
// *ExitError so nothing is printed twice.
package cli
