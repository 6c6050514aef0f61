package api

import (
	"encoding/base64"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func mustDecode(tb testing.TB, y string) Object {
	tb.Helper()
	o, _, err := DecodeAny([]byte(y))
	if err != nil {
		tb.Fatalf("decode: %v", err)
	}
	return o
}

func TestSetDefaults(t *testing.T) {
	d := mustDecode(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx
        ports: [{containerPort: 80}]
        resources: {limits: {cpu: 500m, nvidia.com/gpu: 1}, requests: {cpu: 100m}}
        readinessProbe: {httpGet: {port: 80}}
      - {name: pinned, image: "registry:5000/app:v1"}
      - {name: digest, image: "app@sha256:abc"}
      - {name: latest, image: "registry:5000/app"}
`).(*Deployment)
	SetDefaults(d)
	s := d.Spec
	if *s.Replicas != 1 || *s.RevisionHistoryLimit != 10 || *s.ProgressDeadlineSeconds != 600 {
		t.Errorf("deployment defaults: %+v", s)
	}
	if s.Strategy.Type != RollingUpdate || s.Strategy.RollingUpdate.MaxSurge.String() != "25%" || s.Strategy.RollingUpdate.MaxUnavailable.String() != "25%" {
		t.Errorf("strategy: %+v", s.Strategy)
	}
	ps := s.Template.Spec
	if ps.RestartPolicy != "Always" || *ps.TerminationGracePeriodSeconds != 30 || ps.DNSPolicy != "ClusterFirst" ||
		ps.SchedulerName != "default-scheduler" || !*ps.EnableServiceLinks {
		t.Errorf("pod spec defaults: %+v", ps)
	}
	c := ps.Containers[0]
	if c.ImagePullPolicy != "Always" || c.Ports[0].Protocol != "TCP" || c.TerminationMessagePath != "/dev/termination-log" || c.TerminationMessagePolicy != "File" {
		t.Errorf("container defaults: %+v", c)
	}
	if q := c.Resources.Requests["cpu"]; q.String() != "100m" {
		t.Errorf("explicit request overwritten: %v", q.String())
	}
	if q := c.Resources.Requests["nvidia.com/gpu"]; q.String() != "1" {
		t.Errorf("gpu request not defaulted to limit: %v", c.Resources.Requests)
	}
	if p := c.ReadinessProbe; p.TimeoutSeconds != 1 || p.PeriodSeconds != 10 || p.SuccessThreshold != 1 || p.FailureThreshold != 3 || p.HTTPGet.Path != "/" || p.HTTPGet.Scheme != "HTTP" {
		t.Errorf("probe defaults: %+v", p)
	}
	for i, want := range []string{"Always", "IfNotPresent", "IfNotPresent", "Always"} {
		if got := ps.Containers[i].ImagePullPolicy; got != want {
			t.Errorf("%s: imagePullPolicy %s, want %s", ps.Containers[i].Image, got, want)
		}
	}

	svc := mustDecode(t, "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80}, {port: 81, targetPort: http}]}\n").(*Service)
	SetDefaults(svc)
	if svc.Spec.Type != "ClusterIP" || svc.Spec.SessionAffinity != "None" || svc.Spec.Ports[0].Protocol != "TCP" ||
		svc.Spec.Ports[0].TargetPort.IntValue() != 80 || svc.Spec.Ports[1].TargetPort.String() != "http" {
		t.Errorf("service defaults: %+v", svc.Spec)
	}

	sec := mustDecode(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {a: b}\ndata: {c: ZA==}\n").(*Secret)
	SetDefaults(sec)
	if sec.Type != "Opaque" || string(sec.Data["a"]) != "b" || string(sec.Data["c"]) != "d" || sec.StringData != nil {
		t.Errorf("secret defaults: %+v", sec)
	}

	ns := mustDecode(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: gpu-demo}\n").(*Namespace)
	SetDefaults(ns)
	if ns.Status.Phase != "Active" || ns.Labels[LabelNamespaceName] != "gpu-demo" || ns.Namespace != "" {
		t.Errorf("namespace defaults: %+v", ns)
	}

	rs := mustDecode(t, "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: r}\nspec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}}\n").(*ReplicaSet)
	SetDefaults(rs)
	if *rs.Spec.Replicas != 1 || rs.Spec.Template.Spec.RestartPolicy != "Always" {
		t.Errorf("replicaset defaults: %+v", rs.Spec)
	}
}

func TestValidateCases(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings; none means valid
	}{
		{"pod ok", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}]}\n", nil},
		{"no containers", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {}\n", []string{"spec.containers: Required value"}},
		{"no name", "apiVersion: v1\nkind: Pod\nmetadata: {}\nspec: {containers: [{name: c, image: i}]}\n", []string{"metadata.name: Required value: name or generateName is required"}},
		{"label", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, labels: {\"bad key!\": v}}\n", []string{`metadata.labels: Invalid value: "bad key!": name part must consist of alphanumeric characters`}},
		{"container name", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: Web, image: i}]}\n", []string{`spec.containers[0].name: Invalid value: "Web": a lowercase RFC 1123 label`}},
		{"port", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, ports: [{containerPort: 0}]}]}\n", []string{"spec.containers[0].ports[0].containerPort: Invalid value: 0: must be between 1 and 65535, inclusive"}},
		{"volume types", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}], volumes: [{name: v, emptyDir: {}, configMap: {name: x}}]}\n", []string{"spec.volumes[0]: Forbidden: may not specify more than 1 volume type"}},
		{"no selector", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}}\n", []string{"spec.selector: Required value"}},
		{"strategy", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {strategy: {type: BlueGreen}, selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}}\n",
			[]string{`spec.strategy.type: Unsupported value: "BlueGreen": supported values: "Recreate", "RollingUpdate"`}},
		{"service name", "apiVersion: v1\nkind: Service\nmetadata: {name: 1web}\nspec: {ports: [{port: 80}]}\n", []string{`metadata.name: Invalid value: "1web": a DNS-1035 label`}},
		{"nodePort on ClusterIP", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80, nodePort: 30001}]}\n", []string{"spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"}},
		{"dup port names", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{name: a, port: 80}, {name: a, port: 81}]}\n", []string{`spec.ports[1].name: Duplicate value: "a"`}},
		{"gpu request without limit", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, resources: {requests: {nvidia.com/gpu: 1}}}]}\n",
			[]string{"spec.containers[0].resources.limits[nvidia.com/gpu]: Required value: Limit must be set for non overcommitable resources"}},
		{"negative quantity", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, resources: {limits: {memory: -1Gi}}}]}\n",
			[]string{`spec.containers[0].resources.limits[memory]: Invalid value: "-1Gi": must be greater than or equal to 0`}},
		{"bare resource name", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, resources: {limits: {gpu: 1}}}]}\n",
			[]string{`must be a standard resource type or fully qualified`}},
		{"affinity", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}], affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: k, operator: Like, values: [x]}]}]}}}}\n",
			[]string{`matchExpressions[0].operator: Unsupported value: "Like"`}},
		{"probe handler", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, livenessProbe: {periodSeconds: 5}}]}\n",
			[]string{"spec.containers[0].livenessProbe: Required value: must specify a handler type"}},
		{"env name", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, env: [{name: \"A=B\"}]}]}\n", []string{`spec.containers[0].env[0].name: Invalid value: "A=B"`}},
		{"fieldRef labels key", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, env: [{name: A, valueFrom: {fieldRef: {fieldPath: \"metadata.labels['app']\"}}}]}]}\n", nil},
		{"node taint", "apiVersion: v1\nkind: Node\nmetadata: {name: node1}\nspec: {taints: [{key: gpu, effect: Sometimes}]}\n", []string{`spec.taints[0].effect: Unsupported value: "Sometimes"`}},
		{"cluster-scoped namespace", "apiVersion: v1\nkind: Node\nmetadata: {name: node1, namespace: x}\n", []string{"metadata.namespace: Forbidden: not allowed on this type"}},
		{"event", "apiVersion: v1\nkind: Event\nmetadata: {name: e}\ninvolvedObject: {kind: Pod, name: p}\ntype: Bad\n", []string{`type: Unsupported value: "Bad"`}},
		{"configmap key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {\"a b\": x}\n", []string{`data: Invalid value: "a b": a valid config key must consist of alphanumeric characters`}},
		{"configmap too long", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: " + strings.Repeat("x", 1<<19) + ", b: " + strings.Repeat("y", 1<<19+1) + "}\n",
			[]string{`data: Too long: may not be more than 1048576 bytes`}},
		{"configmap binaryData too long", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\nbinaryData: {a: " + base64.StdEncoding.EncodeToString(make([]byte, 1<<20+1)) + "}\n",
			[]string{`binaryData: Too long: may not be more than 1048576 bytes`}},
		{"configmap at the limit", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: " + strings.Repeat("x", 1<<20) + "}\n", nil},
		{"node allocatable out of range", "apiVersion: v1\nkind: Node\nmetadata: {name: node1}\nstatus: {capacity: {nvidia.com/gpu: 1e400}, allocatable: {cpu: \"9223372036854776\", memory: -1}}\n",
			[]string{`status.capacity[nvidia.com/gpu]: Invalid value: "10e399": must be less than or equal to 9223372036854775807`,
				`status.allocatable[cpu]: Invalid value: "9223372036854776": must be less than or equal to 9223372036854775807m`,
				`status.allocatable[memory]: Invalid value: "-1": must be greater than or equal to 0`}},
		{"dnsPolicy None needs dnsConfig", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {dnsPolicy: None, containers: [{name: c, image: i}]}\n",
			[]string{"spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"}},
		{"dnsPolicy None needs a nameserver", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {dnsPolicy: None, dnsConfig: {searches: [a.example]}, containers: [{name: c, image: i}]}\n",
			[]string{"spec.dnsConfig.nameservers: Required value: must provide at least one DNS nameserver when `dnsPolicy` is None"}},
		{"dnsConfig", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {dnsPolicy: Bad, dnsConfig: {nameservers: [1.1.1.1, 2.2.2.2, 3.3.3.3, x], searches: [\"Bad_Name\", ok.example.], options: [{value: \"1\"}]}, containers: [{name: c, image: i}]}\n",
			[]string{`spec.dnsPolicy: Unsupported value: "Bad": supported values: "ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"`,
				`spec.dnsConfig.nameservers: Invalid value: `, `must not have more than 3 nameservers`,
				`spec.dnsConfig.nameservers[3]: Invalid value: "x": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`,
				`spec.dnsConfig.searches[0]: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain`,
				"spec.dnsConfig.options[0]: Required value: Option.Name must not be empty"}},
		{"dnsConfig of the docs", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {dnsPolicy: None, dnsConfig: {nameservers: [192.0.2.1], searches: [ns1.svc.cluster-domain.example, my.dns.search.suffix], options: [{name: ndots, value: \"2\"}, {name: edns0}]}, containers: [{name: c, image: i}]}\n", nil},
		{"largest quantities", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, resources: {limits: {cpu: 9223372036854775807m, memory: \"9223372036854775807\", nvidia.com/gpu: \"9223372036854775807\"}}}]}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := mustDecode(t, tt.yaml)
			SetDefaults(o)
			errs := Validate(o)
			if len(tt.want) == 0 {
				if len(errs) > 0 {
					t.Fatalf("unexpected: %v", errs)
				}
				return
			}
			for _, w := range tt.want {
				if !strings.Contains(errs.Error(), w) {
					t.Errorf("missing %q in %v", w, errs)
				}
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	deploy := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: ns, uid: u1}\nspec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b, c: d}}, spec: {containers: [{name: c, image: i}]}}}\n"
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: p, uid: u1}\nspec: {nodeName: n1, containers: [{name: c, image: i}], tolerations: [{key: a, operator: Exists}]}\n"
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\nimmutable: true\ndata: {a: b}\n"
	tests := []struct {
		name   string
		old    string
		change func(Object)
		want   string // "" means allowed
	}{
		{"deployment replicas", deploy, func(o Object) { o.(*Deployment).Spec.Replicas = ptr[int32](5) }, ""},
		{"deployment selector", deploy, func(o Object) { o.(*Deployment).Spec.Selector.MatchLabels["c"] = "d" }, "spec.selector: Invalid value: api.LabelSelector{"},
		{"name", deploy, func(o Object) { o.GetObjectMeta().Name = "e" }, `metadata.name: Invalid value: "e": field is immutable`},
		{"uid", deploy, func(o Object) { o.GetObjectMeta().UID = "u2" }, `metadata.uid: Invalid value: "u2": field is immutable`},
		{"pod image", pod, func(o Object) { o.(*Pod).Spec.Containers[0].Image = "j" }, ""},
		{"pod toleration added", pod, func(o Object) {
			p := o.(*Pod)
			p.Spec.Tolerations = append(p.Spec.Tolerations, Toleration{Key: "b", Operator: "Exists"})
		}, ""},
		{"pod toleration removed", pod, func(o Object) { o.(*Pod).Spec.Tolerations = nil }, "spec.tolerations: Forbidden"},
		{"pod resources", pod, func(o Object) {
			o.(*Pod).Spec.Containers[0].Resources.Limits = ResourceList{"cpu": resource.MustParse("1")}
		}, "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"},
		{"pod node", pod, func(o Object) { o.(*Pod).Spec.NodeName = "n2" }, "changed: spec.nodeName"},
		{"immutable configmap", cm, func(o Object) { o.(*ConfigMap).Data["a"] = "c" }, "data: Forbidden: field is immutable when `immutable` is set"},
		{"immutable configmap labels", cm, func(o Object) { o.GetObjectMeta().Labels = map[string]string{"x": "y"} }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := mustDecode(t, tt.old)
			SetDefaults(old)
			n := Clone(old)
			tt.change(n)
			errs := ValidateUpdate(n, old)
			if tt.want == "" {
				if len(errs) > 0 {
					t.Fatalf("unexpected: %v", errs)
				}
				return
			}
			if !strings.Contains(errs.Error(), tt.want) {
				t.Fatalf("missing %q in %v", tt.want, errs)
			}
		})
	}
}

func TestImageTag(t *testing.T) {
	for image, want := range map[string]string{
		"nginx": "latest", "nginx:alpine": "alpine", "nginx:latest": "latest", "localhost:5000/x": "latest",
		"localhost:5000/x:1.0": "1.0", "x@sha256:00": "", "x:1@sha256:00": "1",
	} {
		if got := imageTag(image); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", image, got, want)
		}
	}
}

// A status write compares no pod spec (the API server copied it from the
// stored pod), and checks the rest as ValidateUpdate does: immutable
// metadata, and the object itself.
func TestValidateStatusUpdate(t *testing.T) {
	old := mustDecode(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: p, uid: u1}\nspec: {nodeName: n1, containers: [{name: c, image: i}]}\n")
	SetDefaults(old)
	n := Clone(old)
	n.(*Pod).Spec.NodeName = "n2"
	if errs := ValidateUpdate(n, old); !strings.Contains(errs.Error(), "changed: spec.nodeName") {
		t.Fatalf("ValidateUpdate: %v, want the spec compared", errs)
	}
	if errs := ValidateStatusUpdate(n, old); len(errs) > 0 {
		t.Fatalf("ValidateStatusUpdate compared the spec: %v", errs)
	}
	n = Clone(old)
	n.GetObjectMeta().Name = "q"
	if errs := ValidateStatusUpdate(n, old); !strings.Contains(errs.Error(), `metadata.name: Invalid value: "q": field is immutable`) {
		t.Fatalf("ValidateStatusUpdate of a renamed pod: %v", errs)
	}
	n = Clone(old)
	n.(*Pod).Spec.Containers[0].Name = "Not_A_Name"
	if errs := ValidateStatusUpdate(n, old); len(errs) == 0 {
		t.Fatal("ValidateStatusUpdate passed an invalid pod: the object itself is still validated")
	}
}

// A projected volume's errors name their fields as Kubernetes does; the
// API access volume every pod gets has none. (validateProjected joins a
// field's path only for an error.)
func TestValidateProjectedVolumeErrors(t *testing.T) {
	pod := func(mutate func(pv *ProjectedVolumeSource)) *Pod {
		v := APIAccessVolume("kube-api-access-x7k2p")
		if mutate != nil {
			mutate(v.Projected)
		}
		p := &Pod{ObjectMeta: ObjectMeta{Name: "p", Namespace: "room"},
			Spec: PodSpec{Containers: []Container{{Name: "c", Image: "busybox"}}, Volumes: []Volume{v}}}
		SetTypeMeta(p)
		SetDefaults(p)
		return p
	}
	if errs := Validate(pod(nil)); len(errs) > 0 {
		t.Fatalf("the API access volume: %v", errs)
	}
	short, bad := int64(60), int32(0o1000)
	const vp = "spec.volumes[0].projected"
	for _, c := range []struct {
		name   string
		mutate func(pv *ProjectedVolumeSource)
		want   []string
	}{
		{"a short token", func(pv *ProjectedVolumeSource) { pv.Sources[0].ServiceAccountToken.ExpirationSeconds = &short },
			[]string{vp + ".sources[0].serviceAccountToken.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"}},
		{"an absolute token path", func(pv *ProjectedVolumeSource) { pv.Sources[0].ServiceAccountToken.Path = "/token" },
			[]string{vp + `.sources[0].serviceAccountToken.path: Invalid value: "/token": must be a relative path`}},
		{"a configMap item with ..", func(pv *ProjectedVolumeSource) { pv.Sources[1].ConfigMap.Items[0].Path = "../ca.crt" },
			[]string{vp + `.sources[1].configMap.items[0].path: Invalid value: "../ca.crt": must not contain '..'`,
				vp + `.sources[1].configMap.items.path: Invalid value: "../ca.crt": must not contain '..'`}},
		{"a configMap item without a key", func(pv *ProjectedVolumeSource) { pv.Sources[1].ConfigMap.Items[0].Key = "" },
			[]string{vp + ".sources[1].configMap.items[0].key: Required value"}},
		{"a downward item's mode", func(pv *ProjectedVolumeSource) { pv.Sources[2].DownwardAPI.Items[0].Mode = &bad },
			[]string{vp + ".sources[2].downwardAPI.items[0].mode: Invalid value: 512: must be a number between 0 and 0777 (octal), both inclusive"}},
		{"a downward item of another field", func(pv *ProjectedVolumeSource) {
			pv.Sources[2].DownwardAPI.Items[0].FieldRef.FieldPath = "spec.nodeName"
		}, []string{vp + `.sources[2].downwardAPI.items[0].fieldRef.fieldPath: Unsupported value: "spec.nodeName": supported values: "metadata.name", "metadata.namespace", "metadata.uid"`}},
		{"a duplicate path", func(pv *ProjectedVolumeSource) { pv.Sources[2].DownwardAPI.Items[0].Path = "token" },
			[]string{vp + `.sources[2].downwardAPI.items[0].path: Invalid value: "token": conflicting duplicate paths`}},
		{"a source of two kinds", func(pv *ProjectedVolumeSource) { pv.Sources[0].ConfigMap = pv.Sources[1].ConfigMap },
			[]string{vp + ".sources[0]: Forbidden: may not specify more than 1 volume type per source",
				vp + `.sources[1].configMap.items.path: Invalid value: "ca.crt": conflicting duplicate paths`}},
		{"a source of no kind", func(pv *ProjectedVolumeSource) { pv.Sources = append(pv.Sources, VolumeProjection{}) },
			[]string{vp + ".sources[3]: Required value: must specify at least 1 volume type per source"}},
		{"a default mode", func(pv *ProjectedVolumeSource) { pv.DefaultMode = &bad },
			[]string{vp + ".defaultMode: Invalid value: 512: must be a number between 0 and 0777 (octal), both inclusive"}},
	} {
		var got []string
		for _, e := range Validate(pod(c.mutate)) {
			got = append(got, e.Error())
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}
