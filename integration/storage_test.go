package integration

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/node"
)

// Storage on real containerd, two nodes: a claim of the default class
// local-path waits for its first pod (WaitForFirstConsumer); the scheduler
// picks a node, that node's provisioner makes a directory and a volume with
// node affinity to it, the controller binds them; the pod writes a file.
// The pod is deleted; a new pod on the claim is scheduled to the same node
// (the volume's node affinity) and reads the file. A claim deleted while a
// pod uses it stays Terminating until the pod is gone (pvc-protection);
// then its volume is Released and, reclaim policy Delete, removed with its
// directory.
func TestPersistentVolumeClaimOnContainerd(t *testing.T) {
	e := newCtrdEnv(t)
	cp, c := startControlPlane(t, nil)
	dirs := map[string]string{}
	for _, name := range []string{"n1", "n2"} {
		dirs[name] = filepath.Join(t.TempDir(), name)
		startAgent(t, cp, e.runtime(t), name, dirs[name], func(a *agent.Config) {
			a.BaseBackoff, a.MaxBackoff = 200*time.Millisecond, time.Second
		})
	}
	ctx := context.Background()
	claim := &api.PersistentVolumeClaim{ObjectMeta: api.ObjectMeta{Name: "data", Namespace: "default"}}
	claim.Spec.AccessModes = []string{api.ReadWriteOnce}
	claim.Spec.Resources.Requests = api.ResourceList{api.ResourceStorage: resource.MustParse("128Mi")}
	if _, err := c.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, c, "data", "WaitForFirstConsumer")
	if got := getClaim(t, c, "data"); got.Status.Phase != api.ClaimPending || api.ClaimClass(got) != api.LocalPathStorageClass {
		t.Fatalf("claim before its pod: phase %q class %q", got.Status.Phase, api.ClaimClass(got))
	}

	start := time.Now()
	writer := runOnClaim(t, c, "writer", "data", "echo kept > /data/file")
	t.Logf("first pod on a new claim: Succeeded after %v", time.Since(start).Round(time.Millisecond))
	bound := getClaim(t, c, "data")
	if bound.Status.Phase != api.ClaimBound || bound.Spec.VolumeName != "pvc-"+bound.UID || bound.Annotations[api.AnnotationSelectedNode] != writer.Spec.NodeName {
		t.Fatalf("claim after its pod: %q volume %q annotations %v", bound.Status.Phase, bound.Spec.VolumeName, bound.Annotations)
	}
	pv, err := client.Get[*api.PersistentVolume](ctx, c, "", bound.Spec.VolumeName)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(node.StorageDir(dirs[writer.Spec.NodeName]), pv.Name+"_default_data")
	if pv.Status.Phase != api.VolumeBound || !api.IsLocalPathVolumeOf(pv, writer.Spec.NodeName) || pv.Spec.HostPath.Path != dir {
		t.Fatalf("volume: phase %q path %q affinity %+v", pv.Status.Phase, pv.Spec.HostPath.Path, pv.Spec.NodeAffinity)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "file")); err != nil || string(b) != "kept\n" {
		t.Fatalf("the file on the node: %q %v", b, err)
	}
	waitEvent(t, c, "data", "ProvisioningSucceeded")

	// The data outlives the pod; the next pod goes where the volume is.
	deletePod(t, c, "writer")
	start = time.Now()
	reader := runOnClaim(t, c, "reader", "data", `test "$(cat /data/file)" = kept`)
	t.Logf("a pod on a bound claim: Succeeded after %v", time.Since(start).Round(time.Millisecond))
	if reader.Spec.NodeName != writer.Spec.NodeName {
		t.Errorf("reader on %s, the volume is on %s", reader.Spec.NodeName, writer.Spec.NodeName)
	}

	// pvc-protection: a claim a running pod uses stays until the pod goes.
	deletePod(t, c, "reader")
	holder := claimPod("holder", "data", "sleep 3600")
	holder.Spec.RestartPolicy = api.RestartAlways
	if _, err := c.Create(ctx, holder); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, c, "holder", api.PodRunning)
	if err := c.Delete(ctx, api.MustKindOf(claim), "default", "data", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := getClaim(t, c, "data"); got.DeletionTimestamp == nil || !slices.Contains(got.Finalizers, api.FinalizerPVCProtection) {
		t.Fatalf("claim in use after delete: %+v", got.ObjectMeta)
	}
	deletePod(t, c, "holder")
	testwait.For(t, 30*time.Second, "the claim, its volume and the directory to go", func() bool {
		_, cerr := client.Get[*api.PersistentVolumeClaim](ctx, c, "default", "data")
		_, verr := client.Get[*api.PersistentVolume](ctx, c, "", pv.Name)
		_, derr := os.Stat(dir)
		return api.IsNotFound(cerr) && api.IsNotFound(verr) && os.IsNotExist(derr)
	})
}

