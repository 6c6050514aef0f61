package kueue

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
)

const (
	domainLabel  = "skiff.dev/nvlink-domain"
	productLabel = "nvidia.com/gpu.product"
)

// gpuNode is a node of 8 GPUs in an NVLink domain.
func gpuNode(name, domain, product string) *api.Node {
	return &api.Node{ObjectMeta: api.ObjectMeta{Name: name, Labels: map[string]string{domainLabel: domain, "kubernetes.io/hostname": name, productLabel: product}},
		Status: api.NodeStatus{Allocatable: api.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), "cpu": resource.MustParse("64"), "memory": resource.MustParse("512Gi")}}}
}

// boundPod takes gpus GPUs of node.
func boundPod(name, node string, gpus int) *api.Pod {
	return &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "other"}, Spec: api.PodSpec{NodeName: node,
		Containers: []api.Container{{Name: "c", Image: "cuda", Resources: api.ResourceRequirements{
			Limits: api.ResourceList{"nvidia.com/gpu": resource.MustParse(fmt.Sprint(gpus))}}}}}, Status: api.PodStatus{Phase: api.PodRunning}}
}

// topologyJob is a Job of pods pods of gpus GPUs asking for one domain.
func topologyJob(name string, pods, gpus int, annotation string) *api.Job {
	j := gpuJob(jobSpec{name: name, queue: "user-queue", gpus: gpus})
	n := int32(pods)
	j.Spec.Parallelism, j.Spec.Completions = &n, &n
	if annotation != "" {
		j.Spec.Template.Annotations = map[string]string{annotation: domainLabel}
	}
	return j
}

// The pinning of a pod set to one domain: only a domain whose free GPUs
// (allocatable minus bound pods minus admitted, unplaced pods pinned
// there) hold every pod; of those the fullest (BestFit); a required
// request that fits nowhere waits with Kueue's words, a preferred one is
// admitted unpinned; a flavor without a topology refuses.
func TestTopologyPinning(t *testing.T) {
	topo := &api.Topology{ObjectMeta: api.ObjectMeta{Name: "gpu-fabric"}, Spec: api.TopologySpec{Levels: []api.TopologyLevel{{NodeLabel: domainLabel}, {NodeLabel: "kubernetes.io/hostname"}}}}
	tasFlavor := func() *api.ResourceFlavor {
		f := flavor("default-flavor")
		name := "gpu-fabric"
		f.Spec.TopologyName = &name
		f.Spec.NodeLabels = map[string]string{productLabel: "A100"}
		return f
	}
	// n5 is not of the flavor: its domain, the emptiest, is never chosen.
	nodes := []api.Object{gpuNode("n1", "nvl-a", "A100"), gpuNode("n2", "nvl-a", "A100"), gpuNode("n3", "nvl-b", "A100"), gpuNode("n4", "nvl-b", "A100"), gpuNode("n5", "nvl-c", "H100")}
	tests := []struct {
		name    string
		objs    []api.Object
		jobs    []*api.Job
		domains map[string]string // job: the domain pinned ("" admitted unpinned)
		pending map[string]string // job: part of its pending message
	}{
		{"the only domain with room", append([]api.Object{boundPod("p3", "n3", 4)}, nodes...),
			[]*api.Job{topologyJob("a", 2, 8, api.PodSetRequiredTopologyAnnotation)},
			map[string]string{"a": "nvl-a"}, nil},
		{"best fit: the fullest domain that fits", append([]api.Object{boundPod("p1", "n1", 4)}, nodes...),
			[]*api.Job{topologyJob("a", 1, 4, api.PodSetRequiredTopologyAnnotation)},
			map[string]string{"a": "nvl-a"}, nil},
		{"an admitted, unplaced job holds its domain", nodes,
			[]*api.Job{topologyJob("a", 2, 8, api.PodSetRequiredTopologyAnnotation), topologyJob("b", 2, 8, api.PodSetRequiredTopologyAnnotation)},
			map[string]string{"a": "nvl-a", "b": "nvl-b"}, nil},
		{"required fits nowhere", append([]api.Object{boundPod("p1", "n1", 1), boundPod("p3", "n3", 1)}, nodes...),
			[]*api.Job{topologyJob("a", 2, 8, api.PodSetRequiredTopologyAnnotation)},
			nil, map[string]string{"a": `couldn't assign flavors to pod set main: topology "gpu-fabric" allows to fit only 1 out of 2 pod(s)`}},
		{"preferred fits nowhere: admitted unpinned", append([]api.Object{boundPod("p1", "n1", 1), boundPod("p3", "n3", 1)}, nodes...),
			[]*api.Job{topologyJob("a", 2, 8, api.PodSetPreferredTopologyAnnotation)},
			map[string]string{"a": ""}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := append([]api.Object{topo, clusterQueue("cluster-queue", "", quota{nominal: "64"}), localQueue("user-queue", "cluster-queue")}, tt.objs...)
			w := newWorld(t, objs...)
			if _, err := w.c.Update(context.Background(), tasFlavor()); err != nil {
				t.Fatal(err)
			}
			for _, j := range tt.jobs {
				w.now = w.now.Add(1e9)
				if _, err := w.c.Create(context.Background(), j); err != nil {
					t.Fatal(err)
				}
				w.settle() // one after the other: a is admitted before b is seen
			}
			for job, want := range tt.domains {
				wl := w.workload(job)
				if !holdsQuota(wl) {
					t.Fatalf("%s not admitted: %s", job, pendingMessage(wl))
				}
				ta := wl.Status.Admission.PodSetAssignments[0].TopologyAssignment
				got := ""
				if ta != nil {
					got = *ta.Slices[0].ValuesPerLevel[0].Universal
					if ta.Levels[0] != domainLabel || *ta.Slices[0].PodCounts.Universal != *w.job(job).Spec.Parallelism {
						t.Errorf("%s topologyAssignment %+v", job, ta)
					}
				}
				if got != want {
					t.Errorf("%s pinned to %q, want %q", job, got, want)
				}
				sel := w.job(job).Spec.Template.Spec.NodeSelector[domainLabel]
				if sel != want || *w.job(job).Spec.Suspend || w.job(job).Spec.Template.Spec.NodeSelector[productLabel] != "A100" {
					t.Errorf("%s started with nodeSelector %s=%q (suspended %v), want %q", job, domainLabel, sel, *w.job(job).Spec.Suspend, want)
				}
			}
			for job, want := range tt.pending {
				if msg := pendingMessage(w.workload(job)); !strings.Contains(msg, want) {
					t.Errorf("%s pending %q, want %q", job, msg, want)
				}
			}
		})
	}
	t.Run("flavor without a topology", func(t *testing.T) {
		w := newWorld(t, append([]api.Object{topo, clusterQueue("cluster-queue", "", quota{nominal: "64"}), localQueue("user-queue", "cluster-queue")}, nodes...)...)
		if _, err := w.c.Create(context.Background(), topologyJob("a", 1, 1, api.PodSetRequiredTopologyAnnotation)); err != nil {
			t.Fatal(err)
		}
		w.settle()
		if msg := pendingMessage(w.workload("a")); msg != "couldn't assign flavors to pod set main: flavor default-flavor does not support TopologyAwareScheduling" {
			t.Errorf("pending %q", msg)
		}
	})
}
