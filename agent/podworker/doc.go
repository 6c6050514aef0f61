// Package podworker is the kubelet's heart: it turns a Pod bound to this
// node into running containers and reports what happened.
//
// Sync(pod) is a reconcile: it reads the pod (desired) and the runtime's
// containers labelled with the pod's uid (actual), and takes the next step:
//
//	Pending ──▶ ContainerCreating (volumes, image pull, create, start)
//	        ──▶ Running ──▶ Succeeded | Failed          (restartPolicy Never/OnFailure)
//	                   └──▶ restart with backoff        (CrashLoopBackOff while waiting)
//
// Invariants:
//   - Containers are found by label (pod uid, container name, attempt), never
//     by memory: an agent restarted mid-flight adopts what is running and
//     starts no duplicate. Container IDs are derived from uid, name and
//     attempt, so a retried create is idempotent.
//   - A restart is a new container (attempt+1); the previous one is kept
//     until the next restart so `skiff logs --previous` can read it.
//   - Restarts and image pulls back off as the kubelet's (client/backoff):
//     the first restart at once, then BaseBackoff doubling to MaxBackoff
//     (10 s to 5 min), starting over once a container ran 10 minutes or
//     a pull succeeds. The delays live in memory: an agent restart resets
//     them, never a container.
//   - Status is written after every transition, and only when it changed.
//   - A pod with a deletionTimestamp is stopped (SIGTERM, then SIGKILL after
//     its grace period) and then removed from the API with grace 0: the
//     node is the one that says "gone".
//
// # hostPath and the kubelet's root directory
//
// A hostPath is the node's own path, except below /var/lib/kubelet (the
// kubelet's --root-dir, KubeletRootDir): the agent's data directory plays
// that part (Config.RootDir; it holds device-plugins/, pods/, seccomp/,
// plugins_registry/ as the kubelet's root does), so /var/lib/kubelet/X is
// DATA-DIR/X (NodePath). That is how NVIDIA's device plugin DaemonSet, or
// skiff's own (examples/workloads/skiff-device-plugin-daemonset.yaml),
// mounting /var/lib/kubelet/device-plugins, finds this node's kubelet.sock
// unchanged, and why two nodes on one machine (`skiff up --nodes 2`) each
// get their own. Who may mount a hostPath is unchanged: Pod Security's
// admission decides on the path as written (baseline and restricted
// refuse every hostPath; kube-system is privileged), and the API refuses
// a path with "..", so a mapped path never climbs out of the data
// directory.
package podworker
