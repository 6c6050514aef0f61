package extender

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	schedv1 "k8s.io/kube-scheduler/config/v1"
	extv1 "k8s.io/kube-scheduler/extender/v1"

	"skiff.dev/skiff/api"
)

// Extender is one configured extender.
type Extender struct {
	cfg     schedv1.Extender
	client  *http.Client
	managed []string
}

// New makes the client of one extender from its configuration (validated
// by package config).
func New(cfg schedv1.Extender) (*Extender, error) {
	tr := &http.Transport{Proxy: nil}
	if cfg.EnableHTTPS {
		tc, err := tlsConfig(cfg.TLSConfig)
		if err != nil {
			return nil, fmt.Errorf("extender %s: tlsConfig: %w", cfg.URLPrefix, err)
		}
		tr.TLSClientConfig = tc
	}
	e := &Extender{cfg: cfg, client: &http.Client{Transport: tr, Timeout: cfg.HTTPTimeout.Duration}}
	for _, r := range cfg.ManagedResources {
		e.managed = append(e.managed, r.Name)
	}
	return e, nil
}

func tlsConfig(c *schedv1.ExtenderTLSConfig) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c == nil {
		return tc, nil
	}
	tc.InsecureSkipVerify = c.Insecure //nolint:gosec // the configuration asks for it, as kube-scheduler's
	tc.ServerName = c.ServerName
	certPEM, keyPEM, caPEM := c.CertData, c.KeyData, c.CAData
	var err error
	if len(certPEM) == 0 && c.CertFile != "" {
		if certPEM, err = os.ReadFile(c.CertFile); err != nil {
			return nil, err
		}
	}
	if len(keyPEM) == 0 && c.KeyFile != "" {
		if keyPEM, err = os.ReadFile(c.KeyFile); err != nil {
			return nil, err
		}
	}
	if len(caPEM) == 0 && c.CAFile != "" {
		if caPEM, err = os.ReadFile(c.CAFile); err != nil {
			return nil, err
		}
	}
	if len(certPEM) > 0 || len(keyPEM) > 0 {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if len(caPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("no certificate in the CA data")
		}
		tc.RootCAs = pool
	}
	return tc, nil
}

// Name is the extender's URL prefix, as kube-scheduler names it.
func (e *Extender) Name() string { return e.cfg.URLPrefix }

// Weight multiplies its prioritize scores.
func (e *Extender) Weight() int64 { return e.cfg.Weight }

// IsIgnorable reports whether the scheduler goes on when it fails.
func (e *Extender) IsIgnorable() bool { return e.cfg.Ignorable }

// IsFilter, IsPrioritizer, IsBinder and SupportsPreemption say which verbs
// it has.
func (e *Extender) IsFilter() bool           { return e.cfg.FilterVerb != "" }
func (e *Extender) IsPrioritizer() bool      { return e.cfg.PrioritizeVerb != "" }
func (e *Extender) IsBinder() bool           { return e.cfg.BindVerb != "" }
func (e *Extender) SupportsPreemption() bool { return e.cfg.PreemptVerb != "" }

// IgnoredResources are the managed resources the scheduler leaves to it
// (ignoredByScheduler): NodeResourcesFit does not check them.
func (e *Extender) IgnoredResources() []string {
	var out []string
	for _, r := range e.cfg.ManagedResources {
		if r.IgnoredByScheduler {
			out = append(out, r.Name)
		}
	}
	return out
}

// IsInterested reports whether the extender is asked about pod: it manages
// no resources, or one the pod requests or limits.
func (e *Extender) IsInterested(pod *api.Pod) bool {
	if len(e.managed) == 0 {
		return true
	}
	for _, cs := range [][]api.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			for _, l := range []api.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				for name := range l {
					if slices.Contains(e.managed, name) {
						return true
					}
				}
			}
		}
	}
	return false
}

// FilterResult is an extender's filter answer.
type FilterResult struct {
	// Feasible: the nodes it lets through, in the order given.
	Feasible []string
	// Failed and FailedAndUnresolvable: the reason of each node it
	// rejected (unresolvable: preemption cannot help there).
	Failed, FailedAndUnresolvable map[string]string
}

// Filter asks which of nodes the pod may run on.
func (e *Extender) Filter(ctx context.Context, pod *api.Pod, nodes []*api.Node) (*FilterResult, error) {
	args, err := e.args(pod, nodes)
	if err != nil {
		return nil, err
	}
	var res extv1.ExtenderFilterResult
	if err := e.send(ctx, e.cfg.FilterVerb, args, &res); err != nil {
		return nil, err
	}
	if res.Error != "" {
		return nil, fmt.Errorf("%s", res.Error)
	}
	out := &FilterResult{Failed: res.FailedNodes, FailedAndUnresolvable: res.FailedAndUnresolvableNodes}
	var names []string
	switch {
	case e.cfg.NodeCacheCapable && res.NodeNames != nil:
		names = *res.NodeNames
	case res.Nodes != nil:
		for _, n := range res.Nodes.Items {
			names = append(names, n.Name)
		}
	}
	asked := map[string]bool{}
	for _, n := range nodes {
		asked[n.Name] = true
	}
	for _, n := range names {
		if asked[n] { // an extender cannot add nodes
			out.Feasible = append(out.Feasible, n)
		}
	}
	return out, nil
}

