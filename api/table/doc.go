// Package table is the one place of kubectl's columns: for each kind skiff
// serves, the columns `kubectl get` shows (NAME READY STATUS RESTARTS AGE
// for pods, ...) and the cells of one object, as Kubernetes' printers in
// k8s.io/kubernetes pkg/printers/internalversion compute them. The
// functions are pure: an object and the time "now" in, cells out.
//
// # Columns
//
// A Printer has the columns of a kind as metav1.TableColumnDefinition
// (name, type, format, description, priority) and a Cells function that
// returns one cell per column: a string, an int64 or a bool, as
// Kubernetes' printers. Every column is always computed; priority 0
// columns are shown always, priority 1 columns only with -o wide (the
// -o wide columns may sit between others: events show SUBOBJECT and
// SOURCE before MESSAGE). The column whose Format is "name" gets the kind
// prefix ("pod/web") when several kinds are printed. Kinds without columns
// of their own get NAME AGE.
//
// Adding a kind's columns is one function in one file: write
// `func fooPrinter() Printer` next to the kinds of its API group (core.go,
// apps.go, scheduling.go, or a new file for a new group) and name it in
// printers (table.go).
//
// # Who uses it
//
// The API server answers `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`
// with a meta.k8s.io Table built from these printers (controlplane/apiserver
// table.go): that is what real kubectl asks for. The skiff CLI renders the
// same printers locally from the objects it lists, rather than asking the
// server for Tables: it holds typed objects already (it needs them for -o
// yaml, sorting events and watching), it works the same against the
// in-memory client/fake in its tests, and the CLI and server are one binary
// of one version, so the cells cannot differ. One implementation, two
// callers: the output of `skiff get` and `kubectl get` is the same by
// construction.
package table
