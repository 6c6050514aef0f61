package api

import (
	"strings"
	"testing"
)

// A RoleBinding's roleRef cannot change, as Kubernetes says.
func TestRoleRefImmutable(t *testing.T) {
	old := &RoleBinding{ObjectMeta: ObjectMeta{Name: "b", Namespace: "a"}, RoleRef: RoleRef{APIGroup: RBACGroup, Kind: "Role", Name: "x"}}
	n := *old
	n.RoleRef.Name = "y"
	errs := ValidateUpdate(&n, old)
	if len(errs) == 0 || !strings.Contains(errs.Error(), "roleRef: Invalid value") || !strings.Contains(errs.Error(), "cannot change roleRef") {
		t.Fatalf("roleRef changed: %v", errs)
	}
}
