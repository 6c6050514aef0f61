package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Config of a node's DNS server.
type Config struct {
	// Addr is the host:port it answers on (10.96.0.10:53).
	Addr string
	// Upstreams are the resolvers other names go to (host:port); nil
	// reads the nameservers of /etc/resolv.conf.
	Upstreams []string
	// Listen opens the sockets; nil is the net package's, in this
	// process's network namespace (tests and netns nodes pass their own).
	ListenPacket func(network, addr string) (net.PacketConn, error)
	Listen       func(network, addr string) (net.Listener, error)
	Log          *slog.Logger
}

// Server answers the cluster's names from its caches.
type Server struct {
	cfg       Config
	log       *slog.Logger
	services  *client.Informer
	endpoints *client.Informer
}

// New returns the DNS server of a node reading Services and Endpoints
// through c.
func New(c client.Interface, cfg Config) *Server {
	lg := cfg.Log
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "dns")
	if cfg.Upstreams == nil {
		cfg.Upstreams = HostResolvers("/etc/resolv.conf")
	}
	if cfg.ListenPacket == nil {
		cfg.ListenPacket = net.ListenPacket
	}
	if cfg.Listen == nil {
		cfg.Listen = net.Listen
	}
	return &Server{cfg: cfg, log: lg,
		services:  client.NewInformer(c, api.MustKindOf(&api.Service{}), "", api.ListOptions{}, lg),
		endpoints: client.NewInformer(c, api.MustKindOf(&api.Endpoints{}), "", api.ListOptions{}, lg),
	}
}

// HostResolvers are the nameservers of a resolv.conf as host:53, without
// the cluster's own address.
func HostResolvers(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" {
			out = append(out, net.JoinHostPort(f[1], "53"))
		}
	}
	return out
}

// Service, Endpoints, Services and AllEndpoints make the server's caches
// its Source.
func (s *Server) Service(ns, name string) (*api.Service, bool) {
	o, ok := s.services.Get(ns, name)
	if !ok {
		return nil, false
	}
	return o.(*api.Service), true
}

func (s *Server) Endpoints(ns, name string) (*api.Endpoints, bool) {
	o, ok := s.endpoints.Get(ns, name)
	if !ok {
		return nil, false
	}
	return o.(*api.Endpoints), true
}

func (s *Server) Services() []*api.Service {
	var out []*api.Service
	for _, o := range s.services.List() {
		out = append(out, o.(*api.Service))
	}
	return out
}

func (s *Server) AllEndpoints() []*api.Endpoints {
	var out []*api.Endpoints
	for _, o := range s.endpoints.List() {
		out = append(out, o.(*api.Endpoints))
	}
	return out
}

// Run answers on cfg.Addr (UDP and TCP) until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	pc, err := s.cfg.ListenPacket("udp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("cluster DNS: listen on udp %s: %w", s.cfg.Addr, err)
	}
	l, err := s.cfg.Listen("tcp", s.cfg.Addr)
	if err != nil {
		pc.Close()
		return fmt.Errorf("cluster DNS: listen on tcp %s: %w", s.cfg.Addr, err)
	}
	var wg sync.WaitGroup
	for _, inf := range []*client.Informer{s.services, s.endpoints} {
		wg.Add(1)
		go func() { defer wg.Done(); inf.Run(ctx) }()
	}
	h := dns.HandlerFunc(s.ServeDNS)
	servers := []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: l, Handler: h}}
	errs := make(chan error, len(servers))
	for _, srv := range servers {
		go func() { errs <- srv.ActivateAndServe() }()
	}
	s.log.Info("cluster DNS answering", "addr", s.cfg.Addr, "upstreams", s.cfg.Upstreams)
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
	}
	for _, srv := range servers {
		_ = srv.Shutdown()
	}
	wg.Wait()
	return runErr
}

// ServeDNS answers one query: the cluster zone and the reverse names of
// cluster addresses from the caches, anything else from the upstreams.
func (s *Server) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := s.Answer(r)
	if m == nil {
		m = s.forward(r, w.LocalAddr().Network())
	}
	_ = w.WriteMsg(m)
}

// Answer is the reply to r if the cluster answers it, or nil.
func (s *Server) Answer(r *dns.Msg) *dns.Msg {
	if len(r.Question) != 1 {
		m := new(dns.Msg)
		return m.SetRcode(r, dns.RcodeFormatError)
	}
	q := r.Question[0]
	var ans answer
	switch {
	case inZone(strings.ToLower(q.Name)):
		ans = lookup(s, q)
	default:
		var ok bool
		if ans, ok = reverse(s, q); !ok {
			return nil
		}
	}
	m := new(dns.Msg)
	m.SetRcode(r, ans.rcode)
	m.Authoritative = true
	m.Answer, m.Extra = ans.answer, ans.extra
	if len(m.Answer) == 0 {
		m.Ns = []dns.RR{soa()}
	}
	return m
}

// forwardTimeout is how long forward waits for each upstream.
const forwardTimeout = 2 * time.Second

// forward asks the upstreams in turn; SERVFAIL when none answers.
func (s *Server) forward(r *dns.Msg, network string) *dns.Msg {
	c := &dns.Client{Net: network, Timeout: forwardTimeout}
	var errs []error
	for _, up := range s.cfg.Upstreams {
		if up == s.cfg.Addr {
			continue
		}
		m, _, err := c.Exchange(r, up)
		if err == nil {
			return m
		}
		errs = append(errs, err)
	}
	s.log.Debug("forward", "name", r.Question, "err", errors.Join(errs...))
	m := new(dns.Msg)
	return m.SetRcode(r, dns.RcodeServerFailure)
}
