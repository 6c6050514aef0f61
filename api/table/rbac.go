package table

import (
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff.dev/skiff/api"
)

// The rbac.authorization.k8s.io group's kinds, as Kubernetes' printers
// (printRole, printRoleBinding, and their cluster twins).

// rolePrinter is NAME CREATED AT, for Role and ClusterRole.
func rolePrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{nameColumn(),
			{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}},
		Cells: func(o api.Object, _ time.Time) []any {
			m := o.GetObjectMeta()
			return []any{m.Name, m.CreationTimestamp.UTC().Format(time.RFC3339)}
		},
	}
}

// bindingPrinter is NAME ROLE AGE; wide adds USERS GROUPS
// SERVICEACCOUNTS.
func bindingPrinter() Printer {
	doc := rbacv1.RoleBinding{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{nameColumn(), col("Role", doc["roleRef"]), ageColumn(),
			wideCol("Users", "Users in the roleBinding"), wideCol("Groups", "Groups in the roleBinding"),
			wideCol("ServiceAccounts", "ServiceAccounts in the roleBinding")},
		Cells: func(o api.Object, now time.Time) []any {
			var ref api.RoleRef
			var subjects []api.Subject
			switch b := o.(type) {
			case *api.RoleBinding:
				ref, subjects = b.RoleRef, b.Subjects
			case *api.ClusterRoleBinding:
				ref, subjects = b.RoleRef, b.Subjects
			}
			users, groups, sas := SubjectsStrings(subjects)
			m := o.GetObjectMeta()
			return []any{m.Name, ref.Kind + "/" + ref.Name, Age(now, m.CreationTimestamp.Time),
				strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
		},
	}
}

// SubjectsStrings splits subjects as Kubernetes' rbac.SubjectsStrings:
// user names, group names and service accounts as NAMESPACE/NAME (NAME
// alone when the subject names no namespace).
func SubjectsStrings(subjects []api.Subject) (users, groups, sas []string) {
	for _, s := range subjects {
		switch s.Kind {
		case api.SubjectServiceAccount:
			if s.Namespace != "" {
				sas = append(sas, s.Namespace+"/"+s.Name)
			} else {
				sas = append(sas, s.Name)
			}
		case api.SubjectUser:
			users = append(users, s.Name)
		case api.SubjectGroup:
			groups = append(groups, s.Name)
		}
	}
	return users, groups, sas
}
