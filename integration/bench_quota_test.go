package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
)

// Quota admission's cost (docs/performance.md, "Quota admission"): pod
// creates at benchClients concurrent clients into a namespace without a
// quota and into one with a ResourceQuota (requests.cpu, requests.memory,
// requests.nvidia.com/gpu, pods: never reached) and a LimitRange, in the
// same run, alternating rounds; the resourcequota controller runs (the
// scheduler does not).
func TestBenchAPIQuota(t *testing.T) {
	requireBench(t)
	cp, c := startControlPlane(t, func(cfg *controlplane.Config) { cfg.Scheduler = false })
	ctx := context.Background()
	q := func(s string) api.Quantity { return resource.MustParse(s) }
	for _, o := range []api.Object{
		namespace("plain"), namespace("quota"),
		&api.ResourceQuota{ObjectMeta: api.ObjectMeta{Name: "students", Namespace: "quota"}, Spec: api.ResourceQuotaSpec{Hard: api.ResourceList{
			"requests.cpu": q("100k"), "requests.memory": q("1000Ti"), "requests.nvidia.com/gpu": q("100k"), "pods": q("1M")}}},
		&api.LimitRange{ObjectMeta: api.ObjectMeta{Name: "defaults", Namespace: "quota"}, Spec: api.LimitRangeSpec{Limits: []api.LimitRangeItem{
			{Type: api.LimitTypeContainer, Max: api.ResourceList{"cpu": q("4")}}}}},
	} {
		if _, err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	const rounds, perClient = 4, 20
	lat := map[string][]time.Duration{}
	wall := map[string]time.Duration{}
	for r := range rounds {
		order := []string{"plain", "quota"}
		if r%2 == 1 {
			order = []string{"quota", "plain"}
		}
		for _, ns := range order {
			elapsed, l := concurrently(t, benchClients, perClient, func(worker int) (func(i int) error, error) {
				cc, err := client.New(cp.ClientConfig())
				if err != nil {
					return nil, err
				}
				return func(j int) error {
					p := benchPod(ns, fmt.Sprintf("p-%d-%d-%d", r, worker, j))
					p.Spec.Containers[0].Resources = api.ResourceRequirements{Requests: api.ResourceList{"cpu": q("100m"), "memory": q("64Mi")}}
					_, err := cc.Create(context.Background(), p)
					return err
				}, nil
			})
			lat[ns] = append(lat[ns], l...)
			wall[ns] += elapsed
		}
	}
	o, err := c.Get(ctx, api.MustKindOf(&api.ResourceQuota{}), "quota", "students")
	if err != nil {
		t.Fatal(err)
	}
	if used := o.(*api.ResourceQuota).Status.Used["pods"]; used.Value() != rounds*benchClients*perClient {
		t.Errorf("quota counts %s pods, want %d", used.String(), rounds*benchClients*perClient)
	}
	fmt.Printf("\nQuota admission (in-process control plane over HTTP, %d clients, %d rounds alternating)\n", benchClients, rounds)
	fmt.Printf("| namespace | creates | p50 ms | p99 ms | max ms | creates/s |\n|---|---|---|---|---|---|\n")
	for _, ns := range []string{"plain", "quota"} {
		l := lat[ns]
		slices.Sort(l)
		fmt.Printf("| %s | %d | %s | %s | %s | %.0f |\n", ns, len(l), ms(percentile(l, .5)), ms(percentile(l, .99)), ms(l[len(l)-1]), float64(len(l))/wall[ns].Seconds())
	}
	p, qq := lat["plain"], lat["quota"]
	fmt.Printf("p50 ratio quota/plain %.2f, p99 ratio %.2f\n", float64(percentile(qq, .5))/float64(percentile(p, .5)), float64(percentile(qq, .99))/float64(percentile(p, .99)))
}
