// Package openapi describes skiff's API in OpenAPI, as kube-apiserver
// serves it at /openapi/v2 and /openapi/v3: kubectl reads these documents
// to validate what it sends (apply, create, edit), to compute the patches
// of a client-side apply, and to print `kubectl explain`.
//
// # One source for each piece
//
// Nothing here is written by hand per field. The schemas are made by
// reflection over skiff's own Go types (api.Kinds and the JSON tags of
// their fields, read by api.Fields, the same walk the strict decoder
// does), so they list exactly the fields skiff accepts: a field skiff does
// not implement is absent, and kubectl's validation names it as unknown.
// The descriptions are the types' doc comments (api.Docs, what `skiff
// explain` prints). What Kubernetes adds on top is read from Kubernetes'
// own structs (package api/patch's table: corev1.Pod, appsv1.Deployment,
// ...), walked beside skiff's type field by field:
//
//   - definition names (io.k8s.api.core.v1.Container,
//     io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta): their
//     OpenAPIModelName methods;
//   - strategic merge metadata (x-kubernetes-patch-merge-key: name on
//     containers, env, volumes; x-kubernetes-patch-strategy): their
//     patchMergeKey and patchStrategy tags, the ones the API server's own
//     strategic merge uses, so kubectl and skiff merge alike;
//   - leaf types (Quantity, IntOrString, Time): their OpenAPISchemaType,
//     OpenAPISchemaFormat and OpenAPIV3OneOfTypes methods, so a quantity is
//     a string or a number and an IntOrString has format int-or-string.
//
// x-kubernetes-list-type and x-kubernetes-list-map-keys are markers in
// Kubernetes' source comments, absent from the compiled structs: the small
// table listTypes holds them for the lists skiff has.
//
// A skiff type without a Kubernetes counterpart (PodTrace) is named
// dev.skiff.api.NAME.
//
// # Documents
//
// Build makes one Swagger 2.0 document (every definition and path) and one
// OpenAPI 3.0 document per group version ("api/v1", "apis/apps/v1"), each
// with the paths of its resources and the schemas they reach. Every
// operation carries x-kubernetes-group-version-kind and
// x-kubernetes-action; writes list the fieldValidation query parameter,
// which is how kubectl learns that the server validates fields itself
// (it then sends fieldValidation=Strict instead of validating locally);
// PATCH lists the patch types skiff accepts for the kind (patch.Supported).
// The documents use kube-openapi's types (spec.Swagger, spec3.OpenAPI),
// the ones kube-apiserver and client-go use.
package openapi
