package dns

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/internal/testwait"
)

// The server over the fake API: answers on UDP and TCP from its watch, a
// new Service answered as soon as the watch brings it, other names
// forwarded to an upstream (here another miekg server), SERVFAIL when no
// upstream answers.
func TestServerUDPAndTCP(t *testing.T) {
	up, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := &dns.Server{PacketConn: up, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)}}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = upstream.ActivateAndServe() }()
	t.Cleanup(func() { _ = upstream.Shutdown() })

	c := fake.New()
	src := testSource()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, s := range src.svcs {
		if _, err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// A free port for both protocols.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := New(c, Config{Addr: addr, Upstreams: []string{up.LocalAddr().String()}})
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	// The client waits longer than the server waits for an upstream, so
	// that a SERVFAIL after an upstream's silence reaches it.
	query := func(network, name string) (*dns.Msg, error) {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		r, _, err := (&dns.Client{Net: network, Timeout: forwardTimeout + 3*time.Second}).Exchange(m, addr)
		return r, err
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		r, err := query("udp", "web.default.svc.cluster.local.")
		if err != nil {
			return false, err.Error()
		}
		return len(r.Answer) == 1 && r.Authoritative, r.String()
	})
	r, err := query("tcp", "web.default.svc.cluster.local.")
	if err != nil || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.96.3.4" {
		t.Fatalf("over TCP: %v %v", r, err)
	}
	if r, err := query("udp", "gone.default.svc.cluster.local."); err != nil || r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 {
		t.Fatalf("a missing name: %v %v", r, err)
	}
	if r, err := query("udp", "example.com."); err != nil || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
		t.Fatalf("forwarded: %v %v", r, err)
	}
	// A new Service is answered once the watch has it.
	if _, err := c.Create(ctx, svc("other", "late", "10.96.9.9", api.ServicePort{Port: 80})); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 5*time.Second, func() (bool, string) {
		r, err := query("udp", "late.other.svc.cluster.local.")
		if err != nil {
			return false, err.Error()
		}
		return len(r.Answer) == 1, r.String()
	})
	_ = upstream.Shutdown()
	if r, err := query("udp", "example.org."); err != nil || r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("no upstream: %v %v", r, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
