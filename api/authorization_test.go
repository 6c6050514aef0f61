package api

import (
	"strings"
	"testing"
)

// skiff has no RBAC: a Role or RoleBinding is refused, saying so.
func TestRBACKindsRefused(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r, namespace: a}\nrules: []\n",
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: b}\n",
	} {
		_, _, err := DecodeAny([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), "no matches for kind") || !strings.Contains(err.Error(), "skiff has no RBAC") {
			t.Errorf("%s: got %v", doc, err)
		}
	}
}
