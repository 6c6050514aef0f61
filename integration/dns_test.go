package integration

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/runtime"
)

// netLabDNS is the cluster DNS on TestNetLab's cluster (two nodes in
// their own network namespaces, real containerd): from a web replica
// (busybox, its resolv.conf written by the agent), nslookup resolves
// kubernetes.default.svc.cluster.local, a Service of another
// namespace, a headless Service's pod by HOST.SUBDOMAIN (the StatefulSet
// shape: web-0.nginx) and a named port's SRV record; a name that is not
// there is NXDOMAIN, and a Service made now is answered at once.
func netLabDNS(t *testing.T, c client.Interface, from *api.Pod, h *netLabHost) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	id := containerIDOf(t, from)
	run := func(cmd ...string) (string, int) {
		var out, errb bytes.Buffer
		code, err := h.rt.Exec(ctx, id, runtime.ExecOptions{Cmd: cmd, Stdout: &out, Stderr: &errb})
		if err != nil {
			t.Fatalf("exec %v in %s: %v", cmd, from.Name, err)
		}
		return out.String() + errb.String(), code
	}
	kdns, err := client.Get[*api.Service](ctx, c, api.NamespaceSystem, api.ClusterDNSService)
	if err != nil || kdns.Spec.ClusterIP != "10.96.0.10" {
		t.Fatalf("kube-system/kube-dns: %+v %v", kdns, err)
	}
	// The kubelet's ClusterFirst file; the host's own search domains may
	// follow the cluster's.
	if conf, _ := run("cat", "/etc/resolv.conf"); !strings.HasPrefix(conf, "search default.svc.cluster.local svc.cluster.local cluster.local") ||
		!strings.Contains(conf, "\nnameserver 10.96.0.10\noptions ndots:5\n") {
		t.Fatalf("resolv.conf of %s:\n%s", from.Name, conf)
	}

	// A Service of another namespace, a headless Service with a pod that
	// names itself under it.
	if _, err := c.Create(ctx, namespace("dnslab")); err != nil {
		t.Fatal(err)
	}
	other := &api.Service{ObjectMeta: api.ObjectMeta{Name: "db", Namespace: "dnslab"}}
	other.Spec = api.ServiceSpec{Selector: map[string]string{"app": "db"}, Ports: []api.ServicePort{{Name: "pg", Port: 5432}}}
	if o, err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	} else {
		other = o.(*api.Service)
	}
	headless := &api.Service{ObjectMeta: api.ObjectMeta{Name: "nginx", Namespace: "default"}}
	headless.Spec = api.ServiceSpec{ClusterIP: "None", Selector: map[string]string{"dns": "lab"}, Ports: []api.ServicePort{{Name: "web", Port: 80}}}
	if _, err := c.Create(ctx, headless); err != nil {
		t.Fatal(err)
	}
	pod := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "web-0", Namespace: "default", Labels: map[string]string{"dns": "lab"}}}
	pod.Spec = api.PodSpec{Hostname: "web-0", Subdomain: "nginx", Containers: []api.Container{{Name: "nginx", Image: "nginx:alpine",
		ImagePullPolicy: "IfNotPresent", Ports: []api.ContainerPort{{Name: "web", ContainerPort: 80}}}}}
	if _, err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Delete(ctx, api.MustKindOf(&api.Pod{}), "default", "web-0", api.DeleteOptions{})
		testwait.For(t, 60*time.Second, "pod web-0 to go", func() bool {
			_, err := client.Get[*api.Pod](ctx, c, "default", "web-0")
			return api.IsNotFound(err)
		})
	})
	var podIP string
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		p, err := client.Get[*api.Pod](ctx, c, "default", "web-0")
		if err != nil {
			return false, err.Error()
		}
		podIP = p.Status.PodIP
		return allReady(p) && podIP != "", podSummary([]*api.Pod{p})
	})

	web, err := client.Get[*api.Service](ctx, c, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		args []string
		want string
	}{
		{[]string{"web.default.svc.cluster.local"}, "Address: " + web.Spec.ClusterIP},
		{[]string{"kubernetes.default.svc.cluster.local"}, "Address: 10.96.0.1"},
		{[]string{"db.dnslab.svc.cluster.local"}, "Address: " + other.Spec.ClusterIP},
		{[]string{"web-0.nginx.default.svc.cluster.local"}, "Address: " + podIP},
		{[]string{"nginx.default.svc.cluster.local"}, "Address: " + podIP},
		{[]string{"-type=SRV", "_pg._tcp.db.dnslab.svc.cluster.local"}, "5432 db.dnslab.svc.cluster.local"},
	} {
		// The headless Service's endpoint appears when web-0 is ready:
		// ask until the answer is there, within a deadline.
		testwait.Until(t, 10*time.Second, func() (bool, string) {
			out, code := run(append([]string{"nslookup"}, q.args...)...)
			return code == 0 && strings.Contains(out, q.want), fmt.Sprintf("nslookup %v (exit %d), want %q:\n%s", q.args, code, q.want, out)
		})
	}
	if out, _ := run("nslookup", "nothing.default.svc.cluster.local"); !strings.Contains(out, "NXDOMAIN") {
		t.Errorf("a name that is not there:\n%s", out)
	}
	// A Service made now is answered as soon as the node's watch has it.
	late := &api.Service{ObjectMeta: api.ObjectMeta{Name: "late", Namespace: "dnslab"}}
	late.Spec = api.ServiceSpec{Selector: map[string]string{"app": "late"}, Ports: []api.ServicePort{{Port: 80}}}
	if o, err := c.Create(ctx, late); err != nil {
		t.Fatal(err)
	} else {
		late = o.(*api.Service)
	}
	made := time.Now()
	testwait.Until(t, 5*time.Second, func() (bool, string) {
		out, _ := run("nslookup", "late.dnslab.svc.cluster.local")
		return strings.Contains(out, "Address: "+late.Spec.ClusterIP), out
	})
	t.Logf("cluster DNS: a new Service answered %v after its create; the DNS checks took %v",
		time.Since(made).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
