package api

import (
	"strings"
	"testing"
)

func webStatefulSet(tb testing.TB) *StatefulSet {
	tb.Helper()
	o, _, err := DecodeAny([]byte(`apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: default}
spec:
  serviceName: nginx
  selector: {matchLabels: {app: nginx}}
  template:
    metadata: {labels: {app: nginx}}
    spec:
      containers:
      - name: nginx
        image: registry.k8s.io/nginx-slim:0.21
        volumeMounts: [{name: www, mountPath: /usr/share/nginx/html}]
  volumeClaimTemplates:
  - metadata: {name: www}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
`))
	if err != nil {
		tb.Fatalf("decode: %v", err)
	}
	s := o.(*StatefulSet)
	SetDefaults(s)
	return s
}

func TestStatefulSetDefaultsAndUpdates(t *testing.T) {
	s := webStatefulSet(t)
	sp := s.Spec
	if *sp.Replicas != 1 || sp.PodManagementPolicy != OrderedReadyPodManagement || sp.UpdateStrategy.Type != RollingUpdate ||
		*sp.UpdateStrategy.RollingUpdate.Partition != 0 || *sp.RevisionHistoryLimit != 10 ||
		sp.PersistentVolumeClaimRetentionPolicy.WhenDeleted != RetainPVC || sp.PersistentVolumeClaimRetentionPolicy.WhenScaled != RetainPVC {
		t.Errorf("defaults %+v", sp)
	}
	if errs := Validate(s); len(errs) > 0 {
		t.Fatalf("the tutorial's web: %v", errs)
	}
	// replicas, template, updateStrategy may change; serviceName may not.
	n := Clone(s)
	n.Spec.Replicas = ptr[int32](3)
	n.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/nginx-slim:0.24"
	if errs := ValidateUpdate(n, s); len(errs) > 0 {
		t.Errorf("allowed update refused: %v", errs)
	}
	n.Spec.ServiceName = "other"
	errs := ValidateUpdate(n, s)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden") {
		t.Errorf("serviceName change: %v", errs)
	}
	// A mount of neither a template volume nor a claim template is refused.
	bad := Clone(s)
	bad.Spec.Template.Spec.Containers[0].VolumeMounts[0].Name = "data"
	if errs := Validate(bad); len(errs) == 0 || !strings.Contains(errs[0].Error(), "volumeMounts[0].name") {
		t.Errorf("mount of an unknown volume: %v", errs)
	}
}
