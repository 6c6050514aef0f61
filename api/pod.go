package api

import "k8s.io/apimachinery/pkg/api/resource"

// Quantity is a Kubernetes resource quantity ("250m", "64Mi", "1"): the
// apimachinery implementation, so parsing and canonical forms match kubectl.
type Quantity = resource.Quantity

// ResourceList maps a resource name (cpu, memory, pods, nvidia.com/gpu) to a quantity.
type ResourceList map[string]Quantity

// Pod is the smallest deployable unit: one or more containers sharing a
// network namespace and volumes, placed on one node.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type Pod struct {
	TypeMeta `json:",inline"`
	// Standard object metadata.
	ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired state of the pod.
	Spec PodSpec `json:"spec,omitempty"`
	// Status is the observed state, written by the scheduler and the node agent.
	Status PodStatus `json:"status,omitempty"`
}

// PodSpec describes the containers of a pod and how to run them.
type PodSpec struct {
	// Containers run in the pod. At least one.
	Containers []Container `json:"containers"`
	// InitContainers run to completion, one after the other, before Containers start.
	InitContainers []Container `json:"initContainers,omitempty"`
	// EphemeralContainers are debugging containers added to a running pod
	// through the pods/ephemeralcontainers subresource (`kubectl debug`),
	// never at create; they are never restarted.
	EphemeralContainers []EphemeralContainer `json:"ephemeralContainers,omitempty"`
	// Volumes the containers may mount.
	Volumes []Volume `json:"volumes,omitempty"`
	// RestartPolicy for all containers: Always (default), OnFailure or Never.
	RestartPolicy string `json:"restartPolicy,omitempty"`
	// TerminationGracePeriodSeconds between SIGTERM and SIGKILL on stop (default 30).
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
	// ActiveDeadlineSeconds after which a running pod is failed.
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
	// NodeSelector: the node must carry all these labels.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// NodeName binds the pod to a node; set by the scheduler through the
	// binding subresource, or by the user to skip scheduling.
	NodeName string `json:"nodeName,omitempty"`
	// HostNetwork runs the pod in the node's network namespace.
	HostNetwork bool `json:"hostNetwork,omitempty"`
	// Hostname of the pod (default: the pod name).
	Hostname string `json:"hostname,omitempty"`
	// Subdomain: with a headless Service of that name in the namespace,
	// the pod's name in DNS is HOSTNAME.SUBDOMAIN.NS.svc.cluster.local (a
	// StatefulSet sets it to its serviceName).
	Subdomain string `json:"subdomain,omitempty"`
	// Affinity: node affinity, pod affinity and pod anti-affinity rules
	// for the scheduler.
	Affinity *Affinity `json:"affinity,omitempty"`
	// TopologySpreadConstraints: how evenly the pods a selector matches
	// must (DoNotSchedule) or should (ScheduleAnyway) spread over the
	// domains of a node label (PodTopologySpread).
	TopologySpreadConstraints []TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// Tolerations let the pod schedule onto nodes with matching taints.
	Tolerations []Toleration `json:"tolerations,omitempty"`
	// SchedulerName picks the scheduler profile (a KubeSchedulerConfiguration
	// profile's schedulerName; default "default-scheduler"). A pod naming
	// no profile stays Pending, left to another scheduler.
	SchedulerName string `json:"schedulerName,omitempty"`
	// PriorityClassName names a PriorityClass whose value becomes Priority.
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// Priority is resolved from PriorityClassName by the API server.
	Priority *int32 `json:"priority,omitempty"`
	// PreemptionPolicy: PreemptLowerPriority (default) or Never.
	PreemptionPolicy *string `json:"preemptionPolicy,omitempty"`
	// ServiceAccountName is the ServiceAccount the pod runs as (default
	// "default"); it must exist when the pod is created.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// DeprecatedServiceAccount is the old name of ServiceAccountName
	// (serviceAccount), kept equal to it as Kubernetes does.
	DeprecatedServiceAccount string `json:"serviceAccount,omitempty"`
	// AutomountServiceAccountToken: false leaves out the API access volume
	// (token, ca.crt, namespace); unset takes the ServiceAccount's choice.
	AutomountServiceAccountToken *bool `json:"automountServiceAccountToken,omitempty"`
	// EnableServiceLinks injects Service environment variables (default true).
	EnableServiceLinks *bool `json:"enableServiceLinks,omitempty"`
	// DNSPolicy: ClusterFirst (default), ClusterFirstWithHostNet, Default
	// or None (agent/podworker/resolvconf.go).
	DNSPolicy string `json:"dnsPolicy,omitempty"`
	// DNSConfig is added to what the policy gives (all of it with None).
	DNSConfig *PodDNSConfig `json:"dnsConfig,omitempty"`
	// ResourceClaims the pod's containers may use (DRA, resource.go): an
	// existing ResourceClaim or a ResourceClaimTemplate per entry.
	ResourceClaims []PodResourceClaim `json:"resourceClaims,omitempty"`
	// SecurityContext: the pod's user, groups, fsGroup, sysctls and
	// seccomp profile (security.go); defaulted to {}.
	SecurityContext *PodSecurityContext `json:"securityContext,omitempty"`
}

