// Package devices is the kubelet side of the Kubernetes device plugin API
// (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1): the device manager.
//
// A device plugin is a gRPC server on a unix socket that knows one kind of
// device (nvidia.com/gpu, example.com/widget). The sequence is the one the
// course draws:
//
//  1. Register: the plugin calls Registration.Register on the manager's
//     socket (kubelet.sock in the plugin directory) with the API version,
//     its resource name and the name of its own socket in the same
//     directory. The manager checks the request, dials the plugin and asks
//     for its options (GetDevicePluginOptions).
//  2. ListAndWatch: the manager opens the plugin's stream and keeps the
//     device list and each device's health. Capacity of the resource is
//     every device, allocatable the healthy ones (what the node reports,
//     see [Manager.Resources]). When the stream ends the plugin is gone and
//     the resource drops to 0 until it registers again.
//  3. Allocate: when a container that asks for the resource is created, the
//     manager picks free healthy devices (the plugin's
//     GetPreferredAllocation first, when it offers one), calls the plugin's
//     Allocate and turns the answer (CDI device names, env, mounts, device
//     nodes) into a podworker.Allocation. PreStartContainer follows when the
//     plugin asks for it.
//
// The manager never touches a device itself: it only coordinates.
//
// # Who registers
//
// The directory is the node's DATA-DIR/device-plugins. The agent's own GPU
// plugins (agent/devices/gpuplugin) register there unless the node runs
// with --device-plugin=external; then the node's nvidia.com/gpu comes
// from whichever plugin registers, typically a DaemonSet pod
// (examples/workloads/skiff-device-plugin-daemonset.yaml, or NVIDIA's
// static one) that mounts the hostPath /var/lib/kubelet/device-plugins:
// the agent takes /var/lib/kubelet as its data directory, as the kubelet's
// --root-dir (agent/podworker NodePath), so the pod's path is this
// directory. The manager cannot tell the two apart, and need not.
//
// # Invariants
//
//   - A device is held by at most one pod. Allocations are written to a
//     checkpoint (a JSON file in the plugin directory, replaced atomically)
//     before the plugin is asked, and read back at start, so a restarted
//     agent never hands out a device twice.
//   - A device held elsewhere (Config.Unavailable: a DRA claim's GPU) is
//     never picked. A pick is confirmed (Config.Confirm) before it is
//     recorded, and recorded only when Unavailable, asked again under the
//     same lock as the write, still leaves it free; else picked again.
//   - Allocate is idempotent per (pod uid, container): a second call
//     returns the same devices.
//   - Release frees a pod's devices; Retain frees the devices of every pod
//     that is no longer live (the agent's resync).
//   - A bad Register request is rejected with a gRPC InvalidArgument (or
//     Unavailable when the plugin cannot be reached) and changes nothing.
package devices
