package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	v1 "k8s.io/kube-scheduler/config/v1"
)

// CoschedulingArgs are the Coscheduling plugin's arguments, as
// kubernetes-sigs/scheduler-plugins defines them (kind CoschedulingArgs
// in kubescheduler.config.k8s.io/v1), so its tutorials' files load.
type CoschedulingArgs struct {
	metav1.TypeMeta `json:",inline"`
	// PermitWaitingTimeSeconds is how long a member waits at Permit for
	// its group when the PodGroup sets no scheduleTimeoutSeconds
	// (default 60).
	PermitWaitingTimeSeconds *int64 `json:"permitWaitingTimeSeconds,omitempty"`
	// PodGroupBackoffSeconds: scheduler-plugins' wait before a group that
	// failed is tried again. skiff retries each member with its own
	// backoff instead; only 0 (the default) is accepted.
	PodGroupBackoffSeconds *int64 `json:"podGroupBackoffSeconds,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (a *CoschedulingArgs) DeepCopyObject() runtime.Object {
	out := *a
	if a.PermitWaitingTimeSeconds != nil {
		v := *a.PermitWaitingTimeSeconds
		out.PermitWaitingTimeSeconds = &v
	}
	if a.PodGroupBackoffSeconds != nil {
		v := *a.PodGroupBackoffSeconds
		out.PodGroupBackoffSeconds = &v
	}
	return &out
}

// newScheme registers the configuration and every plugin args kind this
// package knows: Kubernetes' (k8s.io/kube-scheduler/config/v1) and
// skiff's own plugins'.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1.AddToScheme(s); err != nil {
		panic(err) // registering fixed types cannot fail
	}
	s.AddKnownTypes(v1.SchemeGroupVersion, &CoschedulingArgs{})
	return s
}

// decode reads a KubeSchedulerConfiguration strictly, as kube-scheduler:
// unknown and duplicate fields are errors naming their path, in the
// configuration and in each plugin's args.
func decode(data []byte) (*v1.KubeSchedulerConfiguration, error) {
	s := newScheme()
	ser := json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s, json.SerializerOptions{Yaml: true, Strict: true})
	obj, _, err := ser.Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	c, ok := obj.(*v1.KubeSchedulerConfiguration)
	if !ok {
		return nil, &kindError{got: obj.GetObjectKind().GroupVersionKind().Kind}
	}
	if err := c.DecodeNestedObjects(ser); err != nil {
		return nil, err
	}
	return c, nil
}

type kindError struct{ got string }

func (e *kindError) Error() string {
	return "got kind " + e.got + ", not " + Kind
}