// Container is one process tree in a pod.
type Container struct {
	// Name, unique in the pod (DNS-1123 label).
	Name string `json:"name"`
	// Image reference, e.g. "nginx:alpine" (docker.io/library/ is implied).
	Image string `json:"image,omitempty"`
	// ImagePullPolicy: Always, IfNotPresent or Never. Default: Always for
	// ":latest" or no tag, otherwise IfNotPresent.
	ImagePullPolicy string `json:"imagePullPolicy,omitempty"`
	// Command replaces the image's entrypoint.
	Command []string `json:"command,omitempty"`
	// Args replace the image's cmd.
	Args []string `json:"args,omitempty"`
	// WorkingDir of the process (default: the image's).
	WorkingDir string `json:"workingDir,omitempty"`
	// Ports the container listens on (informational, and named for Services).
	Ports []ContainerPort `json:"ports,omitempty"`
	// Env variables set in the container.
	Env []EnvVar `json:"env,omitempty"`
	// EnvFrom imports all keys of a ConfigMap or Secret as variables.
	EnvFrom []EnvFromSource `json:"envFrom,omitempty"`
	// Resources: requests guide scheduling; limits become cgroup limits.
	// Extended resources such as nvidia.com/gpu are set in limits.
	Resources ResourceRequirements `json:"resources,omitempty"`
	// VolumeMounts place pod volumes in the container's filesystem.
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`
	// LivenessProbe restarts the container when it fails.
	LivenessProbe *Probe `json:"livenessProbe,omitempty"`
	// ReadinessProbe removes the pod from Service endpoints when it fails.
	ReadinessProbe *Probe `json:"readinessProbe,omitempty"`
	// StartupProbe holds off the other probes until it succeeds.
	StartupProbe *Probe `json:"startupProbe,omitempty"`
	// Stdin keeps stdin open (for `exec -it`-style attach).
	Stdin bool `json:"stdin,omitempty"`
	// TTY allocates a terminal.
	TTY bool `json:"tty,omitempty"`
	// TerminationMessagePath is accepted for compatibility; only the default is allowed.
	TerminationMessagePath string `json:"terminationMessagePath,omitempty"`
	// TerminationMessagePolicy is accepted for compatibility; only the default is allowed.
	TerminationMessagePolicy string `json:"terminationMessagePolicy,omitempty"`
	// SecurityContext: the container's user, capabilities, privileges,
	// read-only root filesystem and seccomp profile (security.go).
	SecurityContext *SecurityContext `json:"securityContext,omitempty"`
}

// EphemeralContainer is a container added to a running pod for
// debugging: a Container without ports, probes or resources, in the pod's
// network namespace. targetContainerName (kubectl debug --target, another
// container's process namespace) is refused: skiff's pods share none.
type EphemeralContainer struct {
	Container `json:",inline"`
}

// ContainerPort is a port a container listens on.
type ContainerPort struct {
	// Name lets a Service's targetPort refer to the port by name.
	Name string `json:"name,omitempty"`
	// ContainerPort number, 1-65535.
	ContainerPort int32 `json:"containerPort"`
	// Protocol: TCP (default) or UDP.
	Protocol string `json:"protocol,omitempty"`
	// HostPort exposes the port on the node.
	HostPort int32 `json:"hostPort,omitempty"`
}

// EnvVar is one environment variable.
type EnvVar struct {
	// Name of the variable.
	Name string `json:"name"`
	// Value, with $(VAR) references to earlier variables expanded.
	Value string `json:"value,omitempty"`
	// ValueFrom reads the value from a field, ConfigMap or Secret.
	ValueFrom *EnvVarSource `json:"valueFrom,omitempty"`
}

// EnvVarSource is where an env value comes from.
type EnvVarSource struct {
	// FieldRef: metadata.name, metadata.namespace, metadata.uid, spec.nodeName, status.podIP, status.hostIP.
	FieldRef *ObjectFieldSelector `json:"fieldRef,omitempty"`
	// ResourceFieldRef: limits.cpu, limits.memory, requests.cpu, requests.memory.
	ResourceFieldRef *ResourceFieldSelector `json:"resourceFieldRef,omitempty"`
	// ConfigMapKeyRef selects a key of a ConfigMap.
	ConfigMapKeyRef *KeySelector `json:"configMapKeyRef,omitempty"`
	// SecretKeyRef selects a key of a Secret.
	SecretKeyRef *KeySelector `json:"secretKeyRef,omitempty"`
}

// ObjectFieldSelector selects a field of the pod.
type ObjectFieldSelector struct {
	APIVersion string `json:"apiVersion,omitempty"`
	// FieldPath, e.g. metadata.name.
	FieldPath string `json:"fieldPath"`
}

// ResourceFieldSelector selects a container's resource limit or request.
type ResourceFieldSelector struct {
	ContainerName string    `json:"containerName,omitempty"`
	Resource      string    `json:"resource"`
	Divisor       *Quantity `json:"divisor,omitempty"`
}

// KeySelector selects one key of a ConfigMap or Secret.
type KeySelector struct {
	// Name of the ConfigMap or Secret, in the pod's namespace.
	Name string `json:"name"`
	// Key within it.
	Key string `json:"key"`
	// Optional: a missing object or key is not an error.
	Optional *bool `json:"optional,omitempty"`
}

// EnvFromSource imports every key of a ConfigMap or Secret.
type EnvFromSource struct {
	// Prefix added to each variable name.
	Prefix       string               `json:"prefix,omitempty"`
	ConfigMapRef *LocalObjectRefOptnl `json:"configMapRef,omitempty"`
	SecretRef    *LocalObjectRefOptnl `json:"secretRef,omitempty"`
}

// LocalObjectRefOptnl names an object in the same namespace, maybe optional.
type LocalObjectRefOptnl struct {
	Name     string `json:"name"`
	Optional *bool  `json:"optional,omitempty"`
}

// ResourceRequirements are a container's requests and limits.
type ResourceRequirements struct {
	// Limits cap what the container may use (cgroups); extended resources
	// (nvidia.com/gpu) are requested here and are whole units.
	Limits ResourceList `json:"limits,omitempty"`
	// Requests are what the scheduler reserves; they default to Limits.
	Requests ResourceList `json:"requests,omitempty"`
	// Claims: entries of the pod's spec.resourceClaims whose devices this
	// container gets (DRA).
	Claims []ContainerResourceClaim `json:"claims,omitempty"`
}

// VolumeMount mounts a pod volume in a container.
type VolumeMount struct {
	// Name of the pod volume.
	Name string `json:"name"`
	// MountPath inside the container.
	MountPath string `json:"mountPath"`
	// SubPath mounts one file or directory of the volume instead of its root.
	SubPath string `json:"subPath,omitempty"`
	// ReadOnly mount.
	ReadOnly bool `json:"readOnly,omitempty"`
}

// Volume is storage a pod's containers can mount.
type Volume struct {
	// Name, unique in the pod.
	Name string `json:"name"`
	// ConfigMap files.
	ConfigMap *ConfigMapVolumeSource `json:"configMap,omitempty"`
	// Secret files.
	Secret *SecretVolumeSource `json:"secret,omitempty"`
	// EmptyDir: scratch space that lives as long as the pod.
	EmptyDir *EmptyDirVolumeSource `json:"emptyDir,omitempty"`
	// HostPath: a file or directory of the node.
	HostPath *HostPathVolumeSource `json:"hostPath,omitempty"`
	// Projected: several sources in one directory (serviceaccount.go).
	Projected *ProjectedVolumeSource `json:"projected,omitempty"`
	// PersistentVolumeClaim: the volume bound to a claim of the pod's
	// namespace (storage.go); it outlives the pod.
	PersistentVolumeClaim *PersistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
}

// ConfigMapVolumeSource projects a ConfigMap's keys as files.
type ConfigMapVolumeSource struct {
	// Name of the ConfigMap.
	Name string `json:"name"`
	// Items choose keys and their file paths; default: every key as a file of its name.
	Items []KeyToPath `json:"items,omitempty"`
	// DefaultMode of the files (default 0644).
	DefaultMode *int32 `json:"defaultMode,omitempty"`
	// Optional: a missing ConfigMap gives an empty volume.
	Optional *bool `json:"optional,omitempty"`
}

// SecretVolumeSource projects a Secret's keys as files.
type SecretVolumeSource struct {
	// SecretName of the Secret.
	SecretName string `json:"secretName"`
	// Items choose keys and their file paths.
	Items []KeyToPath `json:"items,omitempty"`
	// DefaultMode of the files (default 0644).
	DefaultMode *int32 `json:"defaultMode,omitempty"`
	// Optional: a missing Secret gives an empty volume.
	Optional *bool `json:"optional,omitempty"`
}

// KeyToPath maps a key to a relative file path.
type KeyToPath struct {
	Key  string `json:"key"`
	Path string `json:"path"`
	Mode *int32 `json:"mode,omitempty"`
}

// EmptyDirVolumeSource is scratch space.
type EmptyDirVolumeSource struct {
	// Medium: "" (node disk) or "Memory" (tmpfs).
	Medium string `json:"medium,omitempty"`
	// SizeLimit of the volume.
	SizeLimit *Quantity `json:"sizeLimit,omitempty"`
}

// HostPathVolumeSource mounts a node path.
type HostPathVolumeSource struct {
	// Path on the node.
	Path string `json:"path"`
	// Type: "", DirectoryOrCreate, Directory, FileOrCreate, File, Socket, CharDevice, BlockDevice.
	Type *string `json:"type,omitempty"`
}

// Probe checks a container: exactly one of Exec, HTTPGet, TCPSocket.
type Probe struct {
	Exec      *ExecAction      `json:"exec,omitempty"`
	HTTPGet   *HTTPGetAction   `json:"httpGet,omitempty"`
	TCPSocket *TCPSocketAction `json:"tcpSocket,omitempty"`
	// InitialDelaySeconds before the first check.
	InitialDelaySeconds int32 `json:"initialDelaySeconds,omitempty"`
	// TimeoutSeconds per check (default 1).
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
	// PeriodSeconds between checks (default 10).
	PeriodSeconds int32 `json:"periodSeconds,omitempty"`
	// SuccessThreshold consecutive successes to pass (default 1).
	SuccessThreshold int32 `json:"successThreshold,omitempty"`
	// FailureThreshold consecutive failures to fail (default 3).
	FailureThreshold int32 `json:"failureThreshold,omitempty"`
	// TerminationGracePeriodSeconds overrides the pod's on liveness failure.
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// ExecAction runs a command in the container; exit 0 is success.
type ExecAction struct {
	Command []string `json:"command,omitempty"`
}

// HTTPGetAction: a status from 200 to 399 is success.
type HTTPGetAction struct {
	Path        string       `json:"path,omitempty"`
	Port        IntOrString  `json:"port"`
	Host        string       `json:"host,omitempty"`
	Scheme      string       `json:"scheme,omitempty"`
	HTTPHeaders []HTTPHeader `json:"httpHeaders,omitempty"`
}

// HTTPHeader is a header of an HTTP probe.
type HTTPHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// TCPSocketAction: a successful connect is success.
type TCPSocketAction struct {
	Port IntOrString `json:"port"`
	Host string      `json:"host,omitempty"`
}

// Affinity holds scheduling affinity rules.
type Affinity struct {
	// NodeAffinity constrains or prefers nodes by label.
	NodeAffinity *NodeAffinity `json:"nodeAffinity,omitempty"`
	// PodAffinity: run in the same topology domain as pods matching a
	// selector (InterPodAffinity).
	PodAffinity *PodAffinity `json:"podAffinity,omitempty"`
	// PodAntiAffinity: stay out of the topology domains of pods matching
	// a selector (InterPodAffinity).
	PodAntiAffinity *PodAntiAffinity `json:"podAntiAffinity,omitempty"`
}

// PodAffinity: required terms filter nodes, preferred terms score them.
type PodAffinity struct {
	// RequiredDuringSchedulingIgnoredDuringExecution: every term must be
	// met by a node's domain.
	RequiredDuringSchedulingIgnoredDuringExecution []PodAffinityTerm `json:"requiredDuringSchedulingIgnoredDuringExecution,omitempty"`
	// PreferredDuringSchedulingIgnoredDuringExecution: each term met adds
	// its weight to the node's score.
	PreferredDuringSchedulingIgnoredDuringExecution []WeightedPodAffinityTerm `json:"preferredDuringSchedulingIgnoredDuringExecution,omitempty"`
}

// PodAntiAffinity: as PodAffinity, with the opposite meaning.
type PodAntiAffinity struct {
	// RequiredDuringSchedulingIgnoredDuringExecution: no term may be met
	// by a node's domain.
	RequiredDuringSchedulingIgnoredDuringExecution []PodAffinityTerm `json:"requiredDuringSchedulingIgnoredDuringExecution,omitempty"`
	// PreferredDuringSchedulingIgnoredDuringExecution: each term met
	// subtracts its weight from the node's score.
	PreferredDuringSchedulingIgnoredDuringExecution []WeightedPodAffinityTerm `json:"preferredDuringSchedulingIgnoredDuringExecution,omitempty"`
}

// PodAffinityTerm: the pods matching LabelSelector in Namespaces (or
// NamespaceSelector; neither: the pod's own namespace), counted per
// domain of the node label TopologyKey.
type PodAffinityTerm struct {
	LabelSelector *LabelSelector `json:"labelSelector,omitempty"`
	Namespaces    []string       `json:"namespaces,omitempty"`
	TopologyKey   string         `json:"topologyKey"`
	// NamespaceSelector: namespaces by label; {} is every namespace.
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`
	// MatchLabelKeys: the pod's own values of these labels are added to
	// LabelSelector (key In [value]); MismatchLabelKeys: key NotIn [value].
	MatchLabelKeys    []string `json:"matchLabelKeys,omitempty"`
	MismatchLabelKeys []string `json:"mismatchLabelKeys,omitempty"`
}

