package kubectl

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/pki"
	"skiff.dev/skiff/pki/pkitest"
)

func TestStudentNames(t *testing.T) {
	if got := StudentNames("lab", 3); !slices.Equal(got, []string{"lab-01", "lab-02", "lab-03"}) {
		t.Errorf("StudentNames(lab, 3) = %v", got)
	}
	if got := StudentNames("lab", 120); got[0] != "lab-001" || got[119] != "lab-120" {
		t.Errorf("StudentNames(lab, 120): first %s, last %s", got[0], got[119])
	}
}

func TestParseRoster(t *testing.T) {
	got, err := ParseRoster(strings.NewReader("# GPU lab, autumn\r\nalice\r\n\n  bob   # late joiner\ncarol-2\n"), "roster.txt")
	if err != nil || !slices.Equal(got, []string{"alice", "bob", "carol-2"}) {
		t.Fatalf("ParseRoster = %v, %v", got, err)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"capital", "alice\nBob\n", `roster.txt:2: student "Bob": not a valid namespace name: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{"full name", "alice\n\nBob Smith\n", `roster.txt:3: student "Bob Smith": not a valid namespace name`},
		{"twice", "alice\nbob\n# c\nalice\n", `roster.txt:4: student "alice" is on line 1 already`},
		{"too long", strings.Repeat("a", 64) + "\n", `roster.txt:1: student "` + strings.Repeat("a", 64) + `": not a valid namespace name: must be no more than 63 characters`},
		{"empty", "# nobody yet\n\n", `roster roster.txt: no students (one name a line)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRoster(strings.NewReader(tc.in), "roster.txt")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("ParseRoster = %v, %v; want error %q", got, err, tc.want)
			}
		})
	}
}

func gpus(n string) api.ResourceList {
	return api.ResourceList{"requests.nvidia.com/gpu": resource.MustParse(n), "pods": resource.MustParse("20")}
}

// Validate reports every problem at once, the objects' in the API
// server's words.
func TestValidate(t *testing.T) {
	good := Classroom{Name: "gpu-lab", Students: []string{"alice", "bob"}, Hard: gpus("1"), Dir: "d"}
	if err := good.Validate(); err != nil {
		t.Fatalf("a good room: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Classroom)
		want []string
	}{
		{"names", func(r *Classroom) { r.Name, r.Students = "GPU lab", []string{"alice", "Bob", "alice"} }, []string{
			`room "GPU lab": not a valid label value and group`, `student "Bob": not a valid namespace name`, `student "alice" named twice`}},
		{"nothing", func(r *Classroom) { r.Students, r.Hard, r.Dir = nil, nil, "" }, []string{
			"no students", "no quota", "no directory"}},
		{"quota", func(r *Classroom) { r.Hard = api.ResourceList{"nvidia.com/gpu": resource.MustParse("1")} }, []string{
			`ResourceQuota "student" is invalid: spec.hard[nvidia.com/gpu]: Invalid value: "nvidia.com/gpu": not supported by skiff: quota an extended resource by its requests, requests.nvidia.com/gpu`}},
		{"limits", func(r *Classroom) {
			r.DefaultRequest = api.ResourceList{"cpu": resource.MustParse("2")}
			r.DefaultLimit = api.ResourceList{"cpu": resource.MustParse("1")}
		}, []string{`LimitRange "student" is invalid: spec.limits[0].defaultRequest[cpu]: Invalid value: "2": default request value 2 is greater than default limit value 1`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good
			tc.edit(&r)
			err := r.Validate()
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %v\nwant %q", err, w)
				}
			}
		})
	}
}

