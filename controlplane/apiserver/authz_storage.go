package apiserver

import (
	"context"
	"fmt"

	"skiff.dev/skiff/api"
)

// What a node may do with storage. Beyond Kubernetes' Node authorizer
// (which lets a kubelet get the claims of its pods and their volumes):
// skiff's built-in local-path provisioner (agent/localpath) runs in every
// agent with the node's credentials, as k3s's runs with a ServiceAccount
// that reads every claim and volume. So a node may
//
//   - get, list and watch claims and volumes (read only);
//   - create a volume only as its provisioner makes them: provisioned by
//     rancher.io/local-path and usable on that node alone (checked at
//     admission, nodeRestriction: the body is not seen here);
//   - delete only such a volume of its own (its provisioner removes a
//     released volume whose reclaim policy is Delete).
//
// Nothing else: a node never changes a claim or another node's volume.
var persistentVolumeKind = api.MustKindOf(&api.PersistentVolume{})

func (s *Server) authorizeNodeStorage(ctx context.Context, node string, a attributes) (bool, string, error) {
	if a.sub != "" {
		return false, "cannot authorize storage subresources", nil
	}
	switch a.verb {
	case "get", "list", "watch":
		return true, "", nil
	case "create":
		return a.resource == "persistentvolumes", "", nil
	case "delete":
		if a.resource != "persistentvolumes" || a.name == "" {
			return false, "", nil
		}
		o, err := s.reg.Get(ctx, persistentVolumeKind, "", a.name)
		if api.IsNotFound(err) {
			return false, noRelationship(node), nil
		}
		if err != nil {
			return false, "", fmt.Errorf("authorize node %s: %w", node, err)
		}
		if !api.IsLocalPathVolumeOf(o.(*api.PersistentVolume), node) {
			return false, noRelationship(node), nil
		}
		return true, "", nil
	}
	return false, fmt.Sprintf("node %q may not %s %s", node, a.verb, a.resource), nil
}

// nodeRestrictVolume is nodeRestriction's rule for a volume a node creates.
func nodeRestrictVolume(pv *api.PersistentVolume, node string) error {
	if !api.IsLocalPathVolumeOf(pv, node) {
		return forbidden(persistentVolumeKind, pv.Name, fmt.Sprintf("node %q may only create volumes of its own local-path provisioner (provisioned-by %s, node affinity %s In [%s])",
			node, api.LocalPathProvisioner, api.LabelHostname, node))
	}
	return nil
}
