package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/internal/testwait"
)

// A teacher's lab room with `skiff classroom` on an in-process control
// plane (its CSR signer and RBAC): a bad roster line changes nothing; the
// room gives each student a namespace, quota, edit binding and a
// kubeconfig that is theirs (CN, group, default namespace) and works
// there only; a re-run issues nothing; status lists the room; delete
// removes only the room's namespaces.
func TestClassroomCommand(t *testing.T) {
	_, admin := startTestControlPlane(t, t.TempDir())
	dir := t.TempDir()
	must := func(args ...string) string {
		t.Helper()
		res := runCLI(t, append(args, "--kubeconfig", admin)...)
		if res.code != 0 {
			t.Fatalf("skiff %s: code %d\n%s%s", strings.Join(args, " "), res.code, res.out, res.err)
		}
		return res.out
	}
	roster := filepath.Join(dir, "roster.txt")
	write := func(s string) {
		if err := os.WriteFile(roster, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfigs := filepath.Join(dir, "kubeconfigs")

	// Refused before any write: a malformed line, a namespace that is not
	// the room's, an unknown quota resource, bad flags.
	write("# GPU lab\nalice\nBob Smith\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--roster", roster}, `error: ` + roster + `:3: student "Bob Smith": not a valid namespace name: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'`},
		{[]string{"--names", "alice,default"}, `error: nothing was created: student default: namespace "default" exists and is not a classroom's (not labelled skiff.dev/classroom=gpu-lab): choose another name`},
		{[]string{"--names", "alice", "--hard", "requests.nvidia.com/gpu"}, `error: --hard: invalid argument syntax requests.nvidia.com/gpu, expected <resource>=<value>`},
		{[]string{"--names", "alice", "--hard", "nvidia.com/gpu=1"}, `The ResourceQuota "student" is invalid: spec.hard[nvidia.com/gpu]: Invalid value: "nvidia.com/gpu"`},
		{[]string{"--names", "alice", "--students", "3"}, `error: --roster, --names and --students: give one`},
		{nil, `error: no students: give --roster FILE, --names a,b,... or --students N`},
	} {
		res := runCLI(t, append([]string{"classroom", "create", "gpu-lab", "--dir", kubeconfigs, "--kubeconfig", admin}, tc.args...)...)
		if res.code == 0 || !strings.HasPrefix(res.err, tc.want) {
			t.Errorf("classroom create %s: code %d\n%s%s\nwant %q", strings.Join(tc.args, " "), res.code, res.out, res.err, tc.want)
		}
	}
	if out := must("get", "namespaces", "-l", "skiff.dev/classroom=gpu-lab"); out != "" {
		t.Fatalf("refused rooms left namespaces:\n%s", out)
	}
	if _, err := os.Stat(kubeconfigs); !os.IsNotExist(err) {
		t.Fatalf("refused rooms made the directory: %v", err)
	}

	write("# GPU lab\nalice\n\nbob  # late joiner\n")
	out := must("classroom", "create", "gpu-lab", "--roster", roster, "--hard", "requests.nvidia.com/gpu=1,pods=5", "--dir", kubeconfigs)
	wantLines(t, out,
		"namespace/alice created",
		"alice: resourcequota/student created",
		"alice: rolebinding.rbac.authorization.k8s.io/student-edit created",
		"alice: kubeconfig "+kubeconfigs+"/alice.kubeconfig written",
		"namespace/bob created",
		"bob: resourcequota/student created",
		"bob: rolebinding.rbac.authorization.k8s.io/student-edit created",
		"bob: kubeconfig "+kubeconfigs+"/bob.kubeconfig written",
		"room gpu-lab: 2 students; give each their kubeconfig from "+kubeconfigs)

	alice := filepath.Join(kubeconfigs, "alice.kubeconfig")
	res := runCLI(t, "auth", "whoami", "--kubeconfig", alice)
	if !regexp.MustCompile(`Username\s+alice\n.*Groups\s+\[gpu-lab system:authenticated\]`).MatchString(strings.ReplaceAll(res.out, "\n", "\n.*")) {
		t.Errorf("alice's whoami:\n%s%s", res.out, res.err)
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) { // RBAC's index follows the bindings
		res := runCLI(t, "auth", "can-i", "create", "pods", "--kubeconfig", alice)
		return res.out == "yes\n", res.out + res.err
	})
	for _, tc := range []struct {
		args []string
		out  string
	}{
		{[]string{"auth", "can-i", "create", "deployments.apps"}, "yes\n"},
		{[]string{"auth", "can-i", "list", "pods", "-n", "bob"}, "no\n"},
		{[]string{"auth", "can-i", "create", "rolebindings"}, "no\n"},
		{[]string{"auth", "can-i", "update", "resourcequotas"}, "no\n"},
	} {
		if res := runCLI(t, append(tc.args, "--kubeconfig", alice)...); res.out != tc.out {
			t.Errorf("alice: skiff %s: %q %s", strings.Join(tc.args, " "), res.out, res.err)
		}
	}
	if res := runCLI(t, "get", "quota", "--kubeconfig", alice); !regexp.MustCompile(`(?m)^student\s+pods: 0/5, requests.nvidia.com/gpu: 0/1\s`).MatchString(res.out) {
		t.Errorf("alice's get quota:\n%s%s", res.out, res.err)
	}
	res = runCLI(t, "get", "pods", "-n", "bob", "--kubeconfig", alice)
	if want := `Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "bob"`; !strings.Contains(res.err, want) {
		t.Errorf("alice's get pods -n bob: %q, want %q", res.err, want)
	}

	// Again, with carol: alice and bob are unchanged, no certificate is
	// requested for them.
	csrs := strings.Count(must("get", "csr"), "Approved,Issued")
	write("alice\nbob\ncarol\n")
	out = must("classroom", "create", "gpu-lab", "--roster", roster, "--hard", "requests.nvidia.com/gpu=1,pods=5", "--dir", kubeconfigs)
	for _, w := range []string{"namespace/alice unchanged", "bob: resourcequota/student unchanged", "alice: kubeconfig " + kubeconfigs + "/alice.kubeconfig unchanged", "namespace/carol created", "carol: kubeconfig " + kubeconfigs + "/carol.kubeconfig written"} {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("re-run: no %q in:\n%s", w, out)
		}
	}
	if n := strings.Count(must("get", "csr"), "Approved,Issued"); n != csrs+1 {
		t.Errorf("the re-run issued %d certificates, want 1 (carol's)", n-csrs)
	}

	out = must("classroom", "status", "gpu-lab")
	for _, re := range []string{`^STUDENT\s+STATUS\s+ROLE\s+REQUEST\s+LIMIT\s+AGE\n`, `(?m)^alice\s+Active\s+edit\s+pods: 0/5, requests.nvidia.com/gpu: 0/1\s+<none>\s+\S+$`, `(?m)^carol\s+Active\s+edit\s`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("status: no %s in:\n%s", re, out)
		}
	}

	out = must("classroom", "delete", "gpu-lab")
	wantLines(t, out, `namespace "alice" deleted`, `namespace "bob" deleted`, `namespace "carol" deleted`)
	if out := must("get", "namespaces", "default"); !strings.Contains(out, "Active") {
		t.Errorf("default after the room's delete:\n%s", out)
	}
}

