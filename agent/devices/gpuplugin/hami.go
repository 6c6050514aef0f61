package gpuplugin

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/cdi"
	"skiff.dev/skiff/api"
)

// HAMiDecision returns the cards the scheduler decided for container of
// pod ("namespace/name") under HAMi: the container's part of the pod's
// hami.io/vgpu-devices-to-allocate.
type HAMiDecision func(ctx context.Context, pod, container string) ([]api.HAMiContainerDevice, error)

// HAMiAllocated is told each HAMi allocation's outcome for container of
// pod: err nil when its cards were handed out (HAMi's plugin then moves
// hami.io/bind-phase on), else why not.
type HAMiAllocated func(ctx context.Context, pod, container string, err error)

// The gRPC metadata with which the device manager tells a plugin whose
// Allocate it is (agent/devices: the kubelet tells a plugin nothing;
// HAMi's plugin finds the pod by its bind phase instead).
const (
	MetadataPod       = "skiff-pod"
	MetadataContainer = "skiff-container"
)

// allocateHAMi answers as HAMi's device plugin: the slots the manager
// picked only count the slices; the cards are the scheduler's decision,
// with HAMi-core's limits in the environment (CUDA_DEVICE_MEMORY_LIMIT_<i>
// in MiB with "m", CUDA_DEVICE_SM_LIMIT in percent).
func (p *Plugin) allocateHAMi(ctx context.Context, req *pluginapi.AllocateRequest, gpus []gpu.Device) (*pluginapi.AllocateResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	pod, ctr := first(md.Get(MetadataPod)), first(md.Get(MetadataContainer))
	if pod == "" || p.cfg.HAMiDecision == nil || len(req.ContainerRequests) != 1 {
		return nil, status.Errorf(codes.InvalidArgument, "HAMi: allocation without its pod")
	}
	resp, err := p.handOutHAMi(ctx, req, gpus, pod, ctr)
	if p.cfg.HAMiAllocated != nil {
		p.cfg.HAMiAllocated(ctx, pod, ctr, err)
	}
	return resp, err
}

// handOutHAMi is container ctr of pod's cards, with HAMi-core's limits.
func (p *Plugin) handOutHAMi(ctx context.Context, req *pluginapi.AllocateRequest, gpus []gpu.Device, pod, ctr string) (*pluginapi.AllocateResponse, error) {
	cards, err := p.cfg.HAMiDecision(ctx, pod, ctr)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "HAMi: pod %s container %s: %v", pod, ctr, err)
	}
	if n := len(req.ContainerRequests[0].DevicesIds); n != len(cards) {
		return nil, status.Errorf(codes.InvalidArgument, "HAMi: pod %s container %s: %d devices asked, %d cards decided", pod, ctr, n, len(cards))
	}
	byUUID := map[string]gpu.Device{}
	for _, d := range gpus {
		byUUID[d.UUID] = d
	}
	car := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{}}
	var visible []string
	for i, c := range cards {
		d, ok := byUUID[c.UUID]
		if !ok {
			return nil, status.Errorf(codes.InvalidArgument, "HAMi: pod %s: card %s is not on this node", pod, c.UUID)
		}
		if !d.Healthy {
			return nil, status.Errorf(codes.FailedPrecondition, "GPU %d (%s) is unhealthy (Xid %d)", d.Index, d.UUID, d.LastXid)
		}
		car.CdiDevices = append(car.CdiDevices, &pluginapi.CDIDevice{Name: cdi.DeviceName(strconv.Itoa(d.Index))})
		visible = append(visible, d.UUID)
		car.Envs[api.HAMiEnvMemoryLimitPrefix+strconv.Itoa(i)] = fmt.Sprintf("%dm", c.Usedmem)
		if c.Usedcores > 0 {
			car.Envs[api.HAMiEnvSMLimit] = strconv.Itoa(int(c.Usedcores))
		}
	}
	car.Envs[EnvVisibleDevices] = strings.Join(visible, ",")
	if p.cfg.HAMiSettings.MemoryScaling > 1 {
		car.Envs[api.HAMiEnvOversubscribe] = "true" // HAMi-core may spill past the card's memory
	}
	return &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{car}}, nil
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// HAMiRegistration is the node's hami.io/node-nvidia-register value: each
// GPU s does not filter with its split count, its memory and 100 cores
// scaled by s (deviceMemoryScaling > 1 oversubscribes), "NVIDIA-<name>",
// its NUMA node and health.
func HAMiRegistration(devs []gpu.Device, s api.HAMiNodeSettings) string {
	out := make([]api.HAMiNodeDevice, 0, len(devs))
	for _, d := range devs {
		if s.Filtered(d.UUID, d.Index) {
			continue
		}
		out = append(out, api.HAMiNodeDevice{ID: d.UUID, Count: int32(s.SplitCount),
			Devmem: s.ScaledMemory(int64(d.MemoryMiB)), Devcore: s.ScaledCores(), Type: "NVIDIA-" + d.Name,
			Numa: max(d.NUMANode, 0), Health: d.Healthy})
	}
	return api.EncodeHAMiNodeDevices(out)
}
