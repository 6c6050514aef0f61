package apiserver

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/randfill"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/patch"
	"skiff.dev/skiff/api/randobj"
)

// libraryMessage is what Kubernetes' own admission plugin says about a
// corev1 pod spec at level (admission.go's EvaluatePod: "violates
// PodSecurity %q: %s"), written without skiff's conversion, to compare
// skiff's answer with.
func libraryMessage(t *testing.T, level psapi.Level, spec corev1.PodSpec) string {
	t.Helper()
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lv := psapi.LevelVersion{Level: level, Version: psapi.LatestVersion()}
	res := policy.AggregateCheckResults(ev.EvaluatePod(lv, &metav1.ObjectMeta{}, &spec))
	if res.Allowed {
		t.Fatalf("the library allows this spec at %s", level)
	}
	return fmt.Sprintf("violates PodSecurity %q: %s", lv.String(), res.ForbiddenDetail())
}

// wouldViolate is the warning for what enforce would refuse with msg.
func wouldViolate(msg string) string {
	return strings.Replace(msg, "violates PodSecurity", "would violate PodSecurity", 1)
}

// psEnv is an API server with namespace "students" (no labels).
func psEnv(t *testing.T) (*env, context.Context) {
	t.Helper()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.reg.Create(ctx, namespaceKind, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: "students"}}); err != nil {
		t.Fatal(err)
	}
	return e, ctx
}

// withRecorder returns a ctx whose warnings land in the recorder's headers.
func withRecorder(ctx context.Context) (context.Context, *httptest.ResponseRecorder) {
	rec := httptest.NewRecorder()
	return withWarnings(ctx, rec), rec
}

// warningsOf decodes the Warning headers (as a client does).
func warningsOf(t *testing.T, h http.Header) []string {
	t.Helper()
	ws, errs := utilnet.ParseWarningHeaders(h.Values("Warning"))
	if len(errs) > 0 {
		t.Fatalf("bad Warning headers %q: %v", h.Values("Warning"), errs)
	}
	var out []string
	for _, w := range ws {
		if w.Code != 299 || w.Agent != "-" {
			t.Errorf("warning %+v: want code 299, agent -", w)
		}
		out = append(out, w.Text)
	}
	return out
}

func nginx(ns, name string) *api.Pod {
	return &api.Pod{
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: ns},
		Spec:       api.PodSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}},
	}
}

func hostPathPod(ns, name string) *api.Pod {
	p := nginx(ns, name)
	p.Spec.Volumes = []api.Volume{{Name: "root", HostPath: &api.HostPathVolumeSource{Path: "/"}}}
	p.Spec.Containers[0].VolumeMounts = []api.VolumeMount{{Name: "root", MountPath: "/host"}}
	return p
}

func hostNetworkPod(ns, name string) *api.Pod {
	p := nginx(ns, name)
	p.Spec.HostNetwork = true
	p.Spec.Containers[0].Ports = []api.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
	return p
}

func labelNamespace(t *testing.T, e *env, ctx context.Context, name string, labels map[string]string) []string {
	t.Helper()
	obj, err := e.reg.Get(ctx, namespaceKind, "", name)
	if err != nil {
		t.Fatal(err)
	}
	ns := api.Clone(obj).(*api.Namespace)
	ns.Labels = labels
	wctx, rec := withRecorder(ctx)
	if _, err := e.reg.Update(wctx, namespaceKind, ns); err != nil {
		t.Fatalf("label namespace %s %v: %v", name, labels, err)
	}
	return warningsOf(t, rec.Header())
}

