package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/pki"
	"skiff.dev/skiff/pki/pkitest"
	"skiff.dev/skiff/runtime"
	rtfake "skiff.dev/skiff/runtime/fake"
)

const testNode = "node-1"

func testPod(name, uid string) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default", UID: uid}}
	p.Spec.NodeName = testNode
	p.Spec.Containers = []api.Container{{Name: "web", Image: "nginx:1", ImagePullPolicy: "IfNotPresent"}}
	return p
}

// runContainer creates and starts the container the pod worker of node
// would have made for pod uid's container "web" at attempt 0.
func runContainer(t testing.TB, rt runtime.Runtime, node, ns, name, uid string) string {
	t.Helper()
	ctx := context.Background()
	img, err := rt.EnsureImage(ctx, "nginx:1", runtime.PullIfNotPresent, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := rt.CreateContainer(ctx, runtime.ContainerSpec{
		ID: podworker.ContainerID(uid, "web", 0), Image: img.Name,
		Labels: map[string]string{runtime.LabelPodUID: uid, runtime.LabelPodNamespace: ns, runtime.LabelPodName: name,
			runtime.LabelContainerName: "web", runtime.LabelAttempt: strconv.Itoa(0), podworker.LabelNode: node},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	return id
}

func containersOf(t testing.TB, rt runtime.Runtime, uid string) []runtime.ContainerStatus {
	t.Helper()
	cs, err := rt.ListContainers(context.Background(), map[string]string{runtime.LabelPodUID: uid})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func startAgent(t *testing.T, cfg Config, c *fake.Client, rt runtime.Runtime) *Agent {
	t.Helper()
	a, err := New(cfg, c, rt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return a
}

func testConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.NodeName, cfg.NodeIP, cfg.DataDir = testNode, "127.0.0.1", t.TempDir()
	cfg.Resync = time.Hour // only the start-up cleanup may act in these tests
	return cfg
}

// A node that comes back must stop the pods it no longer owns: while the
// agent was down, pod "gone" was deleted (the node lifecycle controller
// evicted it); its container still runs. At start the agent removes it,
// and adopts the container of the pod that is still bound to it.
func TestRunRemovesContainersOfPodsDeletedWhileDown(t *testing.T) {
	rt := rtfake.New(rtfake.Config{Images: []string{"nginx:1"}})
	liveID := runContainer(t, rt, testNode, "default", "live", "uid-live")
	runContainer(t, rt, testNode, "default", "gone", "uid-gone")
	// Another node's agent shares this runtime: its containers are not ours.
	runContainer(t, rt, "node-2", "default", "elsewhere", "uid-elsewhere")
	c := fake.New(testPod("live", "uid-live"))

	startAgent(t, testConfig(t), c, rt)

	testwait.For(t, 10*time.Second, "the containers of the deleted pod to be removed", func() bool { return len(containersOf(t, rt, "uid-gone")) == 0 })
	testwait.For(t, 10*time.Second, "the live pod to be Running", func() bool {
		o, err := c.Get(t.Context(), api.MustKindOf(&api.Pod{}), "default", "live")
		return err == nil && o.(*api.Pod).Status.Phase == api.PodRunning
	})
	cs := containersOf(t, rt, "uid-live")
	if len(cs) != 1 || cs[0].ID != liveID || cs[0].State != runtime.StateRunning {
		t.Errorf("containers of the live pod %+v, want the adopted %s still running and no other", cs, liveID)
	}
	if cs := containersOf(t, rt, "uid-elsewhere"); len(cs) != 1 {
		t.Errorf("the other node's container was touched: %+v", cs)
	}
}

// A stop after the node registered but before the first list of pods
// filled the agent's cache is a clean stop: Run returns nil.
func TestStopBeforePodsSyncedIsClean(t *testing.T) {
	c := fake.New()
	c.Intercept(func(a fake.Action) error {
		if a.Verb == "list" && a.Kind == "Pod" {
			return errors.New("the API server is slow today")
		}
		return nil
	})
	a, err := New(testConfig(t), c, rtfake.New(rtfake.DefaultConfig()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	testwait.For(t, 10*time.Second, "the node to register", func() bool {
		_, err := c.Get(t.Context(), api.MustKindOf(&api.Node{}), "", testNode)
		return err == nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after a stop before the pods synced: %v, want nil", err)
	}
}

// The node registers the agent server's port, and the server (TLS with
// the node's serving certificate) lets in only the API server's client
// certificate.
func TestServerPortAndAuth(t *testing.T) {
	rt := rtfake.New(rtfake.Config{Images: []string{"nginx:1"}})
	c := fake.New()
	ca := pkitest.CA(t)
	creds := pkitest.Node(t, ca, testNode)
	cfg := testConfig(t)
	cfg.Listen = "127.0.0.1:0"
	var err error
	if cfg.TLS, err = creds.AgentServerTLS(); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, cfg, c, rt)

	testwait.For(t, 10*time.Second, "the node to register its daemon port", func() bool {
		o, err := c.Get(t.Context(), api.MustKindOf(&api.Node{}), "", testNode)
		return err == nil && o.(*api.Node).Status.DaemonEndpoints.KubeletEndpoint.Port != 0
	})
	o, _ := c.Get(t.Context(), api.MustKindOf(&api.Node{}), "", testNode)
	port := o.(*api.Node).Status.DaemonEndpoints.KubeletEndpoint.Port
	if !strings.HasSuffix(a.Addr(), ":"+strconv.Itoa(int(port))) {
		t.Errorf("daemon port %d, server at %s", port, a.Addr())
	}

	nodeCert, err := tls.X509KeyPair(creds.ClientCert, creds.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	apiServer := pkitest.Leaf(t, ca, pki.Leaf{CommonName: pki.APIServerKubeletClient, Organization: []string{pki.MastersGroup}, Client: true})
	master := pkitest.Leaf(t, ca, pki.Leaf{CommonName: "teacher", Organization: []string{pki.MastersGroup}, Client: true})
	other := pkitest.CA(t)
	stranger := pkitest.Leaf(t, other, pki.Leaf{CommonName: pki.APIServerKubeletClient, Organization: []string{pki.MastersGroup}, Client: true})
	for _, tc := range []struct {
		name string
		cert *tls.Certificate
		code int    // 0: the TLS handshake fails
		body string // in the answer, or in the error
	}{
		{"no client certificate", nil, 0, "certificate required"},
		{"a certificate of another CA", &stranger, 0, "unknown certificate authority"},
		{"a node's certificate", &nodeCert, http.StatusForbidden, "Forbidden (user=system:node:" + testNode},
		{"the API server's", &apiServer, http.StatusNotFound, `pods \"nope\" not found`},
		{"system:masters", &master, http.StatusNotFound, `pods \"nope\" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hc := pkitest.HTTPClient(ca, tc.cert)
			defer hc.CloseIdleConnections()
			resp, err := hc.Get("https://" + a.Addr() + "/pods/default/nope/log")
			if tc.code == 0 {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("got %d, want the TLS handshake refused", resp.StatusCode)
				}
				if !strings.Contains(err.Error(), tc.body) {
					t.Fatalf("error %v, want %q", err, tc.body)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.body) {
				t.Errorf("got %d %s, want %d with %q", resp.StatusCode, b, tc.code, tc.body)
			}
		})
	}
	// Plain HTTP gets nothing either.
	if resp, err := http.Get("http://" + a.Addr() + "/pods/default/nope/log"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP: %d %s, want 400", resp.StatusCode, b)
		}
	}
}
