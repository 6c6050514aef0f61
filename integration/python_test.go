package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// pythonClient is a script for the Python client (python3-kubernetes,
// Debian's): it lists nodes (every NodeSystemInfo field is required there),
// creates a pod, watches until it runs, reads its log and execs in it
// with stream() (WebSocket v4.channel.k8s.io), then prints what it saw as
// JSON for the test to check.
const pythonClient = `
import json, sys
from kubernetes import client, config, watch
from kubernetes.stream import stream

config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
out = {}
nodes = v1.list_node().items
out["nodes"] = [n.metadata.name for n in nodes]
out["bootIDs"] = [n.status.node_info.boot_id for n in nodes]

pod = client.V1Pod(
    metadata=client.V1ObjectMeta(name="py"),
    spec=client.V1PodSpec(containers=[client.V1Container(
        name="main", image="busybox:1.36", image_pull_policy="IfNotPresent",
        command=["sh", "-c", "echo hello from the pod; sleep 3600"])]))
v1.create_namespaced_pod("default", pod)

w = watch.Watch()
phases = []
for ev in w.stream(v1.list_namespaced_pod, "default", field_selector="metadata.name=py", timeout_seconds=90):
    phases.append(ev["object"].status.phase)
    if ev["object"].status.phase == "Running":
        w.stop()
out["phases"] = phases

log = ""
for _ in range(50):
    log = v1.read_namespaced_pod_log("py", "default")
    if log:
        break
    import time; time.sleep(0.2)
out["log"] = log

out["exec"] = stream(v1.connect_get_namespaced_pod_exec, "py", "default",
                     command=["sh", "-c", "echo out; echo err >&2"],
                     stderr=True, stdin=False, stdout=True, tty=False)
print(json.dumps(out))
`

// The Python client against a real cluster on containerd, over TLS with the
// kubeconfig kubectl uses.
func TestPythonClient(t *testing.T) {
	const python = "/usr/bin/python3" // Debian's, where python3-kubernetes is
	if err := exec.Command(python, "-c", "import kubernetes").Run(); err != nil {
		t.Skipf("no python3-kubernetes (%v): hack/ci-deps.sh installs it", err)
	}
	e := newCtrdEnv(t)
	cp, _ := startControlPlane(t, nil)
	startServedAgent(t, cp, e.runtime(t), "n1")
	k := kubectlFor(t, cp)

	script := filepath.Join(t.TempDir(), "client.py")
	if err := os.WriteFile(script, []byte(pythonClient), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), python, script, k.Kubeconfig)
	cmd.WaitDelay = time.Second
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("python client: %v\n%s", err, stderr.String())
	}
	var got struct {
		Nodes, BootIDs, Phases []string
		Log, Exec              string
	}
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("python client output %q: %v", stdout, err)
	}
	if len(got.Nodes) != 1 || got.Nodes[0] != "n1" || got.BootIDs[0] == "" {
		t.Errorf("list_node: nodes %v boot ids %v; want n1 with its boot id", got.Nodes, got.BootIDs)
	}
	if n := len(got.Phases); n == 0 || got.Phases[n-1] != "Running" {
		t.Errorf("watch: phases %v; want them to end with Running", got.Phases)
	}
	if got.Log != "hello from the pod\n" {
		t.Errorf("read_namespaced_pod_log: %q", got.Log)
	}
	// stream() without _preload_content=False returns stdout and stderr as
	// they came, in one string.
	if got.Exec != "out\nerr\n" && got.Exec != "err\nout\n" {
		t.Errorf("exec with stream(): %q; want out and err", got.Exec)
	}
}