func getClaim(t *testing.T, c client.Interface, name string) *api.PersistentVolumeClaim {
	t.Helper()
	cl, err := client.Get[*api.PersistentVolumeClaim](context.Background(), c, "default", name)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func claimPod(name, claim, script string) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"}}
	p.Spec.RestartPolicy = api.RestartNever
	grace := int64(1) // sh ignores SIGTERM: do not wait out 30 s
	p.Spec.TerminationGracePeriodSeconds = &grace
	p.Spec.Volumes = []api.Volume{{Name: "data", PersistentVolumeClaim: &api.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
	p.Spec.Containers = []api.Container{{Name: "main", Image: "busybox:1.36", ImagePullPolicy: api.PullIfNotPresent,
		Command: []string{"sh", "-c", script}, VolumeMounts: []api.VolumeMount{{Name: "data", MountPath: "/data"}}}}
	return p
}

// runOnClaim runs script in a pod mounting claim at /data and waits for it
// to succeed.
func runOnClaim(t *testing.T, c client.Interface, name, claim, script string) *api.Pod {
	t.Helper()
	if _, err := c.Create(context.Background(), claimPod(name, claim, script)); err != nil {
		t.Fatal(err)
	}
	return waitPhase(t, c, name, api.PodSucceeded)
}

func waitPhase(t *testing.T, c client.Interface, name, phase string) *api.Pod {
	t.Helper()
	var p *api.Pod
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		var err error
		p, err = client.Get[*api.Pod](context.Background(), c, "default", name)
		if err != nil {
			return false, err.Error()
		}
		if p.Status.Phase == api.PodFailed && phase != api.PodFailed {
			t.Fatalf("pod %s failed: %s", name, podSummary([]*api.Pod{p}))
		}
		return p.Status.Phase == phase, "pod " + name + " " + phase + ": " + podSummary([]*api.Pod{p}) + eventSummary(t, c, name)
	})
	return p
}

func eventSummary(t *testing.T, c client.Interface, name string) string {
	var out []string
	for _, ev := range eventsFor(t, c, "default", name) {
		out = append(out, ev.Reason+": "+ev.Message)
	}
	return " events: " + strings.Join(out, "; ")
}

func deletePod(t *testing.T, c client.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Delete(ctx, api.MustKindOf(&api.Pod{}), "default", name, api.DeleteOptions{}); err != nil && !api.IsNotFound(err) {
		t.Fatal(err)
	}
	testwait.For(t, 60*time.Second, "pod "+name+" to go", func() bool {
		_, err := client.Get[*api.Pod](ctx, c, "default", name)
		return api.IsNotFound(err)
	})
}

func waitEvent(t *testing.T, c client.Interface, object, reason string) {
	t.Helper()
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		for _, ev := range eventsFor(t, c, "default", object) {
			if ev.Reason == reason {
				return true, ""
			}
		}
		return false, "event " + reason + " on " + object + ":" + eventSummary(t, c, object)
	})
}
