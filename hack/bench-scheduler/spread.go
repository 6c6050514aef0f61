//go:build !nospread

package main

import (
	"fmt"

	"skiff.dev/skiff/api"
)

// spreadBuilt: this build has the spread variant (-tags nospread leaves it
// out, for a tree from before topology spread constraints).
const spreadBuilt = true

// spreadApps is how many groups the spread variant's pods come in.
const spreadApps = 100

// spreadPod gives p the spreading of a Deployment's pods with the default
// constraints (by hostname, maxSkew 3; by zone, maxSkew 5; both
// ScheduleAnyway), as constraints of its own: simulated nodes have no zone
// label, so kubernetes.io/os (one domain, every node) stands for the one
// zone. Its own constraints rather than a Service's or ReplicaSet's
// selector: a Service would add the endpoints controllers' work, a
// ReplicaSet its own pods.
func spreadPod(p *api.Pod, i int) {
	app := fmt.Sprintf("spread-%d", i%spreadApps)
	p.Labels["app"] = app
	sel := &api.LabelSelector{MatchLabels: map[string]string{"app": app}}
	p.Spec.TopologySpreadConstraints = []api.TopologySpreadConstraint{
		{MaxSkew: 3, TopologyKey: api.LabelHostname, WhenUnsatisfiable: api.ScheduleAnyway, LabelSelector: sel},
		{MaxSkew: 5, TopologyKey: api.LabelOS, WhenUnsatisfiable: api.ScheduleAnyway, LabelSelector: sel},
	}
}
