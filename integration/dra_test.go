package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"skiff.dev/skiff/agent/dra/gpudriver"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testwait"
)

// DRA end to end (issue 12's "Done when", the node side): the cluster of
// TestGPUOnSimulatedDGXA100 (one agent on real containerd, a simulated DGX
// A100), with the scheduler's DynamicResources plugin, the resourceclaim
// controller and the agent's gpu.nvidia.com driver. nvidia-smi in the
// CUDA stand-in image lists the GPU records the CDI devices mounted, so
// exactly the GPUs the node prepared.

func TestDRAOnSimulatedDGXA100(t *testing.T) {
	e := newCtrdEnv(t)
	cp, c := startControlPlane(t, nil)
	g := &gpuCluster{cp: cp, c: c, ctrd: e, dataDir: t.TempDir()}
	g.cfgPath = filepath.Join(g.dataDir, "cli-config")
	if err := client.WriteKubeconfig(g.cfgPath, cp.ClientConfig()); err != nil {
		t.Fatal(err)
	}
	g.gpuStartAgent(t)
	gpuImportImage(t, g.agent.node.Runtime())
	ctx := context.Background()
	uuidOf := map[string]string{} // device name → GPU UUID, from the slice
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		s, err := client.Get[*api.ResourceSlice](ctx, c, "", gpudriver.SliceName(gpuNode))
		if err != nil {
			return false, err.Error()
		}
		for _, d := range s.Spec.Devices {
			uuidOf[d.Name] = *d.Attributes["uuid"].StringValue
		}
		return len(s.Spec.Devices) == 8, fmt.Sprintf("%d devices", len(s.Spec.Devices))
	})

	quickStartImages(t, g.agent.node.Runtime())
	var pluginTook time.Duration // apply → Running of a device-plugin GPU pod
	t.Run("QuickStartTemplate", func(t *testing.T) {
		start := time.Now()
		g.cli(t, "apply", "-f", "../examples/dra/gpu-test1.yaml")
		ns := "gpu-test1"
		draWaitPhase(t, c, ns, "pod1", api.PodRunning, 30*time.Second)
		draTook := time.Since(start)
		draWaitPhase(t, c, ns, "pod2", api.PodRunning, 30*time.Second)
		// The same pod through the device plugin (limits nvidia.com/gpu),
		// applied the same way in the same run: what a template claim
		// costs on top (issue 24: no waiting for a periodic flush).
		start = time.Now()
		applyDoc(t, g, devicePluginPod)
		draWaitPhase(t, c, ns, "plugin-pod", api.PodRunning, 30*time.Second)
		pluginTook = time.Since(start)
		t.Logf("apply → Running: gpu-test1 pod1 (ResourceClaimTemplate) %v, device-plugin GPU pod %v, ratio %.2f",
			draTook.Round(time.Millisecond), pluginTook.Round(time.Millisecond), draTook.Seconds()/pluginTook.Seconds())
		claims := draClaims(t, c, ns)
		if len(claims) != 2 {
			t.Fatalf("%d claims in %s, want 2 (one per pod from the template)", len(claims), ns)
		}
		seen := map[string]bool{}
		for _, cl := range claims {
			if cl.Status.Allocation == nil || len(cl.Status.ReservedFor) != 1 {
				t.Fatalf("claim %s: allocation %v reservedFor %v, want allocated,reserved", cl.Name, cl.Status.Allocation, cl.Status.ReservedFor)
			}
			pod := cl.Status.ReservedFor[0].Name
			dev := cl.Status.Allocation.Devices.Results[0].Device
			if seen[dev] {
				t.Errorf("device %s allocated twice", dev)
			}
			seen[dev] = true
			out := draLogs(t, c, ns, pod, "")
			if n := strings.Count(out, "GPU-"); n != 1 || !strings.Contains(out, uuidOf[dev]) {
				t.Errorf("pod %s: nvidia-smi -L lists %d GPUs, want exactly %s (%s):\n%s", pod, n, dev, uuidOf[dev], out)
			}
		}
		if out := g.cli(t, "get", "resourceclaims", "-n", ns); strings.Count(out, "allocated,reserved") != 2 {
			t.Errorf("get resourceclaims:\n%s", out)
		}
		if out := g.cli(t, "trace", "pod", "pod1", "-n", ns); !strings.Contains(out, "NodePrepareResources claim ") || !strings.Contains(out, "k8s.gpu.nvidia.com/claim=") {
			t.Errorf("trace pod: no NodePrepareResources with CDI devices:\n%s", out)
		}
		g.cli(t, "delete", "namespace", ns)
		testwait.Until(t, 60*time.Second, func() (bool, string) {
			left := draClaims(t, c, ns)
			return len(left) == 0 && len(draPrepared(t, g)) == 0, fmt.Sprintf("%d claims left, prepared %v", len(left), draPrepared(t, g))
		})
	})

	t.Run("QuickStartSharedClaim", func(t *testing.T) {
		if pluginTook == 0 {
			t.Fatal("QuickStartTemplate did not time the device-plugin pod")
		}
		draSharedClaim(t, g, pluginTook)
	})
	t.Run("QuickStartGpuConfig", func(t *testing.T) { draGpuConfig(t, g) })
	t.Run("GpuConfigRefused", func(t *testing.T) { draGpuConfigRefused(t, g) })

	t.Run("ClaimStatesAndV1beta1", func(t *testing.T) {
		claim := "gpu-claim-v1beta1"
		docs := splitDocs(t, "../examples/dra/v1beta1-claim.yaml")
		// The claim as kubectl sends it: the v1beta1 body to the v1beta1
		// path. (skiff apply -f converts on the client side first.)
		body, err := yaml.YAMLToJSON([]byte(docs[0]))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(ctx, "POST", "/apis/resource.k8s.io/v1beta1/namespaces/"+gpuNS+"/resourceclaims", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("POST v1beta1 claim: %d %s", resp.StatusCode, answer)
		}
		cl, err := client.Get[*api.ResourceClaim](ctx, c, gpuNS, claim)
		if err != nil {
			t.Fatal(err)
		}
		if cl.Spec.Devices.Requests[0].Exactly == nil || cl.Spec.Devices.Requests[0].Exactly.DeviceClassName != api.NVIDIAGPUDeviceClassName {
			t.Errorf("the v1beta1 request is not stored as v1's exactly: %+v", cl.Spec.Devices.Requests[0])
		}
		if cl.Status.Allocation != nil {
			t.Fatalf("a claim without a pod is allocated: %v", cl.Status.Allocation)
		}
		if out := g.cli(t, "get", "resourceclaim", claim); !strings.Contains(out, "pending") {
			t.Errorf("get resourceclaim before the pod:\n%s", out)
		}
		applyDoc(t, g, docs[1])
		p := draWaitEnded(t, c, gpuNS, "dra-pod-v1beta1", 30*time.Second)
		if p.Status.Phase != api.PodSucceeded {
			t.Errorf("pod: %s", podSummary([]*api.Pod{p}))
		}
		// The pod ended: the claim is no longer reserved (and the
		// controller deallocates a claim nobody uses); the node unprepared it.
		out := draLogs(t, c, gpuNS, p.Name, "")
		known := false
		for _, u := range uuidOf {
			known = known || strings.Contains(out, u)
		}
		if strings.Count(out, "GPU-") != 1 || !known {
			t.Errorf("nvidia-smi -L in the v1beta1 claim's pod lists %d GPUs, want one of the node's:\n%s", strings.Count(out, "GPU-"), out)
		}
		testwait.Until(t, 20*time.Second, func() (bool, string) {
			cl, err := client.Get[*api.ResourceClaim](ctx, c, gpuNS, claim)
			if err != nil {
				return false, err.Error()
			}
			return len(cl.Status.ReservedFor) == 0 && len(draPrepared(t, g)) == 0, fmt.Sprintf("reservedFor %v, prepared %v", cl.Status.ReservedFor, draPrepared(t, g))
		})
		g.cli(t, "delete", "pod", p.Name)
		g.cli(t, "delete", "resourceclaim", claim)
		testwait.Until(t, 30*time.Second, func() (bool, string) {
			_, err := client.Get[*api.ResourceClaim](ctx, c, gpuNS, claim)
			return api.IsNotFound(err) && len(draPrepared(t, g)) == 0, fmt.Sprintf("claim: %v, prepared %v", err, draPrepared(t, g))
		})
	})

	t.Run("SkiffApplyV1beta1File", func(t *testing.T) {
		// The same file through skiff apply -f: the client converts it to
		// v1, keeps the v1beta1 annotation, and a second apply is
		// unchanged. (ClaimStatesAndV1beta1 deleted its objects of these
		// names: wait until the pod is gone.)
		testwait.Until(t, 30*time.Second, func() (bool, string) {
			_, err := client.Get[*api.Pod](ctx, c, gpuNS, "dra-pod-v1beta1")
			return api.IsNotFound(err), fmt.Sprintf("pod: %v", err)
		})
		const file = "../examples/dra/v1beta1-claim.yaml"
		out := g.cli(t, "apply", "-f", file)
		for _, want := range []string{"resourceclaim.resource.k8s.io/gpu-claim-v1beta1 created", "pod/dra-pod-v1beta1 created"} {
			if !strings.Contains(out, want) {
				t.Errorf("skiff apply -f %s: no %q in\n%s", file, want, out)
			}
		}
		p := draWaitEnded(t, c, gpuNS, "dra-pod-v1beta1", 30*time.Second)
		if p.Status.Phase != api.PodSucceeded {
			t.Errorf("pod: %s", podSummary([]*api.Pod{p}))
		}
		if logs := draLogs(t, c, gpuNS, p.Name, ""); strings.Count(logs, "GPU-") != 1 {
			t.Errorf("nvidia-smi -L lists %d GPUs, want 1:\n%s", strings.Count(logs, "GPU-"), logs)
		}
		if again := g.cli(t, "apply", "-f", file); strings.Count(again, " unchanged") != 2 {
			t.Errorf("second skiff apply -f %s, want both unchanged:\n%s", file, again)
		}
		g.cli(t, "delete", "-f", file)
		testwait.Until(t, 30*time.Second, func() (bool, string) {
			_, err := client.Get[*api.ResourceClaim](ctx, c, gpuNS, "gpu-claim-v1beta1")
			return api.IsNotFound(err) && len(draPrepared(t, g)) == 0, fmt.Sprintf("claim: %v, prepared %v", err, draPrepared(t, g))
		})
	})

	t.Run("UnsatisfiableSelectorPending", func(t *testing.T) {
		// An H100 asked of a DGX A100: Kubernetes' FailedScheduling
		// words, and skiff's explanation naming the request and the
		// selector that ruled the node's GPUs out.
		const selector = `device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"`
		claim := &api.ResourceClaim{ObjectMeta: api.ObjectMeta{Name: "want-h100", Namespace: gpuNS}}
		claim.Spec.Devices.Requests = []api.DeviceRequest{{Name: "gpu", Exactly: &api.ExactDeviceRequest{
			DeviceClassName: api.NVIDIAGPUDeviceClassName,
			Selectors:       []api.DeviceSelector{{CEL: &api.CELDeviceSelector{Expression: selector}}},
		}}}
		if _, err := c.Create(ctx, claim); err != nil {
			t.Fatal(err)
		}
		p := gpuPod("h100-pod", 0, "nvidia-smi -L")
		p.Spec.Containers[0].Image = gpuImage
		p.Spec.Containers[0].Resources.Claims = []api.ContainerResourceClaim{{Name: "gpu"}}
		p.Spec.ResourceClaims = []api.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim.Name}}
		g.create(t, p)
		const k8sWords = "0/1 nodes are available: 1 cannot allocate all claims."
		testwait.Until(t, 20*time.Second, func() (bool, string) {
			p, err := client.Get[*api.Pod](ctx, c, gpuNS, p.Name)
			if err != nil {
				return false, err.Error()
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == api.PodScheduled && cond.Status == api.ConditionFalse && strings.Contains(cond.Message, k8sWords) {
					return true, ""
				}
			}
			return false, podSummary([]*api.Pod{p})
		})
		testwait.Until(t, 10*time.Second, func() (bool, string) { // the recorder posts events on its own
			var reasons []string
			for _, ev := range eventsFor(t, c, gpuNS, p.Name) {
				if ev.Reason == "FailedScheduling" && strings.Contains(ev.Message, k8sWords) {
					return true, ""
				}
				reasons = append(reasons, ev.Reason+": "+ev.Message)
			}
			return false, fmt.Sprintf("no FailedScheduling event with %q: %q", k8sWords, reasons)
		})
		if got, err := client.Get[*api.Pod](ctx, c, gpuNS, p.Name); err != nil || got.Spec.NodeName != "" || got.Status.Phase != api.PodPending {
			t.Errorf("the pod is not Pending unbound: %v %s", err, podSummary([]*api.Pod{got}))
		}
		if cl, err := client.Get[*api.ResourceClaim](ctx, c, gpuNS, claim.Name); err != nil || cl.Status.Allocation != nil {
			t.Errorf("the claim no device satisfies is allocated: %v %+v", err, cl)
		}
		explained := []string{
			"claim " + gpuNS + "/want-h100, request gpu",
			"8 ruled out by the request's selector #0",
			selector,
			"closest: ",
		}
		for _, cmd := range [][]string{{"describe", "pod", p.Name}, {"trace", "pod", p.Name}} {
			out := g.cli(t, cmd...)
			for _, want := range append([]string{"cannot allocate all claims"}, explained...) {
				if !strings.Contains(out, want) {
					t.Errorf("skiff %s: no %q in\n%s", strings.Join(cmd, " "), want, out)
				}
			}
		}
		g.cli(t, "delete", "pod", p.Name)
		g.cli(t, "delete", "resourceclaim", claim.Name)
		testwait.Until(t, 30*time.Second, func() (bool, string) {
			_, err := client.Get[*api.ResourceClaim](ctx, c, gpuNS, claim.Name)
			_, perr := client.Get[*api.Pod](ctx, c, gpuNS, p.Name)
			return api.IsNotFound(err) && api.IsNotFound(perr), fmt.Sprintf("claim: %v, pod: %v", err, perr)
		})
	})

	t.Run("MatchAttributeNVLinkPair", func(t *testing.T) {
		// Two GPUs with one skiff.dev/nvlinkDomain: NVLink-connected in
		// the node's topology and in nvidia-smi topo -m in the container.
		// (Every GPU of a DGX A100 is on its NVSwitches, one domain; the
		// scheduler's tests have nodes with two domains.)
		// The example's pod, kept running after nvidia-smi: a claim is
		// deallocated once no pod uses it.
		b, err := os.ReadFile("../examples/dra/two-gpus-nvlink.yaml")
		if err != nil {
			t.Fatal(err)
		}
		// It prints a line once its TERM trap is set: deleted before
		// that, it would sit out the 30 s grace period.
		const trapSet = "TERM trap set"
		doc := strings.Replace(string(b), `nvidia-smi topo -m"]`, `nvidia-smi topo -m; trap 'exit 0' TERM; echo `+trapSet+`; while true; do sleep 1; done"]`, 1)
		if doc == string(b) {
			t.Fatal("the example's command changed: update this test")
		}
		file := filepath.Join(t.TempDir(), "two-gpus-nvlink.yaml")
		if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		g.cli(t, "apply", "-f", file)
		p := draWaitPhase(t, c, gpuNS, "nvlink-pair", api.PodRunning, 30*time.Second)
		cl, err := client.Get[*api.ResourceClaim](ctx, c, gpuNS, "two-linked-gpus")
		if err != nil {
			t.Fatal(err)
		}
		if cl.Status.Allocation == nil || len(cl.Status.Allocation.Devices.Results) != 2 {
			t.Fatalf("allocation %+v, want two devices", cl.Status.Allocation)
		}
		slice, err := client.Get[*api.ResourceSlice](ctx, c, "", gpudriver.SliceName(gpuNode))
		if err != nil {
			t.Fatal(err)
		}
		type dev struct {
			index  int
			domain int64
			uuid   string
		}
		byName := map[string]dev{}
		for _, d := range slice.Spec.Devices {
			idx, dom := d.Attributes["index"].IntValue, d.Attributes[gpudriver.AttrNVLinkDomain].IntValue
			if idx == nil || dom == nil {
				t.Fatalf("device %s: index %v, %s %v", d.Name, idx, gpudriver.AttrNVLinkDomain, dom)
			}
			byName[d.Name] = dev{int(*idx), *dom, *d.Attributes["uuid"].StringValue}
		}
		var pair []dev
		for _, r := range cl.Status.Allocation.Devices.Results {
			d, ok := byName[r.Device]
			if r.Request != "gpus" || r.Driver != gpudriver.DriverName || r.Pool != gpuNode || !ok {
				t.Fatalf("allocation result %+v: not a device of the node's slice", r)
			}
			pair = append(pair, d)
		}
		if pair[0].index == pair[1].index || pair[0].domain != pair[1].domain {
			t.Errorf("allocated %+v: want two GPUs of one NVLink domain", pair)
		}
		ng, err := gputopology.ParseNodeGPUs(g.node(t).Annotations[gputopology.AnnotationTopology])
		if err != nil {
			t.Fatal(err)
		}
		if l := ng.Topology.Link(pair[0].index, pair[1].index); l.NVLinks == 0 {
			t.Errorf("GPUs %d and %d: link %s in the node's topology, want NVLinks", pair[0].index, pair[1].index, l)
		}
		var out string
		testwait.Until(t, 10*time.Second, func() (bool, string) {
			out = draLogs(t, c, gpuNS, p.Name, "")
			return strings.Contains(out, "\nGPU1") && strings.Contains(out, trapSet), out // topo -m printed its rows; the trap is set
		})
		if strings.Count(out, "GPU-") != 2 || !strings.Contains(out, pair[0].uuid) || !strings.Contains(out, pair[1].uuid) {
			t.Errorf("nvidia-smi -L: want exactly %s and %s:\n%s", pair[0].uuid, pair[1].uuid, out)
		}
		if !regexp.MustCompile(`(?m)^GPU0\s+X\s+NV\d+\b`).MatchString(out) || !regexp.MustCompile(`(?m)^GPU1\s+NV\d+\s+X\b`).MatchString(out) {
			t.Errorf("nvidia-smi topo -m: want NV# between GPU0 and GPU1:\n%s", out)
		}
		g.cli(t, "delete", "-f", file)
		testwait.Until(t, 30*time.Second, func() (bool, string) {
			_, err := client.Get[*api.ResourceClaim](ctx, c, gpuNS, "two-linked-gpus")
			return api.IsNotFound(err) && len(draPrepared(t, g)) == 0, fmt.Sprintf("claim: %v, prepared %v", err, draPrepared(t, g))
		})
	})

	t.Run("ChurnNeverHoldsAGPUTwice", func(t *testing.T) {
		tmpl := &api.ResourceClaimTemplate{ObjectMeta: api.ObjectMeta{Name: "single-gpu", Namespace: gpuNS}}
		tmpl.Spec.Spec.Devices.Requests = []api.DeviceRequest{{Name: "gpu", Exactly: &api.ExactDeviceRequest{DeviceClassName: api.NVIDIAGPUDeviceClassName}}}
		if _, err := c.Create(ctx, tmpl); err != nil {
			t.Fatal(err)
		}
		claimPod := func(name string) *api.Pod {
			p := gpuPod(name, 0, gpuSleep)
			p.Spec.Containers[0].Image = gpuImage
			p.Spec.Containers[0].Resources.Claims = []api.ContainerResourceClaim{{Name: "gpu"}}
			p.Spec.ResourceClaims = []api.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl.Name}}
			return p
		}
		// The two checkpoints are two files read one after the other: a
		// GPU counts as the device plugin's when a pod holds it in a read
		// before the driver's checkpoint and in one after (a pod is given
		// its GPUs once and releases them once), so a GPU handed over
		// between the reads is not taken for one held twice.
		check := func(step string) {
			t.Helper()
			before := g.gpuCheckpoint(t)
			prepared := draPrepared(t, g)
			after := g.gpuCheckpoint(t)
			holder := map[string]string{}
			for pod, ids := range before {
				for _, id := range ids {
					if slices.Contains(after[pod], id) {
						holder[id] = "device plugin " + pod
					}
				}
			}
			for id, claim := range prepared {
				if other, ok := holder[id]; ok {
					t.Fatalf("%s: GPU %s is held by %s and by claim %s", step, id, other, claim)
				}
				holder[id] = claim
			}
			g.gpuNoDoubleUse(t)
		}
		n := 0
		create := func(claims, plugins int) {
			for range claims {
				n++
				g.create(t, claimPod(fmt.Sprintf("claim-%d", n)))
				check("create")
			}
			for range plugins {
				n++
				g.create(t, gpuPod(fmt.Sprintf("plugin-%d", n), 1, gpuSleep))
				check("create")
			}
		}
		waitSettled := func() {
			testwait.Until(t, 60*time.Second, func() (bool, string) {
				check("settle")
				ps := listPods(t, c, gpuNS, "app=gpu-test")
				running := 0
				for _, p := range ps {
					if p.Status.Phase == api.PodRunning {
						running++
					}
				}
				msg := podSummary(ps)
				for _, p := range ps {
					if p.Status.Phase != api.PodRunning {
						for _, ev := range eventsFor(t, c, gpuNS, p.Name) {
							msg += "\nEVENT " + p.Name + " " + ev.Reason + ": " + ev.Message
						}
					}
				}
				return running == min(len(ps), 8), msg
			})
		}
		create(4, 4)
		waitSettled()
		for round := range 2 {
			ps := listPods(t, c, gpuNS, "app=gpu-test")
			for i, p := range ps {
				if i%2 == round%2 {
					if err := c.Delete(ctx, api.MustKindOf(p), gpuNS, p.Name, api.DeleteOptions{}); err != nil && !api.IsNotFound(err) {
						t.Fatal(err)
					}
					check("delete")
				}
			}
			if round == 0 {
				g.agent.kill(t) // kill -9: the checkpoints are the truth
				check("killed")
				g.gpuStartAgent(t)
				check("restarted")
			}
			create(2, 2)
			waitSettled()
		}
		// How often this run met the race (for the log; it may be none):
		// claims the scheduler took back because the node was handing
		// their GPU to a device plugin pod.
		evs, _, err := client.List[*api.Event](ctx, c, gpuNS, api.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		takenBack := 0
		for _, e := range evs {
			if strings.Contains(e.Message, "allocation taken back") {
				takenBack += max(1, int(e.Count))
			}
		}
		t.Logf("allocations taken back (their GPU left the slice for a device plugin pod): %d", takenBack)
		g.deleteAll(t)
		testwait.Until(t, 30*time.Second, func() (bool, string) {
			check("end")
			return len(draPrepared(t, g)) == 0, fmt.Sprintf("prepared %v", draPrepared(t, g))
		})
	})

	// Last: it restarts the agent with --dra-dynamic-mig.
	t.Run("DynamicMIGPartitions", func(t *testing.T) { draDynamicMIG(t, g, pluginTook) })
}