// In a namespace at the default (baseline), what would take over the node
// is refused in Kubernetes' words; the same pods are created once the
// teacher lifts the namespace.
func TestPodSecurityBaselineRefusesHostAccess(t *testing.T) {
	hostPathSpec := corev1.PodSpec{
		Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}},
		Volumes:    []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
	}
	hostNetSpec := corev1.PodSpec{
		HostNetwork: true,
		Containers:  []corev1.Container{{Name: "web", Image: "nginx:1.27", Ports: []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}}},
	}
	tests := []struct {
		name    string
		pod     *api.Pod
		want    string // Kubernetes' message, as kubectl shows it
		library corev1.PodSpec
	}{
		{"hostpath", hostPathPod("students", "hostpath"),
			`pods "hostpath" is forbidden: violates PodSecurity "baseline:latest": hostPath volumes (volume "root")`, hostPathSpec},
		{"hostnetwork", hostNetworkPod("students", "hostnetwork"),
			`pods "hostnetwork" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), hostPort (container "web" uses hostPort 8080)`, hostNetSpec},
	}
	e, ctx := psEnv(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.reg.Create(ctx, podKind, tt.pod)
			if api.ReasonOf(err) != api.ReasonForbidden {
				t.Fatalf("create: err = %v, want 403 Forbidden", err)
			}
			if err.Error() != tt.want {
				t.Errorf("message:\n got %s\nwant %s", err, tt.want)
			}
			if lib := fmt.Sprintf("pods %q is forbidden: %s", tt.pod.Name, libraryMessage(t, psapi.LevelBaseline, tt.library)); err.Error() != lib {
				t.Errorf("message differs from the library's:\n got %s\n lib %s", err, lib)
			}
			if _, err := e.reg.Get(ctx, podKind, "students", tt.pod.Name); !api.IsNotFound(err) {
				t.Errorf("refused pod stored: %v", err)
			}
		})
	}

	// A lab pod is admitted without a word.
	wctx, rec := withRecorder(ctx)
	if _, err := e.reg.Create(wctx, podKind, nginx("students", "web")); err != nil {
		t.Fatal(err)
	}
	if w := warningsOf(t, rec.Header()); len(w) != 0 {
		t.Errorf("lab pod warned: %q", w)
	}

	// The teacher lifts the namespace: enforce=privileged admits, warn
	// (still the default, baseline) says what the pod does.
	labelNamespace(t, e, ctx, "students", map[string]string{psapi.EnforceLevelLabel: "privileged"})
	for _, tt := range tests {
		wctx, rec := withRecorder(ctx)
		if _, err := e.reg.Create(wctx, podKind, tt.pod); err != nil {
			t.Fatalf("%s after lifting: %v", tt.name, err)
		}
		want := []string{wouldViolate(strings.TrimPrefix(tt.want, fmt.Sprintf("pods %q is forbidden: ", tt.pod.Name)))}
		if got := warningsOf(t, rec.Header()); !slices.Equal(got, want) {
			t.Errorf("%s warnings = %q, want %q", tt.name, got, want)
		}
	}

	// Lifted for every mode: nothing to say.
	labelNamespace(t, e, ctx, "students", map[string]string{
		psapi.EnforceLevelLabel: "privileged", psapi.WarnLevelLabel: "privileged", psapi.AuditLevelLabel: "privileged"})
	wctx, rec = withRecorder(ctx)
	if _, err := e.reg.Create(wctx, podKind, hostPathPod("students", "quiet")); err != nil {
		t.Fatal(err)
	}
	if w := warningsOf(t, rec.Header()); len(w) != 0 {
		t.Errorf("privileged namespace warned: %q", w)
	}
}

// A privileged container, and a privileged hostPath one, are refused at
// baseline with Pod Security's own words (issue 20); kube-system takes
// them (the device plugin DaemonSet's namespace).
func TestPodSecurityPrivileged(t *testing.T) {
	e, ctx := psEnv(t)
	priv := nginx("students", "priv")
	priv.Spec.Containers[0].Name = "c"
	priv.Spec.Containers[0].SecurityContext = &api.SecurityContext{Privileged: ptr(true)}
	_, err := e.reg.Create(ctx, podKind, priv)
	if want := `pods "priv" is forbidden: violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)`; err == nil || err.Error() != want {
		t.Errorf("privileged pod: %v, want %s", err, want)
	}
	both := hostPathPod("students", "node-agent")
	both.Spec.Containers[0].SecurityContext = &api.SecurityContext{Privileged: ptr(true)}
	_, err = e.reg.Create(ctx, podKind, both)
	want := libraryMessage(t, psapi.LevelBaseline, corev1.PodSpec{
		Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27", SecurityContext: &corev1.SecurityContext{Privileged: ptr(true)}}},
		Volumes:    []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
	})
	if err == nil || err.Error() != `pods "node-agent" is forbidden: `+want {
		t.Errorf("privileged hostPath pod: %v, want %s", err, want)
	}
	if !strings.HasSuffix(want, `: hostPath volumes (volume "root"), privileged (container "web" must not set securityContext.privileged=true)`) {
		t.Errorf("library message %q", want)
	}
	sys := api.Clone(both)
	sys.Namespace = api.NamespaceSystem
	if _, err := e.reg.Create(ctx, podKind, sys); err != nil {
		t.Errorf("privileged hostPath pod in kube-system: %v", err)
	}
}

