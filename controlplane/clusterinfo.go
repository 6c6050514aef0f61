package controlplane

import (
	"context"
	"fmt"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/apiserver"
)

// ensureClusterInfo keeps kube-public/cluster-info as kubeadm writes it
// (client.ClusterInfoKubeconfig: this server's address and the cluster
// CA, no credentials), so tools that discover a cluster from it find
// this one. It is created when missing and rewritten when the address or
// CA changed (a server started on another address); otherwise left alone.
// With several servers, the one that started last is named.
func ensureClusterInfo(ctx context.Context, reg *apiserver.Registry, server string, caPEM []byte) error {
	kc, err := client.ClusterInfoKubeconfig(server, caPEM)
	if err != nil {
		return err
	}
	cm := &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: api.ClusterInfoConfigMap, Namespace: api.NamespacePublic},
		Data: map[string]string{api.ClusterInfoKubeconfigKey: string(kc)}}
	k := api.MustKindOf(cm)
	for attempt := 0; ; attempt++ {
		cur, err := reg.Get(ctx, k, cm.Namespace, cm.Name)
		switch {
		case api.IsNotFound(err):
			_, err = reg.Create(ctx, k, cm)
		case err == nil:
			old := cur.(*api.ConfigMap)
			if old.Data[api.ClusterInfoKubeconfigKey] == string(kc) {
				return nil
			}
			next := api.Clone(old)
			if next.Data == nil {
				next.Data = map[string]string{}
			}
			next.Data[api.ClusterInfoKubeconfigKey] = string(kc)
			_, err = reg.Update(ctx, k, next)
		}
		if err == nil {
			return nil
		}
		if (!api.IsConflict(err) && !api.IsAlreadyExists(err)) || attempt == 3 {
			return fmt.Errorf("write %s/%s: %w", api.NamespacePublic, api.ClusterInfoConfigMap, err)
		}
	}
}