// A student's objects: the namespace, the quota, the limit range when
// asked for, and the edit binding, all labelled with the room.
func TestObjects(t *testing.T) {
	r := Classroom{Name: "gpu-lab", Hard: gpus("1")}
	objs := r.Objects("alice")
	if len(objs) != 3 {
		t.Fatalf("%d objects without defaults, want 3 (no LimitRange)", len(objs))
	}
	r.DefaultRequest = api.ResourceList{"cpu": resource.MustParse("100m")}
	objs = r.Objects("alice")
	if len(objs) != 4 {
		t.Fatalf("%d objects, want 4", len(objs))
	}
	ns, q, lr, rb := objs[0].(*api.Namespace), objs[1].(*api.ResourceQuota), objs[2].(*api.LimitRange), objs[3].(*api.RoleBinding)
	if ns.Name != "alice" || q.Namespace != "alice" || q.Name != ClassroomQuota || q.Spec.Hard["requests.nvidia.com/gpu"] != resource.MustParse("1") {
		t.Errorf("namespace %s, quota %+v", ns.Name, q)
	}
	if len(lr.Spec.Limits) != 1 || lr.Spec.Limits[0].Type != "Container" || func() string { q := lr.Spec.Limits[0].DefaultRequest["cpu"]; return q.String() }() != "100m" {
		t.Errorf("limit range %+v", lr.Spec)
	}
	if rb.Namespace != "alice" || rb.RoleRef != (api.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"}) ||
		!slices.Equal(rb.Subjects, []api.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "alice"}}) {
		t.Errorf("binding %+v", rb)
	}
	for _, o := range objs {
		if o.GetObjectMeta().Labels[api.LabelClassroom] != "gpu-lab" {
			t.Errorf("%T %s: labels %v", o, o.GetObjectMeta().Name, o.GetObjectMeta().Labels)
		}
		if errs := api.Validate(o); len(errs) > 0 {
			t.Errorf("%T: %v", o, errs)
		}
	}
}

// room is a teacher on a fake cluster with a real CA: the issuer signs as
// the control plane's signer does, and counts.
type room struct {
	f       *fake.Client
	ca      *pki.CA
	teacher Teacher
	said    []string
	issued  []string
	now     time.Time
	failFor string // the issuer fails for this student
}

func newRoom(t *testing.T, objs ...api.Object) *room {
	rm := &room{f: fake.New(objs...), ca: pkitest.CA(t), now: time.Now()}
	rm.teacher = Teacher{
		Client:   rm.f,
		Cluster:  client.Config{Server: "https://10.0.0.1:6443", Servers: []string{"https://10.0.0.2:6443"}, CAData: rm.ca.CertPEM(), Token: "admin-secret"},
		Progress: func(s string) { rm.said = append(rm.said, s) },
		Now:      func() time.Time { return rm.now },
		Issue: func(_ context.Context, user string, groups []string, exp time.Duration) ([]byte, []byte, error) {
			if user == rm.failFor {
				return nil, nil, errors.New("certificate signing request user-x: not signed within 30s")
			}
			rm.issued = append(rm.issued, user)
			csrPEM, keyPEM, err := pki.NewUserRequest(user, groups)
			if err != nil {
				return nil, nil, err
			}
			b, _ := pem.Decode(csrPEM)
			req, err := x509.ParseCertificateRequest(b.Bytes)
			if err != nil {
				return nil, nil, err
			}
			cert, err := rm.ca.SignClient(req, exp, rm.now)
			return cert, keyPEM, err
		},
	}
	return rm
}

func (rm *room) create(t *testing.T, r Classroom) error {
	t.Helper()
	rm.said, rm.issued = nil, nil
	rm.f.ClearActions()
	return CreateClassroom(context.Background(), rm.teacher, r)
}

func (rm *room) writes() []string {
	var out []string
	for _, a := range rm.f.Actions() {
		if a.IsWrite() {
			out = append(out, a.String())
		}
	}
	return out
}