// A pod that meets restricted (runAsNonRoot, seccomp RuntimeDefault, no
// privilege escalation, every capability dropped) is created in a
// restricted namespace without a warning; the same pod without its
// securityContext is refused there with the library's message.
func TestPodSecurityRestrictedPod(t *testing.T) {
	e, ctx := psEnv(t)
	labelNamespace(t, e, ctx, "students", map[string]string{psapi.EnforceLevelLabel: "restricted", psapi.WarnLevelLabel: "restricted"})
	p := nginx("students", "ok")
	p.Spec.SecurityContext = &api.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr[int64](1000),
		SeccompProfile: &api.SeccompProfile{Type: api.SeccompProfileTypeRuntimeDefault}}
	p.Spec.Containers[0].SecurityContext = &api.SecurityContext{AllowPrivilegeEscalation: ptr(false),
		Capabilities: &api.Capabilities{Drop: []string{"ALL"}}}
	wctx, rec := withRecorder(ctx)
	if _, err := e.reg.Create(wctx, podKind, p); err != nil {
		t.Fatalf("restricted-compliant pod: %v", err)
	}
	if w := warningsOf(t, rec.Header()); len(w) != 0 {
		t.Errorf("restricted-compliant pod warned: %q", w)
	}
	_, err := e.reg.Create(ctx, podKind, nginx("students", "plain"))
	want := libraryMessage(t, psapi.LevelRestricted, corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}})
	if err == nil || err.Error() != `pods "plain" is forbidden: `+want {
		t.Errorf("plain pod at restricted: %v, want %s", err, want)
	}
}

// Over HTTP: 403 with Kubernetes' Status, and warnings as Warning headers.
func TestPodSecurityHTTP(t *testing.T) {
	e, ctx := psEnv(t)
	code, b := e.do("POST", "/api/v1/namespaces/students/pods", hostPathPod("students", "root"))
	st := status(t, b, http.StatusForbidden, api.ReasonForbidden)
	if want := `pods "root" is forbidden: violates PodSecurity "baseline:latest": hostPath volumes (volume "root")`; st.Message != want || code != 403 {
		t.Errorf("got %d %q, want 403 %q", code, st.Message, want)
	}
	if st.Details == nil || st.Details.Name != "root" || st.Details.Kind != "pods" {
		t.Errorf("details = %+v, want name root, kind pods", st.Details)
	}

	labelNamespace(t, e, ctx, "students", map[string]string{psapi.WarnLevelLabel: "restricted"})
	req, _ := http.NewRequest("POST", e.ts.URL+"/api/v1/namespaces/students/pods", strings.NewReader(
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create under warn=restricted: %d, want 201", resp.StatusCode)
	}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}
	want := wouldViolate(libraryMessage(t, psapi.LevelRestricted, spec))
	got := warningsOf(t, resp.Header)
	if !slices.Equal(got, []string{want}) {
		t.Errorf("warnings = %q, want %q", got, want)
	}
	const literal = `would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "web" must set securityContext.allowPrivilegeEscalation=false), ` +
		`unrestricted capabilities (container "web" must set securityContext.capabilities.drop=["ALL"]), ` +
		`runAsNonRoot != true (pod or container "web" must set securityContext.runAsNonRoot=true), ` +
		`seccompProfile (pod or container "web" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`
	if want != literal {
		t.Errorf("the library's restricted message changed:\n got %s\nwant %s", want, literal)
	}
	if h := resp.Header.Get("Warning"); !strings.HasPrefix(h, `299 - "would violate PodSecurity \"restricted:latest\": `) {
		t.Errorf("Warning header %q: want kube-apiserver's form 299 - \"...\"", h)
	}
}

