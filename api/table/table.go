package table

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"skiff.dev/skiff/api"
)

// Printer is the table of one kind.
type Printer struct {
	// Columns in order; Priority 1 columns are -o wide only.
	Columns []metav1.TableColumnDefinition
	// Cells returns one cell per column for obj (an object of the
	// printer's kind): a string, an int64 or a bool. now is the time ages
	// are measured from.
	Cells func(obj api.Object, now time.Time) []any
}

// printers names each kind's printer, by api.Kind.GroupKind().
var printers = map[string]func() Printer{
	"Namespace":                           namespacePrinter,
	"ConfigMap":                           configMapPrinter,
	"Secret":                              secretPrinter,
	"Pod":                                 podPrinter,
	"Service":                             servicePrinter,
	"Endpoints":                           endpointsPrinter,
	"Node":                                nodePrinter,
	"Event":                               eventPrinter,
	"Deployment.apps":                     deploymentPrinter,
	"ReplicaSet.apps":                     replicaSetPrinter,
	"DaemonSet.apps":                      daemonSetPrinter,
	"StatefulSet.apps":                    statefulSetPrinter,
	"ControllerRevision.apps":             controllerRevisionPrinter,
	"Job.batch":                           jobPrinter,
	"CronJob.batch":                       cronJobPrinter,
	"HorizontalPodAutoscaler.autoscaling": hpaPrinter,
	"PriorityClass.scheduling.k8s.io":     priorityClassPrinter,
	"PodDisruptionBudget.policy":          podDisruptionBudgetPrinter,
	"Lease.coordination.k8s.io":           leasePrinter,
	"EndpointSlice.discovery.k8s.io":      endpointSlicePrinter,
	"PodGroup.scheduling.x-k8s.io":        podGroupPrinter,
	"PersistentVolume":                    persistentVolumePrinter, // storage.go
	"PersistentVolumeClaim":               persistentVolumeClaimPrinter,
	"StorageClass.storage.k8s.io":         storageClassPrinter,
	"ResourceQuota":                       resourceQuotaPrinter, // quota.go
	"LimitRange":                          limitRangePrinter,
	"ResourceClaim.resource.k8s.io":       resourceClaimPrinter,
	"ResourceSlice.resource.k8s.io":       resourceSlicePrinter,
	"ClusterQueue.kueue.x-k8s.io":         clusterQueuePrinter, // kueue.go
	"LocalQueue.kueue.x-k8s.io":           localQueuePrinter,
	"Workload.kueue.x-k8s.io":             workloadPrinter,
	"CertificateSigningRequest." + api.CertificatesGroup: csrPrinter,  // certificates.go
	"Role." + api.RBACGroup:                              rolePrinter, // rbac.go
	"ClusterRole." + api.RBACGroup:                       rolePrinter,
	"RoleBinding." + api.RBACGroup:                       bindingPrinter,
	"ClusterRoleBinding." + api.RBACGroup:                bindingPrinter,
}

// For returns the printer of kind k: its own columns, or NAME AGE.
func For(k *api.Kind) Printer {
	if p, ok := printers[k.GroupKind()]; ok {
		return p()
	}
	return defaultPrinter()
}

// defaultPrinter is NAME AGE, for kinds without columns of their own.
func defaultPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{nameColumn(), ageColumn()},
		Cells: func(o api.Object, now time.Time) []any {
			m := o.GetObjectMeta()
			return []any{m.Name, Age(now, m.CreationTimestamp.Time)}
		},
	}
}

// Headers are the names kubectl prints above the columns shown: the
// priority 0 ones, and with wide the others too, in upper case.
func Headers(cols []metav1.TableColumnDefinition, wide bool) []string {
	var h []string
	for _, c := range cols {
		if Shown(c, wide) {
			h = append(h, strings.ToUpper(c.Name))
		}
	}
	return h
}

// Shown reports whether kubectl shows column c (always, or with -o wide).
func Shown(c metav1.TableColumnDefinition, wide bool) bool { return c.Priority == 0 || wide }

// FormatCell prints one cell as kubectl's table printer does: a string up
// to its first line break ("..." marks the cut), anything else with %v,
// nil as nothing.
func FormatCell(v any) string {
	switch c := v.(type) {
	case nil:
		return ""
	case string:
		if i := strings.IndexAny(c, "\f\n\r"); i >= 0 {
			return c[:i] + "..."
		}
		return c
	default:
		return fmt.Sprint(c)
	}
}

// Age is kubectl's age of t at now ("5s", "3m12s", "2d", "4y17d"), or
// "<unknown>" for the zero time.
func Age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// OrNone returns s, or "<none>" when s is empty (kubectl's empty cell).
func OrNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func nameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}
}

func ageColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}
}

// col is a column of type string.
func col(name, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Description: description}
}

// wideCol is a priority 1 (-o wide) column of type string.
func wideCol(name, description string) metav1.TableColumnDefinition {
	c := col(name, description)
	c.Priority = 1
	return c
}

// typed returns c with its type changed ("integer", "boolean").
func typed(c metav1.TableColumnDefinition, typ string) metav1.TableColumnDefinition {
	c.Type = typ
	return c
}
