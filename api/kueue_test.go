package api

import (
	"os"
	"strings"
	"testing"
)

func TestKueueDecodeAndValidate(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr string // substring of the decode or validation error; "" valid
		check   func(t *testing.T, o Object)
	}{
		{name: "v1beta1 cohort is v1beta2 cohortName", yaml: `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohort: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1, borrowingLimit: 1}]}]`,
			check: func(t *testing.T, o Object) {
				if cq := o.(*ClusterQueue); cq.Spec.CohortName != "research" || cq.APIVersion != "kueue.x-k8s.io/v1beta2" {
					t.Errorf("cohortName %q apiVersion %q", cq.Spec.CohortName, cq.APIVersion)
				}
			}},
		{name: "v1beta1 priorityClassName is priorityClassRef", yaml: `
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: w, namespace: default}
spec:
  priorityClassName: high
  priorityClassSource: scheduling.k8s.io/priorityclass
  priority: 10
  podSets: [{name: main, count: 1, template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}]`,
			check: func(t *testing.T, o Object) {
				if r := o.(*Workload).Spec.PriorityClassRef; r == nil || r.Name != "high" || r.Kind != "PriorityClass" {
					t.Errorf("priorityClassRef %+v", r)
				}
			}},
		{name: "borrowingLimit needs a cohort", yaml: `
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1, borrowingLimit: 1}]}]`,
			wantErr: "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: Invalid value: \"1\": must be nil when cohort is empty"},
		{name: "each flavor lists every covered resource", yaml: `
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]`,
			wantErr: "flavors must have the same number of resources as the coveredResources"},
		{name: "resource names in coveredResources order", yaml: `
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors: [{name: f, resources: [{name: memory, nominalQuota: 1}, {name: cpu, nominalQuota: 1}]}]`,
			wantErr: "must match the name in coveredResources"},
		{name: "queueing strategy", yaml: `
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec: {queueingStrategy: FIFO}`,
			wantErr: `spec.queueingStrategy: Unsupported value: "FIFO"`},
		{name: "at most 8 node labels", yaml: `
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
spec: {nodeLabels: {a: "1", b: "1", c: "1", d: "1", e: "1", f: "1", g: "1", h: "1", i: "1"}}`,
			wantErr: "spec.nodeLabels: Too many: 9: must have at most 8 items"},
		{name: "topologyName needs nodeLabels", yaml: `
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
spec: {topologyName: default}`,
			wantErr: "at least one nodeLabel is required when topology is set"},
		{name: "hostname only at the lowest level", yaml: `
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: t}
spec: {levels: [{nodeLabel: kubernetes.io/hostname}, {nodeLabel: skiff.dev/nvlink-domain}]}`,
			wantErr: "the kubernetes.io/hostname label can only be used at the lowest level of topology"},
		{name: "fair sharing is refused by name", yaml: `
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec: {fairSharing: {weight: 1}}`,
			wantErr: "spec.fairSharing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _, err := DecodeAny([]byte(tt.yaml))
			if err == nil {
				SetDefaults(o)
				if errs := Validate(o); len(errs) > 0 {
					err = errs
				}
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
			if tt.check != nil && err == nil {
				tt.check(t, o)
			}
		})
	}
}

// Kueue's quick start and the homework files decode and validate unchanged.
func TestKueueExamples(t *testing.T) {
	for _, f := range []string{"../examples/kueue/single-clusterqueue-setup.yaml", "../examples/kueue/sample-job.yaml",
		"../examples/homework/task4-queues.yaml", "../examples/homework/task4-jobs.yaml"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range DecodeStream(data) {
			if d.Err != nil {
				t.Fatalf("%s: %v", f, d.Err)
			}
			if j, ok := d.Object.(*Job); ok {
				j.UID = "uid" // as the API server does on create
				GenerateJobSelector(j)
			}
			SetDefaults(d.Object)
			if errs := Validate(d.Object); len(errs) > 0 {
				t.Errorf("%s: %s: %v", f, d.Kind.Kind, errs)
			}
		}
	}
}