// Workloads get warn and audit about their template, never enforce.
func TestPodSecurityWorkloadsWarnOnly(t *testing.T) {
	e, ctx := psEnv(t)
	want := []string{`would violate PodSecurity "baseline:latest": hostPath volumes (volume "root")`}
	tmpl := hostPathPod("", "")
	labels := map[string]string{"app": "root"}
	dep := &api.Deployment{
		ObjectMeta: api.ObjectMeta{Name: "root", Namespace: "students"},
		Spec: api.DeploymentSpec{
			Selector: &api.LabelSelector{MatchLabels: labels},
			Template: api.PodTemplateSpec{ObjectMeta: api.ObjectMeta{Labels: labels}, Spec: tmpl.Spec},
		},
	}
	rs := &api.ReplicaSet{
		ObjectMeta: api.ObjectMeta{Name: "root", Namespace: "students"},
		Spec: api.ReplicaSetSpec{
			Selector: &api.LabelSelector{MatchLabels: labels},
			Template: api.PodTemplateSpec{ObjectMeta: api.ObjectMeta{Labels: labels}, Spec: tmpl.Spec},
		},
	}
	tests := []struct {
		name string
		k    *api.Kind
		obj  api.Object
	}{
		{"deployment", deploymentKind, dep},
		{"replicaset", replicaSetKind, rs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wctx, rec := withRecorder(ctx)
			out, err := e.reg.Create(wctx, tt.k, tt.obj)
			if err != nil {
				t.Fatalf("create: %v (a workload is never refused)", err)
			}
			if got := warningsOf(t, rec.Header()); !slices.Equal(got, want) {
				t.Errorf("create warnings = %q, want %q", got, want)
			}
			// An update warns again (its template still violates).
			wctx, rec = withRecorder(ctx)
			out.GetObjectMeta().Annotations = map[string]string{"note": "x"}
			if _, err := e.reg.Update(wctx, tt.k, out); err != nil {
				t.Fatal(err)
			}
			if got := warningsOf(t, rec.Header()); !slices.Equal(got, want) {
				t.Errorf("update warnings = %q, want %q", got, want)
			}
		})
	}
}

// Namespace labels are Kubernetes': bad values are refused, and a
// stricter enforce level warns about the pods already there.
func TestPodSecurityNamespaceLabels(t *testing.T) {
	e, ctx := psEnv(t)
	bad := []struct {
		name, label, value, want string
	}{
		{"level", psapi.EnforceLevelLabel, "strict",
			`Namespace "bad-level" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted`},
		{"version", psapi.WarnVersionLabel, "1.30",
			`Namespace "bad-version" is invalid: metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: "1.30": must be "latest" or "v1.x"`},
	}
	for _, tt := range bad {
		t.Run("create-"+tt.name, func(t *testing.T) {
			ns := &api.Namespace{ObjectMeta: api.ObjectMeta{Name: "bad-" + tt.name, Labels: map[string]string{tt.label: tt.value}}}
			_, err := e.reg.Create(ctx, namespaceKind, ns)
			if !api.IsInvalid(err) || err.Error() != tt.want {
				t.Fatalf("err = %v\nwant 422 %s", err, tt.want)
			}
		})
		t.Run("update-"+tt.name, func(t *testing.T) {
			obj, _ := e.reg.Get(ctx, namespaceKind, "", "students")
			ns := api.Clone(obj).(*api.Namespace)
			ns.Labels = map[string]string{tt.label: tt.value}
			_, err := e.reg.Update(ctx, namespaceKind, ns)
			want := strings.Replace(tt.want, `"bad-`+tt.name+`"`, `"students"`, 1)
			if !api.IsInvalid(err) || err.Error() != want {
				t.Fatalf("err = %v\nwant 422 %s", err, want)
			}
		})
	}

	// Pods admitted while lifted, then enforce goes back to baseline.
	labelNamespace(t, e, ctx, "students", map[string]string{
		psapi.EnforceLevelLabel: "privileged", psapi.WarnLevelLabel: "privileged", psapi.AuditLevelLabel: "privileged"})
	for _, p := range []*api.Pod{hostPathPod("students", "root-b"), hostPathPod("students", "root-a"), hostNetworkPod("students", "net"), nginx("students", "web")} {
		if _, err := e.reg.Create(ctx, podKind, p); err != nil {
			t.Fatal(err)
		}
	}
	got := labelNamespace(t, e, ctx, "students", map[string]string{psapi.EnforceLevelLabel: "baseline"})
	want := []string{
		`existing pods in namespace "students" violate the new PodSecurity enforce level "baseline:latest"`,
		`net: host namespaces, hostPort`,
		`root-a (and 1 other pod): hostPath volumes`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings = %q\nwant %q", got, want)
	}
	// Relaxing says nothing.
	if got := labelNamespace(t, e, ctx, "students", map[string]string{psapi.EnforceLevelLabel: "privileged"}); len(got) != 0 {
		t.Errorf("relaxing warned: %q", got)
	}
}

