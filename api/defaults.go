package api

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Defaults, with Kubernetes' values and semantics (pkg/apis/core/v1/defaults.go,
// pkg/apis/apps/v1/defaults.go). The namespace is not defaulted here: the
// API server sets it from the request path.
const (
	DefaultSchedulerName            = "default-scheduler"
	DefaultTerminationGracePeriod   = 30
	DefaultTerminationMessagePath   = "/dev/termination-log"
	DefaultTerminationMessagePolicy = "File"
	DefaultRevisionHistoryLimit     = 10
	DefaultProgressDeadlineSeconds  = 600
	// DefaultVolumeMode is 0644, the mode of ConfigMap and Secret files.
	DefaultVolumeMode = 0o644
)

// SetDefaults fills defaulted fields of a new or updated object, as
// Kubernetes' defaulting (replicas 1, restartPolicy Always, protocol TCP, ...).
// It is idempotent.
func SetDefaults(obj Object) {
	switch o := obj.(type) {
	case *Pod:
		if o.Spec.ServiceAccountName == "" && o.Spec.DeprecatedServiceAccount == "" {
			o.Spec.ServiceAccountName = DefaultServiceAccountName // as ServiceAccount admission
		}
		defaultPodSpec(&o.Spec)
	case *Deployment:
		defaultDeployment(o)
	case *ReplicaSet:
		if o.Spec.Replicas == nil {
			o.Spec.Replicas = ptr[int32](1)
		}
		defaultPodSpec(&o.Spec.Template.Spec)
	case *DaemonSet:
		defaultDaemonSet(o) // daemonset.go
	case *StatefulSet:
		defaultStatefulSet(o) // statefulset.go
	case *LimitRange:
		defaultLimitRange(o) // quota.go
	case *Job:
		defaultJob(o) // batch.go
	case *CronJob:
		defaultCronJob(o) // cronjob.go
	case *HorizontalPodAutoscaler:
		defaultHPA(o) // hpa.go
	case *Service:
		defaultService(o)
	case *Secret:
		if o.Type == "" {
			o.Type = SecretTypeOpaque
		}
		if len(o.StringData) > 0 {
			if o.Data == nil {
				o.Data = map[string][]byte{}
			}
			for k, v := range o.StringData {
				o.Data[k] = []byte(v)
			}
		}
		o.StringData = nil
	case *Namespace:
		if o.Status.Phase == "" {
			o.Status.Phase = NamespaceActive
		}
		if o.Name != "" {
			// Kubernetes labels every namespace with its own name, so
			// selectors can pick namespaces by name.
			if o.Labels == nil {
				o.Labels = map[string]string{}
			}
			o.Labels[LabelNamespaceName] = o.Name
		}
	case *PriorityClass:
		defaultPriorityClass(o)
	case *RoleBinding:
		defaultSubjects(o.Subjects) // rbac.go
	case *ClusterRoleBinding:
		defaultSubjects(o.Subjects)
	case *ClusterQueue:
		if o.Spec.QueueingStrategy == "" {
			o.Spec.QueueingStrategy = BestEffortFIFO // Kueue's CRD default
		}
	case *ResourceClaim, *ResourceClaimTemplate:
		defaultResourceObject(o) // validate_resource.go
	case *EndpointSlice:
		defaultEndpointSlice(o)
	case *PersistentVolume, *PersistentVolumeClaim, *StorageClass:
		defaultStorage(o) // validate_storage.go
	case *TokenRequest:
		SetDefaultsTokenRequest(o)
	case *Endpoints:
		for i := range o.Subsets {
			for j := range o.Subsets[i].Ports {
				if o.Subsets[i].Ports[j].Protocol == "" {
					o.Subsets[i].Ports[j].Protocol = ProtocolTCP
				}
			}
		}
	}
}

// Well-known values used by defaulting and validation.
const (
	SecretTypeOpaque     = "Opaque"
	NamespaceActive      = "Active"
	NamespaceTerminating = "Terminating"
	LabelNamespaceName   = "kubernetes.io/metadata.name"
	ProtocolTCP          = "TCP"
	ProtocolUDP          = "UDP"
	ServiceTypeClusterIP = "ClusterIP"
	ServiceTypeNodePort  = "NodePort"
	RestartAlways        = "Always"
	RestartOnFailure     = "OnFailure"
	RestartNever         = "Never"
	PullAlways           = "Always"
	PullIfNotPresent     = "IfNotPresent"
	PullNever            = "Never"
	RollingUpdate        = "RollingUpdate"
	Recreate             = "Recreate"
)

func ptr[T any](v T) *T { return &v }