// WeightedPodAffinityTerm is a preferred term with its weight (1-100).
type WeightedPodAffinityTerm struct {
	Weight          int32           `json:"weight"`
	PodAffinityTerm PodAffinityTerm `json:"podAffinityTerm"`
}

// TopologySpreadConstraint: the pods LabelSelector matches in the pod's
// namespace, counted per domain of the node label TopologyKey, may differ
// by at most MaxSkew between domains once this pod is placed.
type TopologySpreadConstraint struct {
	MaxSkew     int32  `json:"maxSkew"`
	TopologyKey string `json:"topologyKey"`
	// WhenUnsatisfiable: DoNotSchedule (a filter) or ScheduleAnyway (a score).
	WhenUnsatisfiable string         `json:"whenUnsatisfiable"`
	LabelSelector     *LabelSelector `json:"labelSelector,omitempty"`
	// MinDomains: with fewer eligible domains, the global minimum counts
	// as 0 (DoNotSchedule only).
	MinDomains *int32 `json:"minDomains,omitempty"`
	// NodeAffinityPolicy: Honor (default: only nodes matching the pod's
	// nodeSelector and node affinity count) or Ignore.
	NodeAffinityPolicy *string `json:"nodeAffinityPolicy,omitempty"`
	// NodeTaintsPolicy: Ignore (default) or Honor (nodes whose taints the
	// pod does not tolerate do not count).
	NodeTaintsPolicy *string `json:"nodeTaintsPolicy,omitempty"`
	// MatchLabelKeys: the pod's own values of these labels narrow
	// LabelSelector (key In [value]), e.g. pod-template-hash.
	MatchLabelKeys []string `json:"matchLabelKeys,omitempty"`
}