// BenchmarkClassroomCreate times what a teacher waits for: a room of 40
// (40 namespaces, quotas, bindings and certificates through the CSR API)
// on an in-process control plane, then the same command again, which
// reads and writes nothing (rerun-ms), and the room's delete (delete-ms).
//
//	go test -run '^$' -bench BenchmarkClassroomCreate -benchtime 3x ./cli/
func BenchmarkClassroomCreate(b *testing.B) {
	_, admin := startTestControlPlane(b, b.TempDir())
	var create, rerun, del time.Duration
	for i := range b.N {
		room, dir := fmt.Sprintf("lab%d", i), b.TempDir()
		args := []string{"classroom", "create", room, "--students", "40", "--dir", dir, "--kubeconfig", admin}
		for _, step := range []struct {
			args []string
			into *time.Duration
		}{{args, &create}, {args, &rerun}, {[]string{"classroom", "delete", room, "--kubeconfig", admin}, &del}} {
			t0 := time.Now()
			if res := runCLI(b, step.args...); res.code != 0 {
				b.Fatalf("skiff %s: %s", strings.Join(step.args, " "), res.err)
			}
			*step.into += time.Since(t0)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(create.Milliseconds())/n, "create-ms")
	b.ReportMetric(float64(rerun.Milliseconds())/n, "rerun-ms")
	b.ReportMetric(float64(del.Milliseconds())/n, "delete-ms")
	b.ReportMetric(float64(rerun)/float64(create), "rerun/create")
}
