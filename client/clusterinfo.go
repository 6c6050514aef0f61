package client

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ClusterInfoKubeconfig is the kubeconfig kubeadm keeps in kube-public's
// cluster-info ConfigMap (api.ClusterInfoConfigMap): one cluster, named
// "", with the API server's address and the cluster CA; no users, no
// contexts, no credentials (kubeadm's clusterinfo phase copies the
// cluster of admin.conf into an otherwise empty clientcmdapi.Config).
func ClusterInfoKubeconfig(server string, caPEM []byte) ([]byte, error) {
	cl := clientcmdapi.NewCluster()
	cl.Server = server
	cl.CertificateAuthorityData = caPEM
	b, err := clientcmd.Write(clientcmdapi.Config{Clusters: map[string]*clientcmdapi.Cluster{"": cl}})
	if err != nil {
		return nil, fmt.Errorf("encode cluster-info kubeconfig: %w", err)
	}
	return b, nil
}
