package plugins

import (
	"context"
	"fmt"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// DefaultBinder writes the scheduler's decision to the API server:
// POST /api/v1/namespaces/NS/pods/NAME/binding with target {kind: Node,
// name: NODE}. The API server sets spec.nodeName (refusing if the pod is
// already bound), the agent on that node sees the pod and starts it.
type DefaultBinder struct {
	Client client.Interface
}

var _ framework.BindPlugin = (*DefaultBinder)(nil)

// Name implements framework.Plugin.
func (*DefaultBinder) Name() string { return DefaultBinderName }

// Bind implements framework.BindPlugin.
func (b *DefaultBinder) Bind(ctx context.Context, _ *framework.CycleState, pod *api.Pod, nodeName string) *framework.Status {
	binding := &api.Binding{
		ObjectMeta: api.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     api.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if err := b.Client.Bind(ctx, binding); err != nil {
		return framework.AsStatus(fmt.Errorf("bind pod %q to node %q: %w", api.Key(pod.Namespace, pod.Name), nodeName, err))
	}
	return nil
}