// CreateClassroom makes each student's objects and a kubeconfig that is theirs;
// a re-run changes nothing and issues nothing; a changed quota is
// configured; a missing, foreign or expiring kubeconfig is issued again.
func TestCreate(t *testing.T) {
	rm := newRoom(t)
	dir := filepath.Join(t.TempDir(), "gpu-lab")
	r := Classroom{Name: "gpu-lab", Students: []string{"alice", "bob"}, Hard: gpus("1"), Dir: dir}
	if err := rm.create(t, r); err != nil {
		t.Fatal(err)
	}
	wantSaid := []string{
		"namespace/alice created", "alice: resourcequota/student created", "alice: rolebinding.rbac.authorization.k8s.io/student-edit created",
		"alice: kubeconfig " + dir + "/alice.kubeconfig written",
		"namespace/bob created", "bob: resourcequota/student created", "bob: rolebinding.rbac.authorization.k8s.io/student-edit created",
		"bob: kubeconfig " + dir + "/bob.kubeconfig written",
	}
	if !slices.Equal(rm.said, wantSaid) {
		t.Errorf("said:\n%s\nwant:\n%s", strings.Join(rm.said, "\n"), strings.Join(wantSaid, "\n"))
	}
	for _, s := range r.Students {
		checkKubeconfig(t, rm, StudentKubeconfig(dir, s), s, "gpu-lab")
		q, err := client.Get[*api.ResourceQuota](context.Background(), rm.f, s, ClassroomQuota)
		if err != nil || q.Labels[api.LabelClassroom] != "gpu-lab" {
			t.Errorf("%s's quota: %v %v", s, q, err)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v %v", fi, err)
	}

	// Again: nothing written, nothing issued.
	if err := rm.create(t, r); err != nil {
		t.Fatal(err)
	}
	if w := rm.writes(); len(w) > 0 || len(rm.issued) > 0 {
		t.Errorf("a re-run wrote %v and issued %v", w, rm.issued)
	}
	if !slices.Contains(rm.said, "bob: resourcequota/student unchanged") || !slices.Contains(rm.said, "namespace/alice unchanged") ||
		!slices.Contains(rm.said, "alice: kubeconfig "+dir+"/alice.kubeconfig unchanged") {
		t.Errorf("re-run said:\n%s", strings.Join(rm.said, "\n"))
	}

	// Two GPUs each, defaults for containers, alice's kubeconfig lost,
	// bob's about to expire: the quotas are configured, the limit ranges
	// created, both kubeconfigs issued again.
	r.Hard = gpus("2")
	r.DefaultRequest = api.ResourceList{"cpu": resource.MustParse("100m"), "memory": resource.MustParse("128Mi")}
	r.DefaultLimit = api.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("1Gi")}
	if err := os.Remove(StudentKubeconfig(dir, "alice")); err != nil {
		t.Fatal(err)
	}
	rm.now = rm.now.Add(360 * 24 * time.Hour) // the year's certificates are near their end
	if err := rm.create(t, r); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rm.issued, []string{"alice", "bob"}) {
		t.Errorf("issued %v, want alice and bob", rm.issued)
	}
	for _, w := range []string{"alice: resourcequota/student configured", "bob: limitrange/student created",
		"alice: kubeconfig " + dir + "/alice.kubeconfig written"} {
		if !slices.Contains(rm.said, w) {
			t.Errorf("no %q in:\n%s", w, strings.Join(rm.said, "\n"))
		}
	}
	if !slices.ContainsFunc(rm.said, func(s string) bool {
		return strings.HasPrefix(s, "bob: kubeconfig "+dir+"/bob.kubeconfig written (the old certificate expires ")
	}) {
		t.Errorf("bob's renewal not said:\n%s", strings.Join(rm.said, "\n"))
	}
	q, _ := client.Get[*api.ResourceQuota](context.Background(), rm.f, "bob", ClassroomQuota)
	if got := q.Spec.Hard["requests.nvidia.com/gpu"]; got.String() != "2" {
		t.Errorf("bob's quota after the change: %v", q.Spec.Hard)
	}
	checkKubeconfig(t, rm, StudentKubeconfig(dir, "bob"), "bob", "gpu-lab")

	// The limit range as stored (defaulted by the server) is the room's:
	// a third run writes nothing.
	if err := rm.create(t, r); err != nil {
		t.Fatal(err)
	}
	if w := rm.writes(); len(w) > 0 || len(rm.issued) > 0 {
		t.Errorf("the third run wrote %v and issued %v", w, rm.issued)
	}

	// A kubeconfig of another cluster's CA in the file: issued again.
	other := newRoom(t)
	other.teacher.Cluster.Server = rm.teacher.Cluster.Server
	other.teacher.Cluster.Servers = rm.teacher.Cluster.Servers
	otherDir := t.TempDir()
	if err := other.create(t, Classroom{Name: "gpu-lab", Students: []string{"alice"}, Hard: gpus("1"), Dir: otherDir}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(StudentKubeconfig(otherDir, "alice"))
	if err := os.WriteFile(StudentKubeconfig(dir, "alice"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rm.create(t, r); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rm.issued, []string{"alice"}) || !slices.Contains(rm.said, "alice: kubeconfig "+dir+"/alice.kubeconfig written (the old one names another CA)") {
		t.Errorf("issued %v; said:\n%s", rm.issued, strings.Join(rm.said, "\n"))
	}
	checkKubeconfig(t, rm, StudentKubeconfig(dir, "alice"), "alice", "gpu-lab")
}

// checkKubeconfig: the file is 0600 and names the teacher's servers and
// CA (no admin token), the student's namespace, and a certificate CN the
// student, O the room, from rm's CA.
func checkKubeconfig(t *testing.T, rm *room, file, student, roomName string) {
	t.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v", file, fi.Mode())
	}
	b, _ := os.ReadFile(file)
	if strings.Contains(string(b), "admin-secret") {
		t.Errorf("%s holds the teacher's token", file)
	}
	cfg, err := client.LoadKubeconfig(file)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server != "https://10.0.0.1:6443" || !slices.Equal(cfg.Servers, []string{"https://10.0.0.2:6443"}) || cfg.Namespace != student || cfg.Token != "" {
		t.Errorf("%s: server %s, servers %v, namespace %q, token %q", file, cfg.Server, cfg.Servers, cfg.Namespace, cfg.Token)
	}
	p, _ := pem.Decode(cfg.CertData)
	cert, err := x509.ParseCertificate(p.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if user, groups := pki.Identity(cert); user != student || !slices.Equal(groups, []string{roomName}) {
		t.Errorf("%s: certificate of %s in %v", file, user, groups)
	}
	if err := rm.ca.Verify(cert, rm.now); err != nil {
		t.Errorf("%s: %v", file, err)
	}
}

// Bad input changes nothing: a namespace that is not the room's (the
// system's, another room's) refuses the whole room before any write, and
// so does an invalid quota; no directory is made.
func TestCreateRefusesBeforeWriting(t *testing.T) {
	rm := newRoom(t,
		&api.Namespace{ObjectMeta: api.ObjectMeta{Name: "kube-system"}},
		&api.Namespace{ObjectMeta: api.ObjectMeta{Name: "carol", Labels: map[string]string{api.LabelClassroom: "other-lab"}}})
	for _, tc := range []struct {
		name string
		r    Classroom
		want []string
	}{
		{"namespaces", Classroom{Name: "gpu-lab", Students: []string{"alice", "kube-system", "carol"}, Hard: gpus("1")}, []string{
			`nothing was created: student kube-system: namespace "kube-system" exists and is not a classroom's (not labelled skiff.dev/classroom=gpu-lab): choose another name`,
			`student carol: namespace "carol" exists and is room "other-lab"'s`}},
		{"quota", Classroom{Name: "gpu-lab", Students: []string{"alice"}, Hard: api.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("-1")}}, []string{
			`ResourceQuota "student" is invalid: spec.hard[requests.nvidia.com/gpu]: Invalid value: "-1": must be greater than or equal to 0`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.r.Dir = filepath.Join(t.TempDir(), "out")
			err := rm.create(t, tc.r)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Create: %v\nwant %q", err, w)
				}
			}
			if w := rm.writes(); len(w) > 0 || len(rm.issued) > 0 || len(rm.said) > 0 {
				t.Errorf("refused, yet wrote %v, issued %v, said %v", w, rm.issued, rm.said)
			}
			if _, err := os.Stat(tc.r.Dir); !os.IsNotExist(err) {
				t.Errorf("the directory was made: %v", err)
			}
		})
	}
}

