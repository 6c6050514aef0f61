package election

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.uber.org/zap"

	"skiff.dev/skiff/api"
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
	start := func(name string, cli *clientv3.Client) (*Elector, context.CancelFunc, chan error) {
		e := New(cli, api.LeaderInfo{Name: name, APIServer: "http://" + name}, ttl, slog.New(slog.DiscardHandler))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx, l.lead(name)) }()
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
	testwait.For(t, 10*time.Second, "a to lead", func() bool { return a.Leading() && len(l.led()) == 1 })
	b, stopB, doneB := start("b", newClient())
	c, stopC, doneC := start("c", newClient())

	li, ok, err := Current(context.Background(), member.Client())
	if err != nil || !ok || li.Name != "a" {
		t.Fatalf("currentLeader = %+v, %v, %v; want a", li, ok, err)
	}

	// a dies without a word (its client goes away, no revoke): it stops
	// leading at once, and b or c leads once the lease has expired.
	ca.Close()
	stopA()
	testwait.For(t, 10*time.Second, "a to stop leading", func() bool { return !a.Leading() })
	t0 := time.Now()
	testwait.For(t, 3*ttl+5*time.Second, "b or c to lead", func() bool { return (b.Leading() || c.Leading()) && len(l.led()) == 2 })
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
	// Leading turns true just before the elector runs its work: wait for
	// the work to have started (the third term recorded), not only the flag.
	testwait.For(t, 10*time.Second, "the last one to lead", func() bool { return other.Leading() && len(l.led()) == 3 })
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

// startElector runs an elector named name on cli until the test ends.
func startElector(t *testing.T, l *leaders, name string, cli *clientv3.Client, ttl time.Duration) *Elector {
	t.Helper()
	e := New(cli, api.LeaderInfo{Name: name, APIServer: "http://" + name}, ttl, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.Run(ctx, l.lead(name))
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return e
}

func newEtcdClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// The leader whose renewals stop reaching etcd (its link to etcd hangs;
// etcd is fine) stops its work while its lease still holds everyone else
// off, and only then does another server lead.
func TestElectionStepsDownBeforeTheLeaseExpires(t *testing.T) {
	member := etcdtest.Start(t, "e1")
	to, err := url.Parse(member.Client().Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	// a reaches etcd through a proxy that the test can make hang.
	px := proxy.NewServer(proxy.ServerConfig{
		Logger: zap.NewNop(),
		From:   url.URL{Scheme: "tcp", Host: etcdtest.FreeAddr(t)},
		To:     url.URL{Scheme: "tcp", Host: to.Host},
	})
	<-px.Ready()
	t.Cleanup(func() { _ = px.Close() })
	const ttl = 3 * time.Second
	l := &leaders{}
	a := startElector(t, l, "a", newEtcdClient(t, "http://"+px.From()[len("tcp://"):]), ttl)
	testwait.For(t, 10*time.Second, "a to lead", func() bool { return a.Leading() && len(l.led()) == 1 })
	b := startElector(t, l, "b", newEtcdClient(t, to.String()), ttl)
	// Unhang before the electors stop (cleanups run last first), so that
	// a's revoke does not wait for nothing.
	t.Cleanup(func() { px.UnpauseTx(); px.UnpauseRx() })

	resp, err := member.Client().Get(t.Context(), Prefix, clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("read the election: %v, %d keys", err, len(resp.Kvs))
	}
	lease := clientv3.LeaseID(resp.Kvs[0].Lease)
	if !strings.Contains(string(resp.Kvs[0].Value), `"a"`) {
		t.Fatalf("leader key %s, want a's", resp.Kvs[0].Value)
	}

	px.PauseTx()
	px.PauseRx()
	hung := time.Now()
	testwait.For(t, 2*ttl, "a to step down", func() bool { return !a.Leading() })
	stepped := time.Since(hung)
	ttlResp, err := member.Client().TimeToLive(t.Context(), lease)
	if err != nil {
		t.Fatal(err)
	}
	if ttlResp.TTL < 0 { // -1: expired; 0: under a second left
		t.Errorf("a stepped down %v after its link hung, when its lease had expired already", stepped.Round(time.Millisecond))
	}
	if b.Leading() {
		t.Error("b leads while a's lease still holds")
	}
	if stepped >= ttl {
		t.Errorf("a stepped down %v after its link hung, want within the lease TTL %v", stepped, ttl)
	}
	testwait.For(t, 3*ttl, "b to lead once a's lease expired", b.Leading)
	t.Logf("a stopped %v after its link hung with under %ds of its lease left; b led %v after the hang",
		stepped.Round(time.Millisecond), ttlResp.TTL+1, time.Since(hung).Round(time.Millisecond))
	if m := l.max.Load(); m != 1 {
		t.Errorf("%d electors led at once, want 1", m)
	}
	if got := strings.Join(l.led(), ","); got != "a,b" {
		t.Errorf("terms led: %s, want a,b", got)
	}
}
