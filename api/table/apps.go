package table

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
)

// The apps group (apps/v1) kinds, as Kubernetes' printers.

// templateColumns are CONTAINERS IMAGES SELECTOR of -o wide.
func templateColumns(selectorDoc string) []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		wideCol("Containers", "Names of each container in the template."),
		wideCol("Images", "Images referenced by each container in the template."),
		wideCol("Selector", selectorDoc),
	}
}

func deploymentPrinter() Printer {
	status := appsv1.DeploymentStatus{}.SwaggerDoc()
	return Printer{
		Columns: append([]metav1.TableColumnDefinition{
			nameColumn(),
			col("Ready", "Number of the pod with ready state"),
			col("Up-to-date", status["updatedReplicas"]),
			col("Available", status["availableReplicas"]),
			ageColumn(),
		}, templateColumns(appsv1.DeploymentSpec{}.SwaggerDoc()["selector"])...),
		Cells: func(o api.Object, now time.Time) []any {
			d := o.(*api.Deployment)
			names, images := containerCells(d.Spec.Template.Spec)
			return []any{d.Name, fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, Replicas(d.Spec.Replicas)),
				int64(d.Status.UpdatedReplicas), int64(d.Status.AvailableReplicas), Age(now, d.CreationTimestamp.Time),
				names, images, Selector(d.Spec.Selector)}
		},
	}
}

func replicaSetPrinter() Printer {
	spec, status := appsv1.ReplicaSetSpec{}.SwaggerDoc(), appsv1.ReplicaSetStatus{}.SwaggerDoc()
	return Printer{
		Columns: append([]metav1.TableColumnDefinition{
			nameColumn(),
			typed(col("Desired", spec["replicas"]), "integer"),
			typed(col("Current", status["replicas"]), "integer"),
			typed(col("Ready", status["readyReplicas"]), "integer"),
			ageColumn(),
		}, templateColumns(spec["selector"])...),
		Cells: func(o api.Object, now time.Time) []any {
			rs := o.(*api.ReplicaSet)
			names, images := containerCells(rs.Spec.Template.Spec)
			return []any{rs.Name, int64(Replicas(rs.Spec.Replicas)), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas),
				Age(now, rs.CreationTimestamp.Time), names, images, Selector(rs.Spec.Selector)}
		},
	}
}

func daemonSetPrinter() Printer {
	spec, status := appsv1.DaemonSetSpec{}.SwaggerDoc(), appsv1.DaemonSetStatus{}.SwaggerDoc()
	return Printer{
		Columns: append([]metav1.TableColumnDefinition{
			nameColumn(),
			typed(col("Desired", status["desiredNumberScheduled"]), "integer"),
			typed(col("Current", status["currentNumberScheduled"]), "integer"),
			typed(col("Ready", status["numberReady"]), "integer"),
			typed(col("Up-to-date", status["updatedNumberScheduled"]), "integer"),
			typed(col("Available", status["numberAvailable"]), "integer"),
			col("Node Selector", corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]),
			ageColumn(),
		}, templateColumns(spec["selector"])...),
		Cells: func(o api.Object, now time.Time) []any {
			d := o.(*api.DaemonSet)
			st := d.Status
			names, images := containerCells(d.Spec.Template.Spec)
			return []any{d.Name, int64(st.DesiredNumberScheduled), int64(st.CurrentNumberScheduled), int64(st.NumberReady),
				int64(st.UpdatedNumberScheduled), int64(st.NumberAvailable), labels.FormatLabels(d.Spec.Template.Spec.NodeSelector),
				Age(now, d.CreationTimestamp.Time), names, images, Selector(d.Spec.Selector)}
		},
	}
}

// statefulSetPrinter is kubectl's printStatefulSet: NAME READY AGE; wide
// CONTAINERS IMAGES.
func statefulSetPrinter() Printer {
	return Printer{
		Columns: append([]metav1.TableColumnDefinition{nameColumn(), col("Ready", "Number of the pod with ready state"), ageColumn()},
			templateColumns("")[:2]...),
		Cells: func(o api.Object, now time.Time) []any {
			s := o.(*api.StatefulSet)
			names, images := containerCells(s.Spec.Template.Spec)
			return []any{s.Name, fmt.Sprintf("%d/%d", s.Status.ReadyReplicas, Replicas(s.Spec.Replicas)), Age(now, s.CreationTimestamp.Time), names, images}
		},
	}
}

// controllerRevisionPrinter is NAME CONTROLLER REVISION AGE, the
// controller as "daemonset.apps/NAME" (kubectl's printControllerRevision).
func controllerRevisionPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("Controller", "Controller of the object"),
			col("Revision", appsv1.ControllerRevision{}.SwaggerDoc()["revision"]),
			ageColumn(),
		},
		Cells: func(o api.Object, now time.Time) []any {
			r := o.(*api.ControllerRevision)
			return []any{r.Name, ControllerName(r), r.Revision, Age(now, r.CreationTimestamp.Time)}
		},
	}
}

// ControllerName is an object's controller as kubectl names it
// ("daemonset.apps/fluentd"), or "<none>".
func ControllerName(o api.Object) string {
	ref := api.ControllerOf(o)
	if ref == nil {
		return "<none>"
	}
	gk := ref.Kind
	if group, _, ok := strings.Cut(ref.APIVersion, "/"); ok {
		gk += "." + group
	}
	return strings.ToLower(gk) + "/" + ref.Name
}

// Replicas reads a *int32 replica count; unset means 1 (the default).
func Replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// Selector is a label selector as kubectl prints it ("app=web"), or
// "<none>" when it selects by nothing.
func Selector(s *api.LabelSelector) string {
	if s == nil {
		return "<none>"
	}
	return OrNone(s.String())
}

// containerCells are CONTAINERS and IMAGES: the names and images of the
// template's containers, comma-separated.
func containerCells(spec api.PodSpec) (string, string) {
	names := make([]string, len(spec.Containers))
	images := make([]string, len(spec.Containers))
	for i, c := range spec.Containers {
		names[i], images[i] = c.Name, c.Image
	}
	return strings.Join(names, ","), strings.Join(images, ",")
}
