package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
)

// BenchPod is a pod of about 1 KiB of JSON, like one a ReplicaSet creates:
// labels, an owner, a container with ports, env and a probe.
func BenchPod(i int) *api.Pod {
	t := true
	grace := int64(30)
	env := make([]api.EnvVar, 8)
	for j := range env {
		env[j] = api.EnvVar{Name: fmt.Sprintf("SETTING_%d", j), Value: fmt.Sprintf("value-%d-for-the-application", j)}
	}
	return &api.Pod{
		ObjectMeta: api.ObjectMeta{
			Namespace: "bench",
			Name:      fmt.Sprintf("web-7d4b9c8f6d-%06d", i),
			Labels:    map[string]string{"app": "web", "tier": "frontend", "pod-template-hash": "7d4b9c8f6d"},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/restartedAt": "2026-01-01T12:00:00Z",
			},
			OwnerReferences: []api.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9c8f6d",
				UID: "0b6a0c53-2a8e-4f39-9a55-3c7d2f1e9b10", Controller: &t, BlockOwnerDeletion: &t}},
		},
		Spec: api.PodSpec{
			Containers: []api.Container{{
				Name:            "web",
				Image:           "registry.example.com/team/web-frontend:1.27.3",
				ImagePullPolicy: "IfNotPresent",
				Command:         []string{"/bin/web", "--listen=:8080", "--log-level=info"},
				Ports:           []api.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: "TCP"}},
				Env:             env,
			}},
			RestartPolicy:                 "Always",
			TerminationGracePeriodSeconds: &grace,
			SchedulerName:                 "default-scheduler",
			DNSPolicy:                     "ClusterFirst",
		},
	}
}

// BenchCreate creates b.N BenchPods in s from writers goroutines and
// reports objects/s and bytes/object. The bbolt and etcd benchmarks both
// call it, so that their numbers compare.
func BenchCreate(b *testing.B, s store.Store, writers int) {
	ctx := context.Background()
	pods := make([]*api.Pod, b.N)
	for i := range pods {
		pods[i] = BenchPod(i)
	}
	var (
		nextPod atomic.Int64
		wg      sync.WaitGroup
		failed  atomic.Value
	)
	b.ResetTimer()
	start := time.Now()
	for range writers {
		wg.Go(func() {
			for {
				i := int(nextPod.Add(1)) - 1
				if i >= b.N {
					return
				}
				if _, err := s.Create(ctx, pods[i]); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "objects/s")
	raw, _ := json.Marshal(BenchPod(0))
	b.ReportMetric(float64(len(raw)), "bytes/object")
}
