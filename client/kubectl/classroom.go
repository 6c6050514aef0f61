package kubectl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// # A lab room of students (`skiff classroom`)
//
// CreateClassroom sets up a room in one command, as a teacher would by
// hand with kubectl on a shared lab cluster; for each student:
//
//   - a namespace named after the student;
//   - the ResourceQuota ClassroomQuota (the room's hard limits: a GPU
//     each, say), and, when the room gives container defaults, the
//     LimitRange ClassroomLimitRange;
//   - the RoleBinding ClassroomBinding of the ClusterRole edit to the user
//     (Kubernetes' edit: workloads, Services, Secrets, ConfigMaps of the
//     namespace; no RBAC, no quota, no status or binding writes);
//   - DIR/STUDENT.kubeconfig: a client certificate (CN the student, O the
//     room) signed by the cluster CA through the CertificateSigningRequest
//     API, the student's namespace as its context's default.
//
// ClassroomStatus lists a room, DeleteClassroom tears it down.
// Invariants:
//
//   - A student is one name: the user, the namespace and the kubeconfig's
//     default namespace. Names are DNS labels (a namespace's rule).
//   - Everything a room makes carries the label api.LabelClassroom=ROOM;
//     ClassroomStatus and DeleteClassroom find a room by it and touch
//     nothing else. DeleteClassroom removes the room's namespaces, and with them all that is in them.
//   - Bad input changes nothing: the roster, the quota, the defaults, the
//     namespaces (one that exists must already be the room's) and the
//     directory are all checked before the first write.
//   - CreateClassroom is idempotent: it reads before it writes; a re-run creates
//     what is missing, brings a changed quota, limit range or binding back
//     to the room's, and keeps a kubeconfig whose certificate is still the
//     student's, from this CA, and not near its end (pki.NeedsRenewal); it
//     issues the others.
//   - A certificate cannot be revoked (as in Kubernetes): once a student's
//     namespace and binding are gone it grants nothing but what every
//     authenticated user may. Its group, the room, grants what the teacher
//     binds to it.

// Names of what a room makes in each student's namespace.
const (
	ClassroomQuota      = "student"
	ClassroomLimitRange = "student"
	ClassroomBinding    = "student-edit"
	// ClassroomRole is the ClusterRole each student is bound to in their
	// namespace: Kubernetes' edit.
	ClassroomRole = "edit"
)

// Classroom is a room of students: what CreateClassroom sets up.
type Classroom struct {
	// Name of the room: the label value and the students' group.
	Name string
	// Students' names: each a user and a namespace (DNS labels).
	Students []string
	// Hard is each student's quota (ResourceQuota ClassroomQuota's spec.hard).
	Hard api.ResourceList
	// DefaultRequest and DefaultLimit are the containers' defaults in each
	// namespace (LimitRange ClassroomLimitRange); both empty: no LimitRange.
	DefaultRequest, DefaultLimit api.ResourceList
	// Dir receives STUDENT.kubeconfig per student (0600; the directory 0700).
	Dir string
	// Expiration of new certificates (0: the signer's maximum, a year).
	Expiration time.Duration
}

// Validate reports what is wrong with the room itself, every problem at
// once: the room's and students' names, a student named twice, the
// objects as the API server would validate them.
func (r Classroom) Validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(r.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("room %q: not a valid label value and group: %s", r.Name, strings.Join(msgs, "; ")))
	}
	if len(r.Students) == 0 {
		errs = append(errs, errors.New("no students"))
	}
	if len(r.Hard) == 0 {
		errs = append(errs, errors.New("no quota: each student's namespace needs hard limits (requests.nvidia.com/gpu=1, say)"))
	}
	if r.Dir == "" {
		errs = append(errs, errors.New("no directory for the kubeconfigs"))
	}
	seen := map[string]bool{}
	for _, s := range r.Students {
		if err := checkStudent(s); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[s] {
			errs = append(errs, fmt.Errorf("student %q named twice", s))
		}
		seen[s] = true
	}
	if len(errs) == 0 && len(r.Students) > 0 {
		// The objects differ only in names: the first student's stand
		// for all.
		for _, o := range r.Objects(r.Students[0]) {
			if fe := api.Validate(o); len(fe) > 0 {
				errs = append(errs, api.NewInvalid(api.MustKindOf(o), o.GetObjectMeta().Name, fe))
			}
		}
	}
	return errors.Join(errs...)
}

