package scheduler

import (
	"fmt"
	stdmaps "maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/fabric"
	"skiff.dev/skiff/controlplane/scheduler/config"
)

// Homework task 3, in process: the scheduler and the four nodes of
// examples/homework/task3/cluster-4x-a100.yaml with their fabric labels
// (no agents, no containers). The jobs' pods are made from the example
// Jobs' templates, as the job controller would.

const homework = "../../examples/homework/"

// homeworkNodes are hw-1..hw-4 with 8 GPUs each and the cluster file's labels.
func homeworkNodes(t *testing.T) ([]api.Object, *fabric.Cluster) {
	t.Helper()
	cl, err := fabric.Load(homework + "task3/cluster-4x-a100.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var nodes []api.Object
	for i := 1; i <= cl.Nodes; i++ {
		kv := []string{}
		for k, v := range cl.NodeLabels(i) {
			kv = append(kv, k, v)
		}
		nodes = append(nodes, gpuNode(fmt.Sprintf("hw-%d", i), 8, labels(kv...)))
	}
	return nodes, cl
}

// exampleObjects decodes an example file.
func exampleObjects(t *testing.T, name string) []api.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(homework, name))
	if err != nil {
		t.Fatal(err)
	}
	var out []api.Object
	for _, d := range api.DecodeStream(data) {
		if d.Err != nil {
			t.Fatalf("%s: %v", name, d.Err)
		}
		out = append(out, d.Object)
	}
	return out
}

// jobPods are the pods of each Job of an example (parallelism of them),
// and its PodGroups, ready to add to the fixture.
func jobPods(t *testing.T, name string) (pods []*api.Pod, groups []*api.PodGroup) {
	t.Helper()
	for _, o := range exampleObjects(t, name) {
		switch o := o.(type) {
		case *api.PodGroup:
			groups = append(groups, o)
		case *api.Job:
			n := int32(1)
			if o.Spec.Parallelism != nil {
				n = *o.Spec.Parallelism
			}
			for i := range n {
				p := &api.Pod{ObjectMeta: o.Spec.Template.ObjectMeta, Spec: o.Spec.Template.Spec}
				p.Name, p.Namespace, p.UID = fmt.Sprintf("%s-%d", o.Name, i), o.Namespace, fmt.Sprintf("uid-%s-%d", o.Name, i)
				p.Labels = map[string]string{}
				for k, v := range o.Spec.Template.Labels {
					p.Labels[k] = v
				}
				p.Status.Phase = api.PodPending
				api.SetTypeMeta(p)
				pods = append(pods, p)
			}
		}
	}
	return pods, groups
}

// schedule runs cycles until the queue is empty, finishing every task;
// waiting tasks are finished once nothing else is left (by then their
// gang is complete or they time out).
func (f *fixture) scheduleAll() {
	f.t.Helper()
	var waiting []*task
	for {
		tk := f.cycle()
		if tk == nil {
			break
		}
		if tk.waits {
			waiting = append(waiting, tk)
			continue
		}
		f.finish(tk)
	}
	for _, tk := range waiting {
		f.finish(tk)
	}
}

func (f *fixture) nodeOf(ns, name string) string { return f.pod(ns, name).Spec.NodeName }

func TestHomework3(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		binpack      bool
	}{
		{"spread", "task3/scheduler-spread.yaml", false},
		{"binpack", "task3/scheduler-binpack.yaml", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Load(homework + tc.config)
			if err != nil {
				t.Fatal(err)
			}
			nodes, cl := homeworkNodes(t)
			f := newFixture(t, cfg, nodes...)
			domainOf := func(node string) string {
				var i int
				fmt.Sscanf(node, "hw-%d", &i)
				return cl.Domain(i)
			}

			// Job A: a gang of eight one-GPU pods, required inside nvl-a.
			pods, groups := jobPods(t, "task3-job-a-gang.yaml")
			if len(pods) != 8 || len(groups) != 1 {
				t.Fatalf("job A: %d pods, %d groups", len(pods), len(groups))
			}
			f.addGroup(groups[0])
			for _, p := range pods {
				f.add(p)
			}
			f.scheduleAll()
			usedA := map[string]int{}
			for _, p := range pods {
				n := f.nodeOf(p.Namespace, p.Name)
				if n == "" || domainOf(n) != "nvl-a" {
					t.Fatalf("job A pod %s on %q (domain %q), want inside nvl-a", p.Name, n, domainOf(n))
				}
				usedA[n]++
			}
			if tc.binpack && len(usedA) != 1 {
				t.Errorf("binpack spread job A over %v, want one node", usedA)
			}
			if !tc.binpack && len(usedA) != 2 {
				t.Errorf("spread put job A on %v, want both nodes of nvl-a", usedA)
			}

			// Jobs B and C, two GPUs each.
			bc, _ := jobPods(t, "task3-jobs-b-c.yaml")
			if len(bc) != 2 {
				t.Fatalf("jobs B and C: %d pods", len(bc))
			}
			free := map[string]int64{}
			for _, o := range nodes {
				n := o.GetObjectMeta().Name
				free[n] = 8 - f.gpusHeld(n)
			}
			var where []string
			for _, p := range bc {
				before := stdmaps.Clone(free)
				f.add(p)
				f.scheduleAll()
				n := f.nodeOf(p.Namespace, p.Name)
				if n == "" {
					t.Fatalf("%s not scheduled", p.Name)
				}
				// What each configuration predicts, from the free GPUs
				// just before: spread takes the node with the most free,
				// binpack the one with the fewest that still holds 2.
				want := predict(before, 2, tc.binpack)
				if !slices.Contains(want, n) {
					t.Errorf("%s on %s (free GPUs before: %v); %s predicts one of %v", p.Name, n, before, tc.name, want)
				}
				free[n] -= 2
				where = append(where, n)
			}
			if tc.binpack && where[0] != where[1] {
				t.Errorf("binpack put B and C on %v, want them together", where)
			}
			if !tc.binpack && where[0] == where[1] {
				t.Errorf("spread put B and C together on %s", where[0])
			}
		})
	}
}

// TestHomework3WholeNode: job A as one 8-GPU pod takes a whole node, which
// lies inside one domain.
func TestHomework3WholeNode(t *testing.T) {
	nodes, cl := homeworkNodes(t)
	f := newFixture(t, defaultConfig(), nodes...)
	pods, _ := jobPods(t, "task3-job-a.yaml")
	if len(pods) != 1 {
		t.Fatalf("%d pods", len(pods))
	}
	f.add(pods[0])
	f.scheduleAll()
	n := f.nodeOf(pods[0].Namespace, pods[0].Name)
	var i int
	fmt.Sscanf(n, "hw-%d", &i)
	if n == "" || cl.Domain(i) == "" || f.gpusHeld(n) != 8 {
		t.Fatalf("8-GPU pod on %q (domain %q, %d GPUs held)", n, cl.Domain(i), f.gpusHeld(n))
	}
}

// predict lists the nodes a configuration may choose for a pod of need
// GPUs: spread (LeastAllocated) the nodes with the most free GPUs, binpack
// (MostAllocated) those with the fewest free that still fit.
func predict(free map[string]int64, need int64, binpack bool) []string {
	var best int64 = -1
	var out []string
	for n, f := range free {
		if f < need {
			continue
		}
		better := best < 0 || (!binpack && f > best) || (binpack && f < best)
		switch {
		case better:
			best, out = f, []string{n}
		case f == best:
			out = append(out, n)
		}
	}
	return out
}