// Topology spread values, as Kubernetes.
const (
	DoNotSchedule  = "DoNotSchedule"
	ScheduleAnyway = "ScheduleAnyway"
	PolicyHonor    = "Honor"
	PolicyIgnore   = "Ignore"
)

// NodeAffinity: required rules filter nodes, preferred rules score them.
type NodeAffinity struct {
	// RequiredDuringSchedulingIgnoredDuringExecution: the node must match one term.
	RequiredDuringSchedulingIgnoredDuringExecution *NodeSelector `json:"requiredDuringSchedulingIgnoredDuringExecution,omitempty"`
	// PreferredDuringSchedulingIgnoredDuringExecution: matching terms add their weight to the node's score.
	PreferredDuringSchedulingIgnoredDuringExecution []PreferredSchedulingTerm `json:"preferredDuringSchedulingIgnoredDuringExecution,omitempty"`
}

// NodeSelector is a list of terms, ORed.
type NodeSelector struct {
	NodeSelectorTerms []NodeSelectorTerm `json:"nodeSelectorTerms"`
}

// NodeSelectorTerm: all expressions must match (ANDed).
type NodeSelectorTerm struct {
	MatchExpressions []NodeSelectorRequirement `json:"matchExpressions,omitempty"`
	MatchFields      []NodeSelectorRequirement `json:"matchFields,omitempty"`
}