// draPrepared reads the GPU driver's checkpoint: GPU UUID → claim.
func draPrepared(t *testing.T, g *gpuCluster) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(g.dataDir, "plugins", gpudriver.DriverName, gpudriver.CheckpointName))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var ck struct {
		Claims map[string]struct {
			Namespace, Name string
			Devices         []struct{ UUID string }
		}
	}
	if err := json.Unmarshal(b, &ck); err != nil {
		t.Fatalf("driver checkpoint: %v", err)
	}
	out := map[string]string{}
	for _, c := range ck.Claims {
		for _, d := range c.Devices {
			if other, ok := out[d.UUID]; ok {
				t.Fatalf("GPU %s prepared for two claims: %s and %s/%s", d.UUID, other, c.Namespace, c.Name)
			}
			out[d.UUID] = c.Namespace + "/" + c.Name
		}
	}
	return out
}

func draClaims(t *testing.T, c *client.Client, ns string) []*api.ResourceClaim {
	t.Helper()
	out, _, err := client.List[*api.ResourceClaim](context.Background(), c, ns, api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func draWaitPhase(t *testing.T, c *client.Client, ns, name, phase string, timeout time.Duration) *api.Pod {
	t.Helper()
	var p *api.Pod
	testwait.Until(t, timeout, func() (bool, string) {
		var err error
		p, err = client.Get[*api.Pod](context.Background(), c, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == phase, podSummary([]*api.Pod{p})
	})
	return p
}

func draWaitEnded(t *testing.T, c *client.Client, ns, name string, timeout time.Duration) *api.Pod {
	t.Helper()
	var p *api.Pod
	testwait.Until(t, timeout, func() (bool, string) {
		var err error
		p, err = client.Get[*api.Pod](context.Background(), c, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == api.PodSucceeded || p.Status.Phase == api.PodFailed, podSummary([]*api.Pod{p})
	})
	return p
}

func draLogs(t *testing.T, c *client.Client, ns, pod, container string) string {
	t.Helper()
	path := "/api/v1/namespaces/" + ns + "/pods/" + pod + "/log"
	if container != "" {
		path += "?container=" + container
	}
	var out string
	// The container may not have printed yet: nvidia-smi -L runs first.
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		body, err := c.Stream(context.Background(), path)
		if err != nil {
			return false, err.Error()
		}
		defer body.Close()
		b, err := io.ReadAll(body)
		out = string(b)
		return err == nil && strings.Contains(out, "GPU"), out
	})
	return out
}

// splitDocs reads a multi-document YAML file.
func splitDocs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range strings.Split(string(b), "\n---\n") {
		if strings.TrimSpace(d) != "" {
			out = append(out, d)
		}
	}
	return out
}

// devicePluginPod is gpu-test1's pod with the GPU from the device plugin.
const devicePluginPod = `apiVersion: v1
kind: Pod
metadata:
  namespace: gpu-test1
  name: plugin-pod
spec:
  containers:
  - name: ctr
    image: nvidia/cuda:12.4.0-base-ubuntu22.04
    command: ["sh", "-c"]
    args: ["nvidia-smi -L; trap 'exit 0' TERM; sleep 9999 & wait"]
    resources:
      limits:
        nvidia.com/gpu: 1
`

func applyDoc(t *testing.T, g *gpuCluster, doc string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "doc.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	g.cli(t, "apply", "-f", f)
}