// Objects are what the room holds for one student, in the order they are
// created: the namespace, the quota, the limit range (when the room has
// defaults) and the binding.
func (r Classroom) Objects(student string) []api.Object {
	meta := func(name, ns string) api.ObjectMeta {
		return api.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{api.LabelClassroom: r.Name}}
	}
	out := []api.Object{
		&api.Namespace{ObjectMeta: meta(student, "")},
		&api.ResourceQuota{ObjectMeta: meta(ClassroomQuota, student), Spec: api.ResourceQuotaSpec{Hard: r.Hard}},
	}
	if len(r.DefaultRequest) > 0 || len(r.DefaultLimit) > 0 {
		out = append(out, &api.LimitRange{ObjectMeta: meta(ClassroomLimitRange, student), Spec: api.LimitRangeSpec{
			Limits: []api.LimitRangeItem{{Type: api.LimitTypeContainer, Default: r.DefaultLimit, DefaultRequest: r.DefaultRequest}}}})
	}
	out = append(out, &api.RoleBinding{ObjectMeta: meta(ClassroomBinding, student),
		Subjects: []api.Subject{{Kind: api.SubjectUser, APIGroup: api.RBACGroup, Name: student}},
		RoleRef:  api.RoleRef{APIGroup: api.RBACGroup, Kind: "ClusterRole", Name: ClassroomRole}})
	for _, o := range out {
		api.SetTypeMeta(o)
	}
	return out
}

// CertIssuer issues a client certificate for user in groups, valid for
// expiration (0: the signer's maximum), and returns it with its key, PEM.
type CertIssuer func(ctx context.Context, user string, groups []string, expiration time.Duration) (certPEM, keyPEM []byte, err error)

// CSRIssuer issues through the CertificateSigningRequest API, approved
// with c's credential (client.RequestUserCertificate).
func CSRIssuer(c *client.Client) CertIssuer {
	return func(ctx context.Context, user string, groups []string, expiration time.Duration) ([]byte, []byte, error) {
		cert, key, _, err := client.RequestUserCertificate(ctx, c, client.UserCertificateRequest{User: user, Groups: groups, Expiration: expiration})
		return cert, key, err
	}
}

// Teacher is who sets a room up: their client, how certificates are
// issued, and the cluster the students' kubeconfigs name.
type Teacher struct {
	Client client.Interface
	Issue  CertIssuer
	// Cluster holds the server, the other servers and the CA the
	// kubeconfigs name (the teacher's credentials are not copied).
	Cluster client.Config
	// Progress receives one line per step ("namespace/alice created").
	Progress func(string)
	// Now is the clock certificates are checked against (nil: time.Now).
	Now func() time.Time
}

func (t Teacher) say(format string, args ...any) {
	if t.Progress != nil {
		t.Progress(fmt.Sprintf(format, args...))
	}
}

func (t Teacher) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// CreateClassroom sets the room up (see "A lab room of students"): it checks everything
// first (Validate, the namespaces, the directory) and writes nothing when
// anything is wrong. A failure on the way leaves what was made; a re-run
// finishes it.
func CreateClassroom(ctx context.Context, t Teacher, r Classroom) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if err := checkNamespaces(ctx, t.Client, r); err != nil {
		return err
	}
	if err := checkDir(r.Dir); err != nil {
		return err
	}
	for _, s := range r.Students {
		for _, o := range r.Objects(s) {
			if err := ensure(ctx, t, o); err != nil {
				return fmt.Errorf("student %s: %w (re-run to finish: what exists is kept)", s, err)
			}
		}
		if err := ensureKubeconfig(ctx, t, r, s); err != nil {
			return fmt.Errorf("student %s: %w (re-run to finish: what exists is kept)", s, err)
		}
	}
	return nil
}

