package cli

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

// testNow is the pinned clock of every test: ages are computed from it.
var testNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// result is what one command line printed.
type result struct {
	out, err string
	code     int
}

// run executes args against fc, with the clock pinned and stdin given.
func run(t testing.TB, fc client.Interface, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	r := NewRoot(&out, &errb)
	r.Stdin = strings.NewReader(stdin)
	r.Now = func() time.Time { return testNow }
	r.NewClient = func() (client.Interface, error) { return fc, nil }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := r.Execute(ctx, args)
	return result{out: out.String(), err: errb.String(), code: ExitCode(err)}
}

func ago(d time.Duration) api.Time { return api.NewTime(testNow.Add(-d)) }

func i32(v int32) *int32 { return &v }

func meta(ns, name string, age time.Duration) api.ObjectMeta {
	return api.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: ago(age)}
}

func runningPod(ns, name, node, ip string, age time.Duration) *api.Pod {
	p := &api.Pod{
		ObjectMeta: meta(ns, name, age),
		Spec:       api.PodSpec{NodeName: node, Containers: []api.Container{{Name: "web", Image: "nginx:alpine"}}},
		Status: api.PodStatus{
			Phase: api.PodRunning, PodIP: ip,
			Conditions:        []api.PodCondition{{Type: api.PodReady, Status: api.ConditionTrue}},
			ContainerStatuses: []api.ContainerStatus{{Name: "web", Ready: true, State: api.ContainerState{Running: &api.ContainerStateRunning{}}}},
		},
	}
	p.Labels = map[string]string{"app": "web"}
	return p
}

func deployment(ns, name string, replicas int32, age time.Duration) *api.Deployment {
	labels := map[string]string{"app": name}
	return &api.Deployment{
		ObjectMeta: api.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: ago(age), Labels: labels},
		Spec: api.DeploymentSpec{
			Replicas: i32(replicas),
			Selector: &api.LabelSelector{MatchLabels: labels},
			Template: api.PodTemplateSpec{
				ObjectMeta: api.ObjectMeta{Labels: labels},
				Spec:       api.PodSpec{Containers: []api.Container{{Name: "nginx", Image: "nginx:alpine"}}},
			},
		},
		Status: api.DeploymentStatus{ObservedGeneration: 1, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas},
	}
}

// wantLines checks that got has exactly these lines (trailing spaces trimmed).
func wantLines(t testing.TB, got string, want ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("output:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

func wantContains(t testing.TB, got string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(got, s) {
			t.Errorf("output lacks %q:\n%s", s, got)
		}
	}
}

func newFake(objs ...api.Object) *fake.Client {
	f := fake.New(objs...)
	f.SetClock(func() time.Time { return testNow })
	return f
}

func mustQuantity(s string) api.Quantity { return resource.MustParse(s) }

var spaces = regexp.MustCompile(` +`)

// wantContainsLoose is wantContains with runs of spaces collapsed, for
// describe output whose alignment depends on neighbouring lines.
func wantContainsLoose(t testing.TB, got string, subs ...string) {
	t.Helper()
	g := spaces.ReplaceAllString(got, " ")
	for _, s := range subs {
		if !strings.Contains(g, spaces.ReplaceAllString(s, " ")) {
			t.Errorf("output lacks %q:\n%s", s, got)
		}
	}
}

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