// NodeSelectorRequirement: key, operator (In, NotIn, Exists, DoesNotExist, Gt, Lt), values.
type NodeSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// PreferredSchedulingTerm is a weighted preference (weight 1-100).
type PreferredSchedulingTerm struct {
	Weight     int32            `json:"weight"`
	Preference NodeSelectorTerm `json:"preference"`
}

// Toleration lets a pod tolerate a taint.
type Toleration struct {
	// Key of the taint; empty with Exists matches every taint.
	Key string `json:"key,omitempty"`
	// Operator: Equal (default) or Exists.
	Operator string `json:"operator,omitempty"`
	// Value to equal.
	Value string `json:"value,omitempty"`
	// Effect to match; empty matches all effects.
	Effect string `json:"effect,omitempty"`
	// TolerationSeconds bounds how long a NoExecute taint is tolerated.
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// PodStatus is the observed state of a pod.
type PodStatus struct {
	// Phase: Pending, Running, Succeeded, Failed or Unknown.
	Phase string `json:"phase,omitempty"`
	// Conditions: PodScheduled, Initialized, ContainersReady, Ready.
	Conditions []PodCondition `json:"conditions,omitempty"`
	// Message about why the pod is in this state.
	Message string `json:"message,omitempty"`
	// Reason in one CamelCase word, e.g. Evicted, OutOfgpu.
	Reason string `json:"reason,omitempty"`
	// HostIP of the node.
	HostIP string `json:"hostIP,omitempty"`
	// PodIP assigned by the network plugin.
	PodIP string `json:"podIP,omitempty"`
	// PodIPs: all pod IPs (one here).
	PodIPs []PodIP `json:"podIPs,omitempty"`
	// StartTime when the node accepted the pod.
	StartTime *Time `json:"startTime,omitempty"`
	// InitContainerStatuses, one per init container.
	InitContainerStatuses []ContainerStatus `json:"initContainerStatuses,omitempty"`
	// ContainerStatuses, one per container.
	ContainerStatuses []ContainerStatus `json:"containerStatuses,omitempty"`
	// EphemeralContainerStatuses, one per ephemeral container the node
	// has started (or tried to).
	EphemeralContainerStatuses []ContainerStatus `json:"ephemeralContainerStatuses,omitempty"`
	// QOSClass: Guaranteed, Burstable or BestEffort.
	QOSClass string `json:"qosClass,omitempty"`
	// NominatedNodeName is set when preemption made room on a node for this pod.
	NominatedNodeName string `json:"nominatedNodeName,omitempty"`
	// ResourceClaimStatuses: the claims made from templates for this pod.
	ResourceClaimStatuses []PodResourceClaimStatus `json:"resourceClaimStatuses,omitempty"`
}

// PodIP is one IP of a pod.
type PodIP struct {
	IP string `json:"ip"`
}

// PodCondition is one condition of a pod.
type PodCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastProbeTime      Time   `json:"lastProbeTime,omitempty"`
	LastTransitionTime Time   `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

// ContainerStatus is the observed state of one container.
type ContainerStatus struct {
	Name                 string         `json:"name"`
	State                ContainerState `json:"state,omitempty"`
	LastTerminationState ContainerState `json:"lastState,omitempty"`
	Ready                bool           `json:"ready"`
	RestartCount         int32          `json:"restartCount"`
	Image                string         `json:"image"`
	ImageID              string         `json:"imageID"`
	ContainerID          string         `json:"containerID,omitempty"`
	Started              *bool          `json:"started,omitempty"`
	// AllocatedDevices lists device IDs (e.g. GPU UUIDs) held by the container, by resource.
	AllocatedResources ResourceList `json:"allocatedResources,omitempty"`
}

// ContainerState: at most one of Waiting, Running, Terminated.
type ContainerState struct {
	Waiting    *ContainerStateWaiting    `json:"waiting,omitempty"`
	Running    *ContainerStateRunning    `json:"running,omitempty"`
	Terminated *ContainerStateTerminated `json:"terminated,omitempty"`
}

// ContainerStateWaiting: reason such as ContainerCreating, ErrImagePull, ImagePullBackOff, CrashLoopBackOff.
type ContainerStateWaiting struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// ContainerStateRunning: since when.
type ContainerStateRunning struct {
	StartedAt Time `json:"startedAt,omitempty"`
}

// ContainerStateTerminated: exit code and reason (Completed, Error, OOMKilled).
type ContainerStateTerminated struct {
	ExitCode    int32  `json:"exitCode"`
	Signal      int32  `json:"signal,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Message     string `json:"message,omitempty"`
	StartedAt   Time   `json:"startedAt,omitempty"`
	FinishedAt  Time   `json:"finishedAt,omitempty"`
	ContainerID string `json:"containerID,omitempty"`
}

// Pod phases.
const (
	PodPending   = "Pending"
	PodRunning   = "Running"
	PodSucceeded = "Succeeded"
	PodFailed    = "Failed"
	PodUnknown   = "Unknown"
)

// Pod condition types.
const (
	PodScheduled    = "PodScheduled"
	PodInitialized  = "Initialized"
	ContainersReady = "ContainersReady"
	PodReady        = "Ready"
)

// Condition statuses.
const (
	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"
)

// Binding binds a pod to a node: POST pods/NAME/binding (the scheduler's Bind step).
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type Binding struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Target is the node: {"kind":"Node","name":"node-1"}.
	Target ObjectReference `json:"target"`
}

// ObjectReference points at any object.
type ObjectReference struct {
	Kind            string `json:"kind,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	UID             string `json:"uid,omitempty"`
	APIVersion      string `json:"apiVersion,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	FieldPath       string `json:"fieldPath,omitempty"`
}