// Prioritize asks for each node's score (0..10; the scheduler multiplies
// it by the weight and scales it to 0..100).
func (e *Extender) Prioritize(ctx context.Context, pod *api.Pod, nodes []*api.Node) (map[string]int64, error) {
	args, err := e.args(pod, nodes)
	if err != nil {
		return nil, err
	}
	var res extv1.HostPriorityList
	if err := e.send(ctx, e.cfg.PrioritizeVerb, args, &res); err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(res))
	for _, h := range res {
		out[h.Host] = min(max(h.Score, extv1.MinExtenderPriority), extv1.MaxExtenderPriority)
	}
	return out, nil
}

// Bind asks the extender to bind pod to node.
func (e *Extender) Bind(ctx context.Context, pod *api.Pod, node string) error {
	args := extv1.ExtenderBindingArgs{PodName: pod.Name, PodNamespace: pod.Namespace, PodUID: types.UID(pod.UID), Node: node}
	var res extv1.ExtenderBindingResult
	if err := e.send(ctx, e.cfg.BindVerb, args, &res); err != nil {
		return err
	}
	if res.Error != "" {
		return fmt.Errorf("%s", res.Error)
	}
	return nil
}

// ProcessPreemption tells the extender which pods preemption would evict
// on each candidate node; it answers with the nodes (and victims, by UID)
// it accepts. A node it leaves out is no candidate any more.
func (e *Extender) ProcessPreemption(ctx context.Context, pod *api.Pod, victims map[string][]*api.Pod) (map[string][]string, error) {
	p, err := toCore[corev1.Pod](pod)
	if err != nil {
		return nil, err
	}
	args := extv1.ExtenderPreemptionArgs{Pod: p}
	if e.cfg.NodeCacheCapable {
		args.NodeNameToMetaVictims = map[string]*extv1.MetaVictims{}
		for node, pods := range victims {
			mv := &extv1.MetaVictims{}
			for _, v := range pods {
				mv.Pods = append(mv.Pods, &extv1.MetaPod{UID: v.UID})
			}
			args.NodeNameToMetaVictims[node] = mv
		}
	} else {
		args.NodeNameToVictims = map[string]*extv1.Victims{}
		for node, pods := range victims {
			v := &extv1.Victims{}
			for _, vp := range pods {
				c, err := toCore[corev1.Pod](vp)
				if err != nil {
					return nil, err
				}
				v.Pods = append(v.Pods, c)
			}
			args.NodeNameToVictims[node] = v
		}
	}
	var res extv1.ExtenderPreemptionResult
	if err := e.send(ctx, e.cfg.PreemptVerb, args, &res); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for node, mv := range res.NodeNameToMetaVictims {
		if _, asked := victims[node]; !asked || mv == nil {
			continue
		}
		uids := []string{}
		for _, p := range mv.Pods {
			if p != nil {
				uids = append(uids, p.UID)
			}
		}
		out[node] = uids
	}
	return out, nil
}

// args builds ExtenderArgs: the pod, and the nodes (or, node cache
// capable, their names).
func (e *Extender) args(pod *api.Pod, nodes []*api.Node) (*extv1.ExtenderArgs, error) {
	p, err := toCore[corev1.Pod](pod)
	if err != nil {
		return nil, err
	}
	args := &extv1.ExtenderArgs{Pod: p}
	if e.cfg.NodeCacheCapable {
		names := make([]string, len(nodes))
		for i, n := range nodes {
			names[i] = n.Name
		}
		args.NodeNames = &names
		return args, nil
	}
	list := &corev1.NodeList{}
	for _, n := range nodes {
		c, err := toCore[corev1.Node](n)
		if err != nil {
			return nil, err
		}
		list.Items = append(list.Items, *c)
	}
	args.Nodes = list
	return args, nil
}

// toCore converts a skiff object to its k8s.io/api twin (the same JSON).
func toCore[T any](o any) (*T, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// send POSTs args to URLPREFIX/verb and decodes the answer, as
// kube-scheduler's HTTPExtender.send: anything but 200 is an error.
func (e *Extender) send(ctx context.Context, verb string, args, result any) error {
	body, err := json.Marshal(args)
	if err != nil {
		return err
	}
	url := strings.TrimRight(e.cfg.URLPrefix, "/") + "/" + verb
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return fmt.Errorf("failed %v with extender at URL %v, code %v", verb, url, resp.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(result)
}

// DefaultTimeout is an extender's httpTimeout when it gives none.
const DefaultTimeout = 5 * time.Second