// A failure half way (the signer does not answer for bob) names the
// student and keeps what exists; the re-run finishes, keeping alice's.
func TestCreateResumes(t *testing.T) {
	rm := newRoom(t)
	r := Classroom{Name: "gpu-lab", Students: []string{"alice", "bob", "carol"}, Hard: gpus("1"), Dir: t.TempDir()}
	rm.failFor = "bob"
	err := rm.create(t, r)
	if err == nil || err.Error() != "student bob: certificate: certificate signing request user-x: not signed within 30s (re-run to finish: what exists is kept)" {
		t.Fatalf("Create: %v", err)
	}
	if _, err := client.Get[*api.Namespace](context.Background(), rm.f, "", "carol"); !api.IsNotFound(err) {
		t.Errorf("carol's namespace after bob's failure: %v", err)
	}
	rm.failFor = ""
	if err := rm.create(t, r); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rm.issued, []string{"bob", "carol"}) {
		t.Errorf("the re-run issued %v, want bob and carol", rm.issued)
	}
	for _, s := range r.Students {
		checkKubeconfig(t, rm, StudentKubeconfig(r.Dir, s), s, "gpu-lab")
	}
}

// ClassroomStatus lists the room's students with their quota and binding; DeleteClassroom
// removes only the room's namespaces, and again finds none.
func TestStatusAndDelete(t *testing.T) {
	rm := newRoom(t, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: "other"}})
	r := Classroom{Name: "gpu-lab", Students: []string{"bob", "alice"}, Hard: gpus("1"), Dir: t.TempDir()}
	if err := rm.create(t, r); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := rm.f.Delete(ctx, api.MustKindOf(&api.RoleBinding{}), "bob", ClassroomBinding, api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	st, err := ClassroomStatus(ctx, rm.f, "gpu-lab")
	if err != nil || len(st) != 2 {
		t.Fatalf("Status: %v %v", st, err)
	}
	if st[0].Name != "alice" || !st[0].Bound || st[0].Quota == nil || st[1].Name != "bob" || st[1].Bound || st[1].Quota == nil {
		t.Errorf("Status: %+v", st)
	}
	if st, _ := ClassroomStatus(ctx, rm.f, "other-lab"); len(st) != 0 {
		t.Errorf("another room's status: %+v", st)
	}

	var said []string
	gone, err := DeleteClassroom(ctx, rm.f, "gpu-lab", func(s string) { said = append(said, s) })
	if err != nil || !slices.Equal(gone, []string{"alice", "bob"}) || !slices.Equal(said, []string{`namespace "alice" deleted`, `namespace "bob" deleted`}) {
		t.Fatalf("Delete: %v %v %v", gone, said, err)
	}
	left, _, _ := client.List[*api.Namespace](ctx, rm.f, "", api.ListOptions{})
	for _, ns := range left {
		if (ns.Name == "alice" || ns.Name == "bob") && ns.DeletionTimestamp == nil {
			t.Errorf("%s's namespace not deleted", ns.Name)
		}
		if ns.Name == "other" && ns.DeletionTimestamp != nil {
			t.Errorf("a namespace outside the room was deleted")
		}
	}
}
