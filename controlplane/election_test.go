package controlplane

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"skiff.dev/skiff/controlplane/etcd/etcdtest"
	"skiff.dev/skiff/internal/testwait"
)

// leaders counts electors inside lead at once; more than one is a
// violation of the election's one promise.
type leaders struct {
	active, max atomic.Int32
	mu          sync.Mutex
	order       []string
}

func (l *leaders) lead(name string) func(context.Context) error {
	return func(ctx context.Context) error {
		n := l.active.Add(1)
		for {
			m := l.max.Load()
			if n <= m || l.max.CompareAndSwap(m, n) {
				break
			}
		}
		l.mu.Lock()
		l.order = append(l.order, name)
		l.mu.Unlock()
		<-ctx.Done()
		l.active.Add(-1)
		return nil
	}
}

func (l *leaders) led() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.order...)
}

func TestElectionOneLeaderAndHandover(t *testing.T) {
	member := etcdtest.Start(t, "e0")
	endpoint := member.Client().Endpoints()
	newClient := func() *clientv3.Client {
		cli, err := clientv3.New(clientv3.Config{Endpoints: endpoint, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	const ttl = 2 * time.Second
	l := &leaders{}
	start := func(name string, cli *clientv3.Client) (*elector, context.CancelFunc, chan error) {
		e := &elector{cli: cli, self: LeaderInfo{Name: name, APIServer: "http://" + name}, ttl: ttl, log: slog.New(slog.DiscardHandler)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.run(ctx, l.lead(name)) }()
		var once sync.Once
		stop := func() { once.Do(cancel) }
		t.Cleanup(func() {
			stop()
			select {
			case <-done:
			default:
			}
		})
		return e, stop, done
	}
	ca := newClient()
	a, stopA, _ := start("a", ca)
	testwait.For(t, 10*time.Second, "a to lead", a.Leading)
	b, stopB, doneB := start("b", newClient())
	c, stopC, doneC := start("c", newClient())

	li, ok, err := currentLeader(context.Background(), member.Client())
	if err != nil || !ok || li.Name != "a" {
		t.Fatalf("currentLeader = %+v, %v, %v; want a", li, ok, err)
	}

	// a dies without a word (its client goes away, no revoke): it stops
	// leading at once, and b or c leads once the lease has expired.
	ca.Close()
	stopA()
	testwait.For(t, 10*time.Second, "a to stop leading", func() bool { return !a.Leading() })
	t0 := time.Now()
	testwait.For(t, 3*ttl+5*time.Second, "b or c to lead", func() bool { return b.Leading() || c.Leading() })
	t.Logf("a new leader %v after a's client went away", time.Since(t0).Round(time.Millisecond))
	next, stopNext, doneNext, other := b, stopB, doneB, c
	if c.Leading() {
		next, stopNext, doneNext, other = c, stopC, doneC, b
	}

	// The leader stops cleanly: it revokes its lease, the other leads
	// well before a TTL.
	t1 := time.Now()
	stopNext()
	if err := <-doneNext; err != nil {
		t.Fatalf("%s's run: %v", next.self.Name, err)
	}
	testwait.For(t, 10*time.Second, "the last one to lead", other.Leading)
	if took := time.Since(t1); took > ttl {
		t.Errorf("handover after a clean stop took %v, want less than the lease TTL %v", took, ttl)
	}
	if m := l.max.Load(); m != 1 {
		t.Errorf("%d electors led at once, want 1", m)
	}
	if got, want := strings.Join(l.led(), ","), "a,"+next.self.Name+","+other.self.Name; got != want {
		t.Errorf("terms led: %s, want %s", got, want)
	}
}

func TestEtcdConfigValidate(t *testing.T) {
	with := func(f func(*EtcdConfig)) *EtcdConfig {
		c := DefaultEtcdConfig()
		f(c)
		return c
	}
	tests := []struct {
		name  string
		cfg   *EtcdConfig
		token string
		want  []string // every one must appear; none: valid
	}{
		{"cluster-init", with(func(c *EtcdConfig) { c.ClusterInit = true }), "", nil},
		{"join", with(func(c *EtcdConfig) { c.JoinServer = "http://10.0.0.1:7443" }), "tok", nil},
		{"external", with(func(c *EtcdConfig) { c.Endpoints = []string{"http://10.0.0.5:2379"} }), "", nil},
		{"nothing chosen", with(func(*EtcdConfig) {}), "", []string{"one of --cluster-init, --join-server or --etcd-endpoints is required"}},
		{"init and join", with(func(c *EtcdConfig) { c.ClusterInit, c.JoinServer = true, "http://10.0.0.1:7443" }), "tok", []string{"exclude each other"}},
		{"join and external, no token, bad URLs, short TTL", with(func(c *EtcdConfig) {
			c.JoinServer, c.Endpoints, c.LeaderLeaseTTL = "10.0.0.1", []string{"etcd:2379"}, time.Second
		}), "", []string{"exclude each other", "--join-server: ", "--join-server needs --token", "--etcd-endpoints[0]", "--leader-lease-ttl 1s"}},
		{"bad member URLs", with(func(c *EtcdConfig) {
			c.ClusterInit, c.PeerListen, c.ClientListen = true, "127.0.0.1:2380", "http://127.0.0.1"
		}), "",
			[]string{"--etcd-peer-listen", "--etcd-client-listen", "no port"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig(t.TempDir())
			cfg.Etcd, cfg.API.Token = tc.cfg, tc.token
			err := cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors mentioning %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v\nwant it to mention %q", err, w)
				}
			}
		})
	}
}