func defaultDeployment(d *Deployment) {
	s := &d.Spec
	if s.Replicas == nil {
		s.Replicas = ptr[int32](1)
	}
	if s.Strategy.Type == "" {
		s.Strategy.Type = RollingUpdate
	}
	if s.Strategy.Type == RollingUpdate {
		if s.Strategy.RollingUpdate == nil {
			s.Strategy.RollingUpdate = &RollingUpdateDeployment{}
		}
		if s.Strategy.RollingUpdate.MaxUnavailable == nil {
			s.Strategy.RollingUpdate.MaxUnavailable = ptr(intstr.FromString("25%"))
		}
		if s.Strategy.RollingUpdate.MaxSurge == nil {
			s.Strategy.RollingUpdate.MaxSurge = ptr(intstr.FromString("25%"))
		}
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = ptr[int32](DefaultRevisionHistoryLimit)
	}
	if s.ProgressDeadlineSeconds == nil {
		s.ProgressDeadlineSeconds = ptr[int32](DefaultProgressDeadlineSeconds)
	}
	defaultPodSpec(&s.Template.Spec)
}

func defaultService(s *Service) {
	if s.Spec.Type == "" {
		s.Spec.Type = ServiceTypeClusterIP
	}
	if s.Spec.SessionAffinity == "" {
		s.Spec.SessionAffinity = "None"
	}
	if s.Spec.Type == ServiceTypeNodePort && s.Spec.ExternalTrafficPolicy == "" {
		s.Spec.ExternalTrafficPolicy = "Cluster"
	}
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = ProtocolTCP
		}
		if p.TargetPort.Type == intstr.Int && p.TargetPort.IntVal == 0 {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
}

func defaultPodSpec(s *PodSpec) {
	if s.RestartPolicy == "" {
		s.RestartPolicy = RestartAlways
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr[int64](DefaultTerminationGracePeriod)
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = "ClusterFirst"
	}
	if s.SchedulerName == "" {
		s.SchedulerName = DefaultSchedulerName
	}
	if s.EnableServiceLinks == nil {
		s.EnableServiceLinks = ptr(true)
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &PodSecurityContext{}
	}
	// serviceAccount is the deprecated alias of serviceAccountName: the
	// new name wins, and both read the same (Kubernetes' conversion).
	if s.ServiceAccountName == "" {
		s.ServiceAccountName = s.DeprecatedServiceAccount
	}
	s.DeprecatedServiceAccount = s.ServiceAccountName
	for i := range s.Volumes {
		defaultVolume(&s.Volumes[i])
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i], s.HostNetwork)
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i], s.HostNetwork)
	}
	for i := range s.EphemeralContainers {
		defaultContainer(&s.EphemeralContainers[i].Container, s.HostNetwork)
	}
}

func defaultVolume(v *Volume) {
	switch {
	case v.ConfigMap == nil && v.Secret == nil && v.EmptyDir == nil && v.HostPath == nil && v.Projected == nil && v.PersistentVolumeClaim == nil:
		// Kubernetes: a volume with no source is an emptyDir.
		v.EmptyDir = &EmptyDirVolumeSource{}
	case v.ConfigMap != nil && v.ConfigMap.DefaultMode == nil:
		v.ConfigMap.DefaultMode = ptr[int32](DefaultVolumeMode)
	case v.Secret != nil && v.Secret.DefaultMode == nil:
		v.Secret.DefaultMode = ptr[int32](DefaultVolumeMode)
	case v.HostPath != nil && v.HostPath.Type == nil:
		v.HostPath.Type = ptr("")
	case v.Projected != nil:
		if v.Projected.DefaultMode == nil {
			v.Projected.DefaultMode = ptr[int32](DefaultVolumeMode)
		}
		for _, src := range v.Projected.Sources {
			if t := src.ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				t.ExpirationSeconds = ptr[int64](DefaultTokenExpirationSeconds)
			}
			if d := src.DownwardAPI; d != nil {
				for _, it := range d.Items {
					if it.FieldRef != nil && it.FieldRef.APIVersion == "" {
						it.FieldRef.APIVersion = "v1"
					}
				}
			}
		}
	}
}

func defaultContainer(c *Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		if imageTag(c.Image) == "latest" {
			c.ImagePullPolicy = PullAlways
		} else {
			c.ImagePullPolicy = PullIfNotPresent
		}
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = DefaultTerminationMessagePath
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = DefaultTerminationMessagePolicy
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = ProtocolTCP
		}
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
	// Requests default to limits, resource by resource.
	for name, q := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = ResourceList{}
			}
			c.Resources.Requests[name] = q.DeepCopy()
		}
	}
	for _, p := range []*Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
}

func defaultProbe(p *Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if h := p.HTTPGet; h != nil {
		if h.Path == "" {
			h.Path = "/"
		}
		if h.Scheme == "" {
			h.Scheme = "HTTP"
		}
	}
}

// imageTag returns the tag of an image reference as Kubernetes reads it:
// "latest" when there is neither tag nor digest, "" when there is only a digest.
func imageTag(image string) string {
	name, _, hasDigest := strings.Cut(image, "@")
	tag := ""
	if i := strings.LastIndexByte(name, ':'); i >= 0 && !strings.Contains(name[i:], "/") {
		tag = name[i+1:]
	}
	if tag == "" && !hasDigest {
		return "latest"
	}
	return tag
}
