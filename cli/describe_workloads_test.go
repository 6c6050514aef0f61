package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

// describe daemonset, statefulset, cronjob and poddisruptionbudget print
// kubectl's sections and, for the first three, skiff's explanation.
func TestDescribeWorkloads(t *testing.T) {
	yes := true
	owned := func(kind, name, uid string) []api.OwnerReference {
		return []api.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: &yes}}
	}
	two := int32(2)
	ds := &api.DaemonSet{ObjectMeta: api.ObjectMeta{Name: "agent", Namespace: "default", UID: "ds"},
		Spec: api.DaemonSetSpec{Selector: &api.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: api.PodTemplateSpec{ObjectMeta: api.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec: api.PodSpec{NodeSelector: map[string]string{"gpu": "yes"}, Containers: []api.Container{{Name: "agent", Image: "agent:1"}}}}},
		Status: api.DaemonSetStatus{DesiredNumberScheduled: 1, CurrentNumberScheduled: 1, NumberAvailable: 1, UpdatedNumberScheduled: 1}}
	set := &api.StatefulSet{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default", UID: "sts"},
		Spec: api.StatefulSetSpec{Replicas: &two, Selector: &api.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}},
			UpdateStrategy: api.StatefulSetUpdateStrategy{Type: "RollingUpdate", RollingUpdate: &api.RollingUpdateStatefulSetStrategy{Partition: new(int32)}},
			VolumeClaimTemplates: []api.PersistentVolumeClaim{{ObjectMeta: api.ObjectMeta{Name: "www"},
				Spec: api.PersistentVolumeClaimSpec{AccessModes: []string{"ReadWriteOnce"}, Resources: api.VolumeResourceRequirements{Requests: api.ResourceList{"storage": resourceQ("1Gi")}}}}}},
		Status: api.StatefulSetStatus{Replicas: 1}}
	cj := &api.CronJob{ObjectMeta: api.ObjectMeta{Name: "hello", Namespace: "default", UID: "cj"},
		Spec:   api.CronJobSpec{Schedule: "*/5 * * * *", ConcurrencyPolicy: "Allow", Suspend: new(bool)},
		Status: api.CronJobStatus{Active: []api.ObjectReference{{Name: "hello-29000000"}}}}
	pdb := &api.PodDisruptionBudget{ObjectMeta: api.ObjectMeta{Name: "web-pdb", Namespace: "default"},
		Spec:   api.PodDisruptionBudgetSpec{MinAvailable: &api.IntOrString{IntVal: 2}, Selector: &api.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}}},
		Status: api.PodDisruptionBudgetStatus{CurrentHealthy: 2, DesiredHealthy: 2, ExpectedPods: 3}}
	cl := fake.New(ds, set, cj, pdb,
		&api.Node{ObjectMeta: api.ObjectMeta{Name: "cpu-1"}},
		&api.Node{ObjectMeta: api.ObjectMeta{Name: "gpu-1", Labels: map[string]string{"gpu": "yes"}}},
		&api.Pod{ObjectMeta: api.ObjectMeta{Name: "agent-x", Namespace: "default", OwnerReferences: owned("DaemonSet", "agent", "ds")},
			Spec: api.PodSpec{NodeName: "gpu-1"}, Status: api.PodStatus{Phase: api.PodRunning, Conditions: []api.PodCondition{{Type: api.PodReady, Status: api.ConditionTrue}}}},
		&api.Pod{ObjectMeta: api.ObjectMeta{Name: "web-0", Namespace: "default", OwnerReferences: owned("StatefulSet", "web", "sts")},
			Status: api.PodStatus{Phase: api.PodPending, Conditions: []api.PodCondition{{Type: api.PodScheduled, Status: api.ConditionFalse,
				Message: `0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.`}}}},
	)
	now := time.Date(2025, 3, 1, 10, 2, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		obj  api.Object
		want []string
	}{
		{"daemonset", ds, []string{"Node-Selector:  gpu=yes", "Desired Number of Nodes Scheduled: 1", "Number of Nodes Misscheduled: 0",
			"Pods Status:", "1 Running / 0 Waiting", "Nodes:", "cpu-1:", "not eligible: node doesn't match nodeSelector gpu=yes",
			"gpu-1:", "agent-x: Running, Ready on gpu-1"}},
		{"statefulset", set, []string{"Replicas:", "2 desired | 1 total", "Update Strategy:", "RollingUpdate", "Partition:", "Volume Claims:",
			"Name:", "www", "Capacity:", "1Gi", "Access Modes:", "[ReadWriteOnce]", "Ordinals:",
			"web-0:", "Pending, not scheduled: 0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.; claim www-web-0 not made yet",
			"web-1:", "not made yet: waiting for web-0"}},
		{"cronjob", cj, []string{"Schedule:", "*/5 * * * *", "Concurrency Policy:", "Allow", "Suspend:", "False", "Time Zone:", "<unset>",
			"Starting Deadline Seconds:", "Last Schedule Time:", "<unset>", "Next Schedule Time:", "Sat, 01 Mar 2025 10:05:00 +0000 (in 3m0s)",
			"Active Jobs:", "hello-29000000"}},
		{"pdb", pdb, []string{"Min available:", "2", "Selector:", "app=nginx", "Allowed disruptions:", "Current:", "Desired:", "Total:", "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := describeObject(context.Background(), &b, cl, api.MustKindOf(tc.obj), tc.obj, now); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("describe lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
	// A suspended CronJob has no next run.
	cj.Spec.Suspend = &yes
	var b bytes.Buffer
	if err := describeObject(context.Background(), &b, cl, api.MustKindOf(cj), cj, now); err != nil || !strings.Contains(b.String(), "<none> (suspended)") {
		t.Errorf("suspended cronjob (%v):\n%s", err, b.String())
	}
}
