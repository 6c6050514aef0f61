package podworker

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/runtime"
)

// Discovery: how a pod finds Services without a DNS server.
//
//   - Environment (Kubernetes' service links): for every Service of the
//     pod's namespace that has a cluster IP when a container starts,
//     NAME_SERVICE_HOST, NAME_SERVICE_PORT[_PORTNAME] and the Docker-link
//     style NAME_PORT, NAME_PORT_<port>_<PROTO>[_PROTO|_PORT|_ADDR]
//     (NAME upper-cased, - as _). Off with enableServiceLinks: false. A
//     snapshot: services made later are not there until the container
//     restarts, exactly as in Kubernetes.
//   - Names: a per-pod hosts file, bind-mounted on /etc/hosts of every
//     container of a pod with its own network, lists the pod's hostname
//     and, for every Service of its namespace with a cluster IP, NAME,
//     NAME.NAMESPACE, NAME.NAMESPACE.svc and
//     NAME.NAMESPACE.svc.cluster.local. The agent rewrites it in place
//     whenever it syncs the pod (an event, or the resync), so new
//     services appear within a minute.
//
// Names are also, and for every namespace, answered by the cluster DNS
// (agent/dns; the pod's resolv.conf: resolvconf.go). The hosts file stays
// because `cat /etc/hosts` shows students what a name lookup finds first
// (the C library reads it before asking DNS); it is refreshed at each
// sync, so it may lag a Service's change by up to a minute, while DNS
// follows it at once. `nslookup` asks DNS only.

// serviceLinkEnv are the service environment variables for svcs, sorted
// by service name (later definitions of a variable lose to earlier ones
// only through the caller's ordering).
func serviceLinkEnv(svcs []*api.Service) [][2]string {
	sort.Slice(svcs, func(i, j int) bool { return svcs[i].Name < svcs[j].Name })
	var out [][2]string
	add := func(k, v string) { out = append(out, [2]string{k, v}) }
	for _, s := range svcs {
		ip := s.Spec.ClusterIP
		if _, err := netip.ParseAddr(ip); err != nil || len(s.Spec.Ports) == 0 {
			continue
		}
		name := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
		add(name+"_SERVICE_HOST", ip)
		add(name+"_SERVICE_PORT", fmt.Sprint(s.Spec.Ports[0].Port))
		for _, p := range s.Spec.Ports {
			if p.Name != "" {
				add(name+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_")), fmt.Sprint(p.Port))
			}
		}
		for i, p := range s.Spec.Ports {
			proto := strings.ToLower(p.Protocol)
			if proto == "" {
				proto = "tcp"
			}
			url := fmt.Sprintf("%s://%s:%d", proto, ip, p.Port)
			if i == 0 {
				add(name+"_PORT", url)
			}
			pre := fmt.Sprintf("%s_PORT_%d_%s", name, p.Port, strings.ToUpper(proto))
			add(pre, url)
			add(pre+"_PROTO", proto)
			add(pre+"_PORT", fmt.Sprint(p.Port))
			add(pre+"_ADDR", ip)
		}
	}
	return out
}

// namespaceServices lists the Services of ns (none on error: discovery
// never stops a pod from starting).
func (w *Worker) namespaceServices(ctx context.Context, ns string) []*api.Service {
	if w.cfg.Client == nil {
		return nil
	}
	list, _, err := w.cfg.Client.List(ctx, api.MustKindOf(&api.Service{}), ns, api.ListOptions{})
	if err != nil {
		w.log.Debug("list services for discovery", "namespace", ns, "err", err)
		return nil
	}
	var out []*api.Service
	for _, o := range list {
		out = append(out, o.(*api.Service))
	}
	return out
}

// serviceLinks is serviceLinkEnv for pod's namespace, unless the pod
// turned it off, and always for the Service default/kubernetes (the API:
// KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT, KUBERNETES_PORT...),
// as the kubelet's getServiceEnvVarMap: a Service named kubernetes in the
// pod's own namespace wins over it when links are on.
func (w *Worker) serviceLinks(ctx context.Context, pod *api.Pod) [][2]string {
	var svcs []*api.Service
	if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
		svcs = w.namespaceServices(ctx, pod.Namespace)
	}
	if !slices.ContainsFunc(svcs, func(s *api.Service) bool { return s.Name == "kubernetes" }) && w.cfg.Client != nil {
		if s, err := client.Get[*api.Service](ctx, w.cfg.Client, "default", "kubernetes"); err == nil {
			svcs = append(svcs, s)
		} else if !api.IsNotFound(err) {
			w.log.Debug("read the kubernetes service for discovery", "err", err)
		}
	}
	return serviceLinkEnv(svcs)
}

// hostsFile is the /etc/hosts of a pod.
func hostsFile(hostname, subdomain, podIP, namespace string, svcs []*api.Service) []byte {
	var b strings.Builder
	b.WriteString("# Kubernetes-style hosts file written by the skiff agent\n")
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	switch {
	case podIP != "" && hostname != "" && subdomain != "":
		// As the kubelet: the pod's full name under its headless Service.
		fmt.Fprintf(&b, "%s\t%s.%s.%s.svc.cluster.local\t%s\n", podIP, hostname, subdomain, namespace, hostname)
	case podIP != "" && hostname != "":
		fmt.Fprintf(&b, "%s\t%s\n", podIP, hostname)
	}
	sort.Slice(svcs, func(i, j int) bool { return svcs[i].Name < svcs[j].Name })
	for _, s := range svcs {
		if _, err := netip.ParseAddr(s.Spec.ClusterIP); err != nil {
			continue
		}
		n := s.Name + "." + namespace
		fmt.Fprintf(&b, "%s\t%s %s %s.svc %s.svc.cluster.local\n", s.Spec.ClusterIP, s.Name, n, n, n)
	}
	return []byte(b.String())
}

// hostsMount writes (or rewrites in place) pod's hosts file and returns
// its mount; ok is false when the pod has no network of its own or the
// worker has no volume directory.
func (w *Worker) hostsMount(ctx context.Context, pod *api.Pod, st *podState) (runtime.Mount, bool, error) {
	if w.cfg.VolumeDir == "" || st.network == nil || pod.Spec.HostNetwork {
		return runtime.Mount{}, false, nil
	}
	hostname := pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	path := filepath.Join(w.podDir(pod.UID), "etc-hosts")
	want := hostsFile(hostname, pod.Spec.Subdomain, st.network.IP, pod.Namespace, w.namespaceServices(ctx, pod.Namespace))
	if cur, err := os.ReadFile(path); err != nil || string(cur) != string(want) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return runtime.Mount{}, false, fmt.Errorf("write hosts file: %w", err)
		}
		// In place (same inode), so running containers see the change.
		if err := os.WriteFile(path, want, 0o644); err != nil {
			return runtime.Mount{}, false, fmt.Errorf("write hosts file: %w", err)
		}
	}
	return runtime.Mount{Source: path, Destination: "/etc/hosts", ReadOnly: true}, true, nil
}
