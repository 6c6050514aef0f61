package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/patch"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/kubectltest"
)

// Files at an older served version, as tutorials write them: a v1beta1
// claim (the request's fields directly in the request, no exactly), a
// v1beta1 DeviceClass and Kueue v1beta1 queues (spec.cohort, v1beta2's
// spec.cohortName).
const (
	claimV1beta1 = `apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata:
  name: gpu-claim-v1beta1
  namespace: default
spec:
  devices:
    requests:
    - name: gpu
      deviceClassName: gpu.nvidia.com
`
	classV1beta1 = `apiVersion: resource.k8s.io/v1beta1
kind: DeviceClass
metadata:
  name: old-gpus
spec:
  selectors:
  - cel:
      expression: "device.driver == 'gpu.nvidia.com'"
`
	queueV1beta1 = `apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: team-a
spec:
  cohort: lab
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: default-flavor
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 4
`
	localQueueV1beta1 = `apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  name: team-a
  namespace: default
spec:
  clusterQueue: team-a
`
)

// skiff apply of a file at an older served version: stored at the stored
// version (the fields moved where that version keeps them), the
// last-applied annotation at the file's version (as kubectl writes it),
// and a second apply unchanged.
func TestApplyOlderServedVersion(t *testing.T) {
	for _, tc := range []struct {
		name, file, ref string
		stored          func(t *testing.T, o api.Object)
	}{
		{"v1beta1 claim", claimV1beta1, "resourceclaim.resource.k8s.io/gpu-claim-v1beta1", func(t *testing.T, o api.Object) {
			c := o.(*api.ResourceClaim)
			if r := c.Spec.Devices.Requests; len(r) != 1 || r[0].Exactly == nil || r[0].Exactly.DeviceClassName != "gpu.nvidia.com" {
				t.Errorf("stored requests %+v, want exactly.deviceClassName gpu.nvidia.com", r)
			}
		}},
		{"v1beta1 device class", classV1beta1, "deviceclass.resource.k8s.io/old-gpus", func(t *testing.T, o api.Object) {
			if s := o.(*api.DeviceClass).Spec.Selectors; len(s) != 1 || s[0].CEL == nil || s[0].CEL.Expression != "device.driver == 'gpu.nvidia.com'" {
				t.Errorf("stored selectors %+v", s)
			}
		}},
		{"kueue v1beta1 cluster queue", queueV1beta1, "clusterqueue.kueue.x-k8s.io/team-a", func(t *testing.T, o api.Object) {
			if c := o.(*api.ClusterQueue); c.Spec.CohortName != "lab" {
				t.Errorf("stored cohortName %q, want lab (v1beta1 cohort)", c.Spec.CohortName)
			}
		}},
		{"kueue v1beta1 local queue", localQueueV1beta1, "localqueue.kueue.x-k8s.io/team-a", func(t *testing.T, o api.Object) {
			if q := o.(*api.LocalQueue); q.Spec.ClusterQueue != "team-a" {
				t.Errorf("stored clusterQueue %q", q.Spec.ClusterQueue)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newAPIServer(t)
			f := writeFile(t, t.TempDir(), "old.yaml", tc.file)
			res := run(t, srv, "", "apply", "-f", f)
			if res.code != 0 {
				t.Fatalf("first apply: exit %d: %s%s", res.code, res.out, res.err)
			}
			wantLines(t, res.out, tc.ref+" created")
			k, o := readApplied(t, srv, tc.file)
			tc.stored(t, o)
			var ann struct {
				APIVersion string `json:"apiVersion"`
			}
			if err := json.Unmarshal([]byte(o.GetObjectMeta().Annotations[patch.LastAppliedAnnotation]), &ann); err != nil {
				t.Fatalf("last-applied: %v", err)
			}
			if want := strings.TrimPrefix(strings.SplitN(tc.file, "\n", 2)[0], "apiVersion: "); ann.APIVersion != want {
				t.Errorf("last-applied apiVersion %q, want the file's %q", ann.APIVersion, want)
			}
			rv := o.GetObjectMeta().ResourceVersion
			res = run(t, srv, "", "apply", "-f", f)
			if res.code != 0 || res.err != "" {
				t.Fatalf("second apply: exit %d: %s%s", res.code, res.out, res.err)
			}
			wantLines(t, res.out, tc.ref+" unchanged")
			if again, err := srv.Get(t.Context(), k, o.GetObjectMeta().Namespace, o.GetObjectMeta().Name); err != nil || again.GetObjectMeta().ResourceVersion != rv {
				t.Errorf("the second apply wrote the object (err %v)", err)
			}
		})
	}
}

// A v1beta1 file edited: the three-way patch is computed at the stored
// version from the v1beta1 annotation, so a changed field changes and a
// field the file no longer sets is deleted (cohort → cohortName).
func TestApplyOlderServedVersionEdits(t *testing.T) {
	srv := newAPIServer(t)
	dir := t.TempDir()
	for _, tc := range []struct{ file, want, cohort string }{
		{queueV1beta1, "configured", "lab"}, // created before the table
		{strings.Replace(queueV1beta1, "cohort: lab", "cohort: course", 1), "configured", "course"},
		{strings.Replace(queueV1beta1, "  cohort: lab\n", "", 1), "configured", ""},
		{strings.Replace(queueV1beta1, "  cohort: lab\n", "", 1), "unchanged", ""},
	} {
		f := writeFile(t, dir, "queue.yaml", tc.file)
		if _, err := client.Get[*api.ClusterQueue](t.Context(), srv, "", "team-a"); api.IsNotFound(err) {
			wantLines(t, run(t, srv, "", "apply", "-f", f).out, "clusterqueue.kueue.x-k8s.io/team-a created")
			continue
		}
		wantLines(t, run(t, srv, "", "apply", "-f", f).out, "clusterqueue.kueue.x-k8s.io/team-a "+tc.want)
		cq, err := client.Get[*api.ClusterQueue](t.Context(), srv, "", "team-a")
		if err != nil {
			t.Fatal(err)
		}
		if cq.Spec.CohortName != tc.cohort || len(cq.Spec.ResourceGroups) != 1 {
			t.Errorf("after %s: cohortName %q (want %q), resourceGroups %+v", tc.want, cq.Spec.CohortName, tc.cohort, cq.Spec.ResourceGroups)
		}
	}
}

// The real kubectl and skiff apply on the same objects at an older
// version. kubectl sends its file to the v1beta1 path and writes a v1beta1
// annotation; skiff reads that annotation at the stored version, so a
// skiff apply after kubectl's sees the same file: it rewrites the
// annotation in its own form once ("configured", the spec as it was) and
// is unchanged from then on. Twice with either tool: unchanged, except
// where kubectl says "configured" against kube-apiserver too (below).
func TestApplyOlderServedVersionWithKubectl(t *testing.T) {
	cp, conf := startTestControlPlane(t, t.TempDir())
	kc := kubectltest.Use(t, cp.URL(), cp.CA().CertPEM(), "unused")
	kc.Kubeconfig = conf
	cl, err := client.New(cp.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	apply := map[string]func(t *testing.T, file string) string{
		"skiff": func(t *testing.T, file string) string {
			t.Helper()
			res := runCLI(t, "--kubeconfig", conf, "apply", "-f", file)
			if res.code != 0 {
				t.Fatalf("skiff apply: exit %d: %s%s", res.code, res.out, res.err)
			}
			return strings.TrimSpace(res.out)
		},
		"kubectl": func(t *testing.T, file string) string {
			t.Helper()
			return strings.TrimSpace(kc.Must(t, "", "apply", "-f", file))
		},
	}
	// The queue's quota is written "4", a string: kubectl compares a YAML
	// integer with the stored quantity "4" as a change (as with
	// nvidia.com/gpu: 1, docs/labs.md).
	queue := strings.Replace(queueV1beta1, "nominalQuota: 4", `nominalQuota: "4"`, 1)
	for _, tc := range []struct {
		name, file, objName, ref string
		// kubectlAgain: what kubectl says applying what is there. A
		// claim's requests are an atomic list the server defaults into
		// (allocationMode, count), so kubectl's patch carries the list and
		// it says "configured", as against kube-apiserver; nothing changes.
		kubectlAgain string
	}{
		{"v1beta1 claim", claimV1beta1, "gpu-claim-v1beta1", "resourceclaim.resource.k8s.io/", "configured"},
		{"kueue v1beta1 cluster queue", queue, "team-a", "clusterqueue.kueue.x-k8s.io/", "unchanged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, steps := range [][][2]string{
				{{"kubectl", "created"}, {"kubectl", tc.kubectlAgain}, {"skiff", "configured"}, {"skiff", "unchanged"}},
				{{"skiff", "created"}, {"skiff", "unchanged"}, {"kubectl", "configured"}, {"kubectl", tc.kubectlAgain}, {"skiff", "configured"}, {"skiff", "unchanged"}},
			} {
				name := tc.objName + "-" + steps[0][0]
				file := strings.Replace(tc.file, "name: "+tc.objName+"\n", "name: "+name+"\n", 1)
				f := writeFile(t, dir, name+".yaml", file)
				var spec string
				for i, step := range steps {
					if got, want := apply[step[0]](t, f), tc.ref+name+" "+step[1]; got != want {
						t.Errorf("%s, step %d (%s): %q, want %q", name, i+1, step[0], got, want)
					}
					_, o := readApplied(t, cl, file)
					got, err := json.Marshal(specOf(t, o))
					if err != nil {
						t.Fatal(err)
					}
					if i == 0 {
						spec = string(got)
					} else if string(got) != spec {
						t.Errorf("%s, step %d (%s) changed the spec:\n%s\nwas\n%s", name, i+1, step[0], got, spec)
					}
				}
			}
		})
	}
}

// specOf is the spec of o as JSON.
func specOf(t *testing.T, o api.Object) any {
	t.Helper()
	data, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m["spec"]
}

// readApplied reads back the one object of file.
func readApplied(t *testing.T, cl client.Interface, file string) (*api.Kind, api.Object) {
	t.Helper()
	docs := api.DecodeStream([]byte(file))
	if len(docs) != 1 || docs[0].Err != nil {
		t.Fatalf("decode the file: %+v", docs)
	}
	m := docs[0].Object.GetObjectMeta()
	o, err := cl.Get(t.Context(), docs[0].Kind, m.Namespace, m.Name)
	if err != nil {
		t.Fatal(err)
	}
	return docs[0].Kind, o
}
