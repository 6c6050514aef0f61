package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

// BenchmarkHPASync100 is the HPA controller's cost per sync of 100
// autoscalers (each a Deployment of 3 pods on a pods metric), against
// BenchmarkReplicaSetSync100 (100 reconciles of steady ReplicaSets) in the
// same run: docs/performance.md.
func BenchmarkHPASync100(b *testing.B) {
	var objs []api.Object
	m := &tableMetrics{pods: map[string]int64{}}
	for i := range 100 {
		d := deployment(3, "x")
		d.Name, d.UID = fmt.Sprintf("web-%d", i), fmt.Sprintf("uid-%d", i)
		d.Spec.Selector.MatchLabels = map[string]string{"app": d.Name}
		d.Spec.Template.Labels = map[string]string{"app": d.Name}
		h := gpuHPA()
		h.Name, h.UID, h.Spec.ScaleTargetRef.Name = d.Name, "uid-h-"+d.Name, d.Name
		objs = append(objs, d, h)
		for j := range 3 {
			p := runningPod(fmt.Sprintf("%s-%d", d.Name, j))
			p.Labels = map[string]string{"app": d.Name}
			objs = append(objs, p)
			m.pods[p.Name] = 70000 // at the target: no scaling, the steady state
		}
	}
	c := fake.New(objs...)
	r := NewHPAController(c, fakeLister{c, hpaKind()}, fakeLister{c, podKind()}, m, nil, HPAConfig{}, nil)
	clock := t0
	r.calc.now = func() time.Time { return clock }
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		clock = clock.Add(15 * time.Second) // one sync period later
		for i := range 100 {
			_ = r.Reconcile(ctx, fmt.Sprintf("%s/web-%d", ns, i))
		}
	}
}

// BenchmarkReplicaSetSync100 is the baseline: 100 reconciles of steady
// ReplicaSets of 3 pods each, with the same fake client and listers.
func BenchmarkReplicaSetSync100(b *testing.B) {
	var objs []api.Object
	for i := range 100 {
		d := deployment(3, "x")
		rs := rsFor(d, 1, 3)
		rs.Name, rs.UID = fmt.Sprintf("web-%d", i), fmt.Sprintf("uid-rs-%d", i)
		rs.Spec.Selector.MatchLabels = map[string]string{"app": rs.Name}
		rs.Spec.Template.Labels = map[string]string{"app": rs.Name}
		rs.OwnerReferences = nil
		objs = append(objs, rs)
		for j := range 3 {
			p := runningPod(fmt.Sprintf("%s-%d", rs.Name, j))
			p.Labels = map[string]string{"app": rs.Name}
			p.OwnerReferences = []api.OwnerReference{controllerRef(rs)}
			objs = append(objs, p)
		}
	}
	c := fake.New(objs...)
	r := NewReplicaSetController(c, fakeLister{c, replicaSetKind()}, fakeLister{c, podKind()}, nil, nil)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		for i := range 100 {
			_ = r.Reconcile(ctx, fmt.Sprintf("%s/web-%d", ns, i))
		}
	}
}