// A pod update is checked when it changes an image, as Kubernetes.
func TestPodSecurityPodUpdate(t *testing.T) {
	e, ctx := psEnv(t)
	labelNamespace(t, e, ctx, "students", map[string]string{psapi.EnforceLevelLabel: "privileged"})
	out, err := e.reg.Create(ctx, podKind, hostPathPod("students", "root"))
	if err != nil {
		t.Fatal(err)
	}
	labelNamespace(t, e, ctx, "students", nil)
	p := api.Clone(out).(*api.Pod)
	p.Labels = map[string]string{"touched": "yes"}
	if out, err = e.reg.Update(ctx, podKind, p); err != nil {
		t.Fatalf("label change refused: %v", err)
	}
	p = api.Clone(out).(*api.Pod)
	p.Spec.Containers[0].Image = "nginx:1.28"
	_, err = e.reg.Update(ctx, podKind, p)
	if want := `pods "root" is forbidden: violates PodSecurity "baseline:latest": hostPath volumes (volume "root")`; api.ReasonOf(err) != api.ReasonForbidden || err.Error() != want {
		t.Fatalf("image change: err = %v, want %s", err, want)
	}
}

// Exempt namespaces are never checked, and a policy set on one is said to
// be ignored.
func TestPodSecurityExemptNamespace(t *testing.T) {
	e, ctx := psEnv(t)
	wctx, rec := withRecorder(ctx)
	// kube-system exists from the start (EnsureDefaults); label it.
	cur, err := e.reg.Get(ctx, namespaceKind, "", "kube-system")
	if err != nil {
		t.Fatal(err)
	}
	ns := api.Clone(cur).(*api.Namespace)
	ns.Labels[psapi.EnforceLevelLabel] = "restricted"
	if _, err := e.reg.Update(wctx, namespaceKind, ns); err != nil {
		t.Fatal(err)
	}
	want := []string{`namespace "kube-system" is exempt from Pod Security, and the policy (enforce=restricted:latest) will be ignored`}
	if got := warningsOf(t, rec.Header()); !slices.Equal(got, want) {
		t.Errorf("warnings = %q, want %q", got, want)
	}
	wctx, rec = withRecorder(ctx)
	if _, err := e.reg.Create(wctx, podKind, hostPathPod("kube-system", "root")); err != nil {
		t.Fatalf("exempt namespace: %v", err)
	}
	if got := warningsOf(t, rec.Header()); len(got) != 0 {
		t.Errorf("exempt namespace warned: %q", got)
	}
}

