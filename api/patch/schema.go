package patch

import (
	"errors"
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"skiff.dev/skiff/api"
)

// ErrNoSchema: the kind has no Kubernetes struct, so no strategic merge
// metadata (kube-apiserver answers 415 for custom resources).
var ErrNoSchema = errors.New("no strategic merge patch metadata for this kind")

// schemas maps "apiVersion, Kind" to the Kubernetes struct whose
// patchStrategy and patchMergeKey tags say how its lists merge. Every kind
// skiff serves has one, except its own (PodTrace, Internal) and the custom
// resources (Kueue's, the PodGroup: Kind.CustomResource), which
// Kubernetes serves from CustomResourceDefinitions and patches only with
// JSON and merge patches. Constant table.
var schemas = map[string]any{
	"v1, Kind=Namespace": &corev1.Namespace{},
	"v1, Kind=ConfigMap": &corev1.ConfigMap{},
	"v1, Kind=Secret":    &corev1.Secret{},
	"v1, Kind=Pod":       &corev1.Pod{},
	"v1, Kind=Service":   &corev1.Service{},
	//lint:ignore SA1019 skiff serves core/v1 Endpoints, not EndpointSlices
	"v1, Kind=Endpoints":                                     &corev1.Endpoints{},
	"v1, Kind=Node":                                          &corev1.Node{},
	"v1, Kind=Event":                                         &corev1.Event{},
	"v1, Kind=ServiceAccount":                                &corev1.ServiceAccount{},
	"apps/v1, Kind=Deployment":                               &appsv1.Deployment{},
	"apps/v1, Kind=ReplicaSet":                               &appsv1.ReplicaSet{},
	"apps/v1, Kind=DaemonSet":                                &appsv1.DaemonSet{},
	"apps/v1, Kind=StatefulSet":                              &appsv1.StatefulSet{},
	"apps/v1, Kind=ControllerRevision":                       &appsv1.ControllerRevision{},
	"batch/v1, Kind=Job":                                     &batchv1.Job{},
	"batch/v1, Kind=CronJob":                                 &batchv1.CronJob{},
	"autoscaling/v2, Kind=HorizontalPodAutoscaler":           &autoscalingv2.HorizontalPodAutoscaler{},
	"scheduling.k8s.io/v1, Kind=PriorityClass":               &schedulingv1.PriorityClass{},
	"policy/v1, Kind=PodDisruptionBudget":                    &policyv1.PodDisruptionBudget{},
	"autoscaling/v1, Kind=Scale":                             &autoscalingv1.Scale{},
	"v1, Kind=PersistentVolume":                              &corev1.PersistentVolume{},
	"v1, Kind=PersistentVolumeClaim":                         &corev1.PersistentVolumeClaim{},
	"storage.k8s.io/v1, Kind=StorageClass":                   &storagev1.StorageClass{},
	"coordination.k8s.io/v1, Kind=Lease":                     &coordinationv1.Lease{},
	"discovery.k8s.io/v1, Kind=EndpointSlice":                &discoveryv1.EndpointSlice{},
	"resource.k8s.io/v1, Kind=DeviceClass":                   &resourcev1.DeviceClass{},
	"resource.k8s.io/v1, Kind=ResourceClaim":                 &resourcev1.ResourceClaim{},
	"resource.k8s.io/v1, Kind=ResourceClaimTemplate":         &resourcev1.ResourceClaimTemplate{},
	"resource.k8s.io/v1, Kind=ResourceSlice":                 &resourcev1.ResourceSlice{},
	"certificates.k8s.io/v1, Kind=CertificateSigningRequest": &certificatesv1.CertificateSigningRequest{},
	"rbac.authorization.k8s.io/v1, Kind=Role":                &rbacv1.Role{},
	"rbac.authorization.k8s.io/v1, Kind=ClusterRole":         &rbacv1.ClusterRole{},
	"rbac.authorization.k8s.io/v1, Kind=RoleBinding":         &rbacv1.RoleBinding{},
	"rbac.authorization.k8s.io/v1, Kind=ClusterRoleBinding":  &rbacv1.ClusterRoleBinding{},
	"v1, Kind=ResourceQuota":                                 &corev1.ResourceQuota{},
	"v1, Kind=LimitRange":                                    &corev1.LimitRange{},
}

func schemaKey(apiVersion, kind string) string { return apiVersion + ", Kind=" + kind }

// HasSchema reports whether apiVersion/kind has strategic merge metadata,
// that is whether the API server accepts strategic merge patches for it.
func HasSchema(apiVersion, kind string) bool {
	_, ok := schemas[schemaKey(apiVersion, kind)]
	return ok
}

// KubernetesType is the Kubernetes struct of apiVersion/kind
// (corev1.Pod, ...), whose patchStrategy and patchMergeKey tags say how
// lists merge; false for a kind without one. The OpenAPI documents take
// their merge keys and definition names from it, so that kubectl merges
// as this package does.
func KubernetesType(apiVersion, kind string) (reflect.Type, bool) {
	s, ok := schemas[schemaKey(apiVersion, kind)]
	if !ok {
		return nil, false
	}
	return reflect.TypeOf(s).Elem(), true
}

// Schema is the strategic merge metadata of apiVersion/kind, for callers
// that use package strategicpatch directly. The error wraps ErrNoSchema.
func Schema(apiVersion, kind string) (strategicpatch.LookupPatchMeta, error) {
	s, ok := schemas[schemaKey(apiVersion, kind)]
	if !ok {
		return nil, fmt.Errorf("%s %s: %w", apiVersion, kind, ErrNoSchema)
	}
	meta, err := strategicpatch.NewPatchMetaFromStruct(s)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", apiVersion, kind, err)
	}
	return meta, nil
}

// ToKubernetes converts a skiff object of apiVersion/kind into a new value
// of the Kubernetes struct of the table above (*corev1.Pod,
// *appsv1.Deployment, ...), as a JSON round trip would (api.ConvertJSON):
// skiff's types carry Kubernetes' field names, so what skiff has arrives
// where Kubernetes keeps it. For
// code that runs Kubernetes' own libraries on skiff objects (Pod Security
// admission). The error wraps ErrNoSchema for a kind without a struct.
func ToKubernetes(apiVersion, kind string, obj any) (any, error) {
	s, ok := schemas[schemaKey(apiVersion, kind)]
	if !ok {
		return nil, fmt.Errorf("%s %s: %w", apiVersion, kind, ErrNoSchema)
	}
	out := reflect.New(reflect.TypeOf(s).Elem()).Interface()
	if err := api.ConvertJSON(out, obj); err != nil {
		return nil, fmt.Errorf("convert %s %s to Kubernetes' %T: %w", apiVersion, kind, out, err)
	}
	return out, nil
}