// checkNamespaces refuses a room whose students' namespaces exist and are
// not the room's (another room's, default, kube-system, a user's own):
// binding a student to edit there would hand them someone else's work.
func checkNamespaces(ctx context.Context, c client.Interface, r Classroom) error {
	var errs []error
	for _, s := range r.Students {
		ns, err := client.Get[*api.Namespace](ctx, c, "", s)
		switch {
		case api.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("student %s: %w", s, err)
		case ns.Labels[api.LabelClassroom] != r.Name:
			why := "is not a classroom's"
			if other := ns.Labels[api.LabelClassroom]; other != "" {
				why = fmt.Sprintf("is room %q's", other)
			}
			errs = append(errs, fmt.Errorf("student %s: namespace %q exists and %s (not labelled %s=%s): choose another name", s, s, why, api.LabelClassroom, r.Name))
		case ns.DeletionTimestamp != nil:
			errs = append(errs, fmt.Errorf("student %s: namespace %q is being deleted: re-run once it is gone", s, s))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("nothing was created: %w", errors.Join(errs...))
	}
	return nil
}

// checkDir makes dir (0700) and proves it writable.
func checkDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("kubeconfig directory: %w", err)
	}
	f, err := os.CreateTemp(dir, ".classroom-*")
	if err != nil {
		return fmt.Errorf("kubeconfig directory: %w", err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// ensure creates o when it is missing, or brings the existing object's
// spec (the labels too) back to o's, and says which: created, unchanged,
// configured. It reads first, so a re-run sends no write at all.
func ensure(ctx context.Context, t Teacher, o api.Object) error {
	k := api.MustKindOf(o)
	ref := k.Singular
	if k.Group != "" {
		ref += "." + k.Group
	}
	ref += "/" + o.GetObjectMeta().Name
	if ns := o.GetObjectMeta().Namespace; ns != "" {
		ref = ns + ": " + ref
	}
	cur, err := t.Client.Get(ctx, k, o.GetObjectMeta().Namespace, o.GetObjectMeta().Name)
	if api.IsNotFound(err) {
		if _, err := t.Client.Create(ctx, o); err != nil {
			return err
		}
		t.say("%s created", ref)
		return nil
	}
	if err != nil {
		return err
	}
	want := api.Clone(o)
	api.SetDefaults(want) // as the server stored it (a LimitRange's defaults)
	next, changed := converge(cur, want)
	if !changed {
		t.say("%s unchanged", ref)
		return nil
	}
	if _, err := t.Client.Update(ctx, next); err != nil {
		return err
	}
	t.say("%s configured", ref)
	return nil
}

// converge returns a copy of cur with want's label and spec, and whether
// that changed anything. A namespace is never changed: checkNamespaces
// made sure it is the room's.
func converge(cur, want api.Object) (api.Object, bool) {
	next := api.Clone(cur)
	m := next.GetObjectMeta()
	changed := false
	for k, v := range want.GetObjectMeta().Labels {
		if m.Labels[k] != v {
			if m.Labels == nil {
				m.Labels = map[string]string{}
			}
			m.Labels[k], changed = v, true
		}
	}
	switch n := next.(type) {
	case *api.ResourceQuota:
		w := want.(*api.ResourceQuota)
		if !sameResources(n.Spec.Hard, w.Spec.Hard) || len(n.Spec.Scopes) > 0 || n.Spec.ScopeSelector != nil {
			n.Spec, changed = w.Spec, true
		}
	case *api.LimitRange:
		w := want.(*api.LimitRange)
		if !slices.EqualFunc(n.Spec.Limits, w.Spec.Limits, sameLimit) {
			n.Spec, changed = w.Spec, true
		}
	case *api.RoleBinding:
		w := want.(*api.RoleBinding)
		if n.RoleRef != w.RoleRef || !slices.Equal(n.Subjects, w.Subjects) {
			// A roleRef cannot change (the API says so); subjects can.
			n.Subjects, n.RoleRef, changed = w.Subjects, w.RoleRef, true
		}
	}
	return next, changed
}

func sameResources(a, b api.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		if o, ok := b[k]; !ok || q.Cmp(o) != 0 {
			return false
		}
	}
	return true
}

func sameLimit(a, b api.LimitRangeItem) bool {
	return a.Type == b.Type && sameResources(a.Max, b.Max) && sameResources(a.Min, b.Min) &&
		sameResources(a.Default, b.Default) && sameResources(a.DefaultRequest, b.DefaultRequest) &&
		sameResources(a.MaxLimitRequestRatio, b.MaxLimitRequestRatio)
}

// DeleteClassroom removes the namespaces labelled with the room (and with them
// everything in them), saying so on progress; it returns their names. A
// room with none left is not an error: a teardown may be repeated.
func DeleteClassroom(ctx context.Context, c client.Interface, room string, progress func(string)) ([]string, error) {
	nss, _, err := client.List[*api.Namespace](ctx, c, "", api.ListOptions{LabelSelector: api.LabelClassroom + "=" + room})
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, ns := range nss {
		if err := c.Delete(ctx, api.MustKindOf(ns), "", ns.Name, api.DeleteOptions{}); err != nil && !api.IsNotFound(err) {
			return gone, fmt.Errorf("namespace %s: %w", ns.Name, err)
		}
		gone = append(gone, ns.Name)
		if progress != nil {
			progress(fmt.Sprintf("namespace %q deleted", ns.Name))
		}
	}
	return gone, nil
}

// Student is one student's state, as ClassroomStatus reads it.
type Student struct {
	Name      string
	Namespace *api.Namespace
	// Quota is the student's ResourceQuota (nil: none, deleted by hand).
	Quota *api.ResourceQuota
	// Bound says whether the student's RoleBinding is there.
	Bound bool
}

// ClassroomStatus lists the room's students (its labelled namespaces), by name,
// with their quota and whether their binding is there.
func ClassroomStatus(ctx context.Context, c client.Interface, room string) ([]Student, error) {
	sel := api.ListOptions{LabelSelector: api.LabelClassroom + "=" + room}
	nss, _, err := client.List[*api.Namespace](ctx, c, "", sel)
	if err != nil {
		return nil, err
	}
	quotas, _, err := client.List[*api.ResourceQuota](ctx, c, "", sel)
	if err != nil {
		return nil, err
	}
	bindings, _, err := client.List[*api.RoleBinding](ctx, c, "", sel)
	if err != nil {
		return nil, err
	}
	out := make([]Student, 0, len(nss))
	for _, ns := range nss {
		s := Student{Name: ns.Name, Namespace: ns}
		for _, q := range quotas {
			if q.Namespace == ns.Name && q.Name == ClassroomQuota {
				s.Quota = q
			}
		}
		for _, b := range bindings {
			s.Bound = s.Bound || b.Namespace == ns.Name && b.Name == ClassroomBinding
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Student) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
