// +k8s:deepcopy-gen=package

// Package api is skiff's API: the object types with Kubernetes' JSON field
// names (so course YAML applies unchanged), their registry, their
// defaults and validation in Kubernetes' words, strict decoding, and the
// names both sides of a wire share. It imports no other skiff package:
// everything else builds on it (repo_test.go's layers).
//
// # Invariants
//
//   - A field skiff serves means what it means in Kubernetes; one it does
//     not serve is refused by path (strict.go), never accepted and
//     ignored.
//   - Kinds are registered once, in Kinds (registry.go); the API server,
//     the store, the clients, OpenAPI (openapi/), Table columns (table/),
//     explain and docs/api-fields.md all work from it.
//   - Sums of quantities never overflow: amounts add with AddAmounts,
//     which saturates (quantity.go).
//
// # The files, by API group
//
//   - meta.go: ObjectMeta, TypeMeta, owner references, times, list
//     options; errors.go: Status errors and their reasons;
//     quantity.go: quantities.
//   - core/v1: core.go (Namespace, ConfigMap, Secret, Service, Endpoints,
//     Node, Event), pod.go (Pod, resources), security.go
//     (securityContext), storage.go (PersistentVolume and Claim,
//     StorageClass), serviceaccount.go, serviceallocation.go (the API
//     server's record of Service addresses).
//   - apps/v1: apps.go (Deployment, ReplicaSet), daemonset.go (with
//     ControllerRevision), statefulset.go.
//   - batch/v1: batch.go (Job), cronjob.go.
//   - policy/v1: policy.go (Eviction, PodDisruptionBudget).
//   - coordination.k8s.io: coordination.go (Lease); discovery.k8s.io:
//     discovery_k8s.go (EndpointSlice); scheduling.k8s.io:
//     scheduling.go (PriorityClass); authorization and authentication
//     reviews: authorization.go; metrics.k8s.io: metrics.go.
//   - resource.k8s.io (DRA): resource.go, resource_convert.go (v1beta1 and
//     v1beta2 served); kueue.x-k8s.io: kueue.go; scheduling.x-k8s.io:
//     podgroup.go.
//   - skiff's own: trace.go (pod traces), trace_scheduling.go (the
//     scheduler's span details and their tables), servers.go (the wire
//     API between servers: who leads, etcd members), nvidia.go (NVIDIA's
//     names), version.go.
//
// # Machinery
//
//   - registry.go: Kind and the table Kinds; versions.go: further served
//     versions of a kind, converted in and out.
//   - decode.go, strict.go: strict decoding of YAML and JSON streams,
//     every unknown or unsupported field named by path; decode_stored.go:
//     decoding what skiff encoded itself; encode.go: encoding an object
//     for the store (encoding/json's bytes, managedFields written as
//     they are).
//   - defaults.go: Kubernetes' defaults.
//   - selector.go: label and field selectors (apimachinery's parsers).
//   - explain.go: `skiff explain`, from the types' doc comments.
//   - zz_generated.deepcopy.go: every type's DeepCopyInto and DeepCopy,
//     and every kind's DeepCopyObject, which Clone uses: written by
//     Kubernetes' deepcopy-gen (hack/deepcopy.sh, `go generate`) from
//     the types' deepcopy-gen tags; never edit it. deepcopy.go copies by reflect
//     what it does not (TraceSpan's Details).
//
// # Validation
//
// validate.go (the entry points Validate and ValidateUpdate, and the
// shared field checks), validate_pod.go, validate_resource.go,
// validate_kueue.go, validate_scheduling.go, validate_storage.go; each
// kind's own rules beside it where they are short (batch.go,
// daemonset.go, ...). Errors are field errors with Kubernetes' paths and
// words (FieldErrors, NewInvalid).
//
// # Subpackages
//
// fabric/ (the cluster file of `skiff up --nodes N --cluster`),
// gputopology/ (GPU links and the node's GPU annotations), openapi/
// (schemas), patch/ (strategic, JSON and merge patches), strategy/ (the
// registry's rules on a write, shared with client/fake), table/ (kubectl's
// columns).
package api

//go:generate ../hack/deepcopy.sh