func TestPodSecurityConfig(t *testing.T) {
	tests := []struct {
		name string
		edit func(*PodSecurityConfig)
		want []string // in the error; none: valid
	}{
		{name: "default"},
		{name: "restricted", edit: func(c *PodSecurityConfig) { *c = PodSecurityAt("restricted") }},
		{name: "bad level", edit: func(c *PodSecurityConfig) { c.Defaults.Enforce = "strict"; c.Defaults.WarnVersion = "2" },
			want: []string{`defaults.enforce: Invalid value: "strict": must be one of privileged, baseline, restricted`, `defaults.warn-version: Invalid value: "2": must be "latest" or "v1.x"`}},
		{name: "bad namespace", edit: func(c *PodSecurityConfig) { c.Exemptions.Namespaces = []string{"Not_A_Name"} },
			want: []string{`exemptions.namespaces[0]: Invalid value: "Not_A_Name"`}},
		{name: "usernames", edit: func(c *PodSecurityConfig) { c.Exemptions.Usernames = []string{"teacher"} },
			want: []string{"exemptions.usernames: Forbidden: not supported by skiff"}},
		{name: "runtime classes", edit: func(c *PodSecurityConfig) { c.Exemptions.RuntimeClasses = []string{"gvisor"} },
			want: []string{"exemptions.runtimeClasses: Forbidden: not supported by skiff"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultPodSecurity()
			if tt.edit != nil {
				tt.edit(&c)
			}
			cfg := DefaultConfig()
			cfg.Token = testToken
			cfg.PodSecurity = &c
			e := newEnv(t)
			_, err := New(cfg, e.reg, nil)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// Every file of examples/ (the course's labs, the exercise, the homework)
// applies at the default level, without a warning.
func TestPodSecurityExamplesAdmitted(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	checked := 0 // pods and workloads: what admission looks at
	t.Cleanup(func() {
		if checked == 0 {
			t.Errorf("no pod or workload in %d example files", len(files))
		}
	})
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs := api.DecodeStream(data)
			// Namespaces first, as kubectl apply's order would have them.
			slices.SortStableFunc(docs, func(a, b api.Document) int {
				return boolOrder(a.Kind != namespaceKind) - boolOrder(b.Kind != namespaceKind)
			})
			for _, d := range docs {
				if d.Err != nil {
					t.Fatal(d.Err)
				}
				if d.Kind.Namespaced {
					ensureNamespace(t, e, ctx, d.Object.GetObjectMeta().Namespace)
				}
				wctx, rec := withRecorder(ctx)
				if _, err := e.reg.Create(wctx, d.Kind, d.Object); err != nil {
					t.Fatalf("%s %s: %v", d.Kind.Kind, d.Object.GetObjectMeta().Name, err)
				}
				if w := warningsOf(t, rec.Header()); len(w) != 0 {
					t.Errorf("%s %s warned: %q", d.Kind.Kind, d.Object.GetObjectMeta().Name, w)
				}
				if slices.Contains(podSecurityKinds[1:], d.Kind) {
					checked++
				}
			}
		})
	}
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

func ensureNamespace(t *testing.T, e *env, ctx context.Context, name string) {
	t.Helper()
	if name == "" {
		return
	}
	_, err := e.reg.Create(ctx, namespaceKind, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: name}})
	if err != nil && !api.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func TestWarningRecorder(t *testing.T) {
	long := strings.Repeat("é", warningTotalRunes)
	tests := []struct {
		name string
		add  []string
		want []string
	}{
		{"once", []string{"a", "b", "a"}, []string{"a", "b"}},
		{"quotes", []string{`would violate "x"`}, []string{`would violate "x"`}},
		{"control characters dropped", []string{"bad\nline", "ok"}, []string{"ok"}},
		{"over the total: cut", []string{"a", long}, []string{"a", long[:2*warningItemRunes]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, rec := withRecorder(context.Background())
			for _, w := range tt.add {
				addWarning(ctx, w)
			}
			if got := warningsOf(t, rec.Header()); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	addWarning(context.Background(), "no recorder: dropped") // must not panic
}

func ptr[T any](v T) *T { return &v }

// The checks see a workload's template as the whole object's conversion
// gives it, without its managedFields, and a pod's metadata without them;
// the object itself is not changed. (What they see of a pod's spec:
// TestPodSecuritySpecGivesTheFullSpecsResults.)
func TestKubePodSpecLeavesOutManagedFields(t *testing.T) {
	privileged, yes := true, true
	mf := []api.ManagedFieldsEntry{{Manager: "kubectl", Operation: "Update", APIVersion: "v1", FieldsType: "FieldsV1",
		FieldsV1: []byte(`{"f:spec":{"f:hostNetwork":{}}}`)}}
	pod := &api.Pod{
		ObjectMeta: api.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "x"},
			Annotations:   map[string]string{"container.apparmor.security.beta.kubernetes.io/c": "unconfined"},
			ManagedFields: mf},
		Spec: api.PodSpec{HostNetwork: true, Containers: []api.Container{{Name: "c", Image: "busybox",
			SecurityContext: &api.SecurityContext{Privileged: &privileged, RunAsNonRoot: &yes}}},
			Volumes: []api.Volume{{Name: "root", HostPath: &api.HostPathVolumeSource{Path: "/"}}}},
		Status: api.PodStatus{Phase: api.PodRunning, PodIP: "10.0.0.7"},
	}
	deploy := &api.Deployment{ObjectMeta: api.ObjectMeta{Name: "d", Namespace: "ns", ManagedFields: mf},
		Spec: api.DeploymentSpec{Template: api.PodTemplateSpec{ObjectMeta: api.ObjectMeta{Labels: map[string]string{"app": "x"}}, Spec: pod.Spec}}}
	for _, obj := range []api.Object{pod, deploy} {
		k := api.MustKindOf(obj)
		api.SetTypeMeta(obj)
		before := api.Clone(obj)
		meta, spec, err := kubePodSpec(k, obj)
		if err != nil {
			t.Fatal(err)
		}
		full, err := patch.ToKubernetes(k.APIVersion(), k.Kind, obj)
		if err != nil {
			t.Fatal(err)
		}
		switch o := full.(type) {
		case *corev1.Pod:
			if len(o.ManagedFields) == 0 || o.Status.PodIP == "" {
				t.Fatalf("the full conversion lost managedFields or status: %+v", o.ObjectMeta)
			}
			o.ManagedFields = nil
			if !reflect.DeepEqual(meta, &o.ObjectMeta) {
				t.Errorf("pod: the checks see\n%+v\nthe full conversion\n%+v", meta, &o.ObjectMeta)
			}
		case *appsv1.Deployment:
			if !reflect.DeepEqual(meta, &o.Spec.Template.ObjectMeta) || !reflect.DeepEqual(spec, &o.Spec.Template.Spec) {
				t.Errorf("Deployment: the checks see\n%+v\n%+v\nthe full conversion\n%+v\n%+v", meta, spec, &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec)
			}
		}
		if !reflect.DeepEqual(obj, before) {
			t.Errorf("%s: kubePodSpec changed the object", k.Kind)
		}
	}
}

// The part of a pod's spec the checks are given (podSecuritySpec), and
// the shape its verdicts are remembered by (podSecurityShape), give every
// level's result the whole spec gives, on random pods whose
// security-related strings and numbers are drawn from the values the
// checks look for, half of them with a service account's volume.
func TestPodSecuritySpecGivesTheFullSpecsResults(t *testing.T) {
	const apiAccess = "kube-api-access-x7k2p"
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	words := []string{"", "RuntimeDefault", "Localhost", "Unconfined", "runtime/default", "localhost/p", "unconfined",
		"ALL", "NET_BIND_SERVICE", "NET_RAW", "SYS_ADMIN", "CHOWN", "Default", "Unmasked", "container_t", "spc_t",
		"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "kernel.msgmax", "evil.com", "127.0.0.1", "/", "/data"}
	f := randobj.Filler(7, randobj.Options{NilChance: 0.3, MaxDepth: 10, Funcs: []any{
		func(s *string, c randfill.Continue) {
			if c.Intn(4) == 0 {
				*s = c.String(8)
				return
			}
			*s = words[c.Intn(len(words))]
		},
		func(n *int64, c randfill.Continue) { *n = int64(c.Intn(3)) * 1000 }, // 0 is root
		func(n *int32, c randfill.Continue) { *n = int32(c.Intn(3)) * 80 },   // hostPort 0 is none
	}})
	levels := []psapi.LevelVersion{{Level: psapi.LevelBaseline, Version: psapi.LatestVersion()},
		{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}}
	k := api.MustKindOf(&api.Pod{})
	reasons := map[string]bool{}
	allowed := 0
	for i := range 400 {
		pod := &api.Pod{}
		f.Fill(pod)
		api.SetTypeMeta(pod)
		if i%2 == 0 { // a service account's volume, as admission adds it
			pod.Spec.Volumes = append(pod.Spec.Volumes, api.Volume{Name: apiAccess, Projected: &api.ProjectedVolumeSource{
				Sources: []api.VolumeProjection{{ServiceAccountToken: &api.ServiceAccountTokenProjection{Path: "token"}}}}})
		}
		full, err := patch.ToKubernetes(k.APIVersion(), k.Kind, pod)
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		fp := full.(*corev1.Pod)
		meta, spec, err := kubePodSpec(k, pod)
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		// The verdicts are remembered by podSecurityShape: the verdict on it
		// must be the whole pod's, and a pod that differs in nothing else
		// (another name, labels, uid, image, service account volume's name)
		// gets its key.
		smeta, sspec, err := kubePodSpec(k, podSecurityShape(pod))
		if err != nil {
			t.Fatalf("pod %d's shape: %v", i, err)
		}
		key, ok := podSecurityKey(pod)
		sib := api.Clone(pod)
		sib.Name, sib.UID, sib.Labels = pod.Name+"-2", "other-uid", map[string]string{"other": "labels"}
		for j := range sib.Spec.Containers {
			sib.Spec.Containers[j].Image += "-other"
		}
		for j, v := range sib.Spec.Volumes {
			if v.Name == apiAccess {
				sib.Spec.Volumes[j].Name = apiAccess + "-other"
			}
		}
		if sibKey, sibOK := podSecurityKey(sib); !ok || !sibOK || sibKey != key {
			t.Fatalf("pod %d: no key (%v %v), or not its sibling's", i, ok, sibOK)
		}
		for _, lv := range levels {
			want := policy.AggregateCheckResults(ev.EvaluatePod(lv, &fp.ObjectMeta, &fp.Spec))
			for what, got := range map[string]policy.AggregateCheckResult{
				"the checks": policy.AggregateCheckResults(ev.EvaluatePod(lv, meta, spec)),
				"the shape":  policy.AggregateCheckResults(ev.EvaluatePod(lv, smeta, sspec)),
			} {
				if got.Allowed != want.Allowed || got.ForbiddenReason() != want.ForbiddenReason() || got.ForbiddenDetail() != want.ForbiddenDetail() {
					t.Fatalf("pod %d at %s: %s give\n%v: %s: %s\nthe whole spec gives\n%v: %s: %s", i, lv, what,
						got.Allowed, got.ForbiddenReason(), got.ForbiddenDetail(), want.Allowed, want.ForbiddenReason(), want.ForbiddenDetail())
				}
			}
			if want.Allowed {
				allowed++
			}
			for _, r := range want.ForbiddenReasons {
				reasons[r] = true
			}
		}
	}
	// The pods must reach the checks, not fail one of them each alike.
	if allowed == 0 || len(reasons) < 12 {
		t.Errorf("the random pods are too alike: %d results allowed, %d forbidden reasons: %v", allowed, len(reasons), slices.Sorted(maps.Keys(reasons)))
	}
}

// TestPodSecurityVerdictsRemembered: a pod of a shape checked lately is
// not converted and checked again (podSecurity.verdicts), and gets the
// same answer, in its own name, as the first: refused at baseline,
// admitted with a warning once enforce is lifted, refused at restricted
// for restricted's reasons. A verdict is kept by level: one level's never
// answers for another's.
func TestPodSecurityVerdictsRemembered(t *testing.T) {
	e, ctx := psEnv(t)
	ps := e.reg.podSecurity.Load()
	ps.verdicts.Reset()
	entries := ps.verdicts.Len
	create := func(name string) ([]string, error) {
		wctx, rec := withRecorder(ctx)
		_, err := e.reg.Create(wctx, podKind, hostNetworkPod("students", name))
		return warningsOf(t, rec.Header()), err
	}
	const baseline = `violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), hostPort (container "web" uses hostPort 8080)`
	for _, name := range []string{"first", "second"} {
		_, err := create(name)
		if want := fmt.Sprintf("pods %q is forbidden: %s", name, baseline); err == nil || err.Error() != want {
			t.Fatalf("%s: %v, want %s", name, err, want)
		}
	}
	if n := entries(); n != 1 {
		t.Fatalf("%d verdicts remembered after two pods of one shape at one level, want 1", n)
	}

	labelNamespace(t, e, ctx, "students", map[string]string{psapi.EnforceLevelLabel: "privileged"})
	warnings, err := create("lifted")
	if want := []string{wouldViolate(baseline)}; err != nil || !slices.Equal(warnings, want) {
		t.Fatalf("lifted: %v, warnings %q; want %q", err, warnings, want)
	}
	if n := entries(); n != 2 {
		t.Fatalf("%d verdicts remembered, want 2 (baseline, privileged)", n)
	}

	labelNamespace(t, e, ctx, "students", map[string]string{psapi.EnforceLevelLabel: "restricted"})
	_, err = create("restricted")
	lib := libraryMessage(t, psapi.LevelRestricted, corev1.PodSpec{
		HostNetwork: true,
		Containers:  []corev1.Container{{Name: "web", Image: "nginx:1.27", Ports: []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}}},
	})
	if want := fmt.Sprintf("pods %q is forbidden: %s", "restricted", lib); err == nil || err.Error() != want {
		t.Fatalf("restricted: %v, want %s", err, want)
	}
}

// BenchmarkPodSecurityKey: the key Pod Security's verdicts are remembered
// by, of a Deployment's pod as admission has it (the service account's
// volume mounted, a restricted securityContext), once per create in a
// namespace whose levels are not all privileged.
func BenchmarkPodSecurityKey(b *testing.B) {
	no, yes := false, true
	p := &api.Pod{
		ObjectMeta: api.ObjectMeta{Name: "web-7c9f5d8b6-x2x9q", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27",
			Ports:        []api.ContainerPort{{ContainerPort: 80, Protocol: "TCP"}},
			VolumeMounts: []api.VolumeMount{{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			SecurityContext: &api.SecurityContext{AllowPrivilegeEscalation: &no, RunAsNonRoot: &yes,
				Capabilities: &api.Capabilities{Drop: []string{"ALL"}}, SeccompProfile: &api.SeccompProfile{Type: "RuntimeDefault"}}}},
			Volumes: []api.Volume{{Name: "kube-api-access-x7k2p", Projected: &api.ProjectedVolumeSource{
				Sources: []api.VolumeProjection{{ServiceAccountToken: &api.ServiceAccountTokenProjection{Path: "token"}}}}}},
			RestartPolicy: "Always", DNSPolicy: "ClusterFirst", SchedulerName: "default-scheduler"},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := podSecurityKey(p); !ok {
			b.Fatal("no key")
		}
	}
}
