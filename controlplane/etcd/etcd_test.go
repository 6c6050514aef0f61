package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"skiff.dev/skiff/controlplane/etcd"
	"skiff.dev/skiff/controlplane/etcd/etcdtest"
	"skiff.dev/skiff/internal/testwait"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  etcd.Config
		want []string // substrings of the error; none: valid
	}{
		{"valid", etcd.Config{Name: "a", DataDir: "/d", ClientURL: "http://127.0.0.1:2379", PeerURL: "http://127.0.0.1:2380"}, nil},
		{"empty", etcd.Config{}, []string{"name", "data dir", "client url", "peer url"}},
		{"bad state and urls", etcd.Config{Name: "a", DataDir: "/d", ClientURL: "127.0.0.1:2379", PeerURL: "tcp://x:1", ClusterState: "join"},
			[]string{"client url", "peer url", `cluster state "join"`}},
		{"existing without cluster", etcd.Config{Name: "a", DataDir: "/d", ClientURL: "http://127.0.0.1:2379", PeerURL: "http://127.0.0.1:2380", ClusterState: "existing"},
			[]string{"initial cluster"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if _, serr := etcd.StartEmbedded(context.Background(), tt.cfg); serr == nil {
				t.Fatal("StartEmbedded accepted an invalid config")
			}
		})
	}
}

func memberNames(t *testing.T, s *etcd.Server) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := s.Client().MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list.Members {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

// join adds a member named name to the cluster through cli as a learner
// (asking again while etcd says it cannot take one yet), starts it and
// promotes it.
func join(t *testing.T, ctx context.Context, cli *clientv3.Client, name string) *etcd.Server {
	t.Helper()
	c := etcdtest.Config(t, name)
	var initial string
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		var err error
		initial, err = etcd.AddMember(ctx, cli, name, c.PeerURL)
		if err != nil && !errors.Is(err, rpctypes.ErrTooManyLearners) && !errors.Is(err, rpctypes.ErrUnhealthy) {
			t.Fatalf("add member %s: %v", name, err)
		}
		return err == nil, fmt.Sprintf("add member %s: %v", name, err)
	})
	c.InitialCluster, c.ClusterState = initial, etcd.ClusterStateExisting
	s := etcdtest.StartWith(t, c)
	if !s.IsLearner() {
		t.Fatalf("%s votes before it was promoted", name)
	}
	if err := etcd.PromoteMember(ctx, cli, name); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitPromoted(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// A second member joins the first's cluster as a learner (the first keeps
// its quorum meanwhile), is promoted, sees its data, then leaves.
func TestJoinAndRemove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := etcdtest.Start(t, "a")
	select {
	case <-a.ReadyNotify():
	default:
		t.Fatal("ReadyNotify not closed after StartEmbedded")
	}
	if a.IsLearner() {
		t.Fatal("the first member is a learner")
	}
	if _, err := a.Client().Put(ctx, "/k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.AddMember(ctx, a.Client(), "a", "http://"+etcdtest.FreeAddr(t)); err == nil {
		t.Fatal("AddMember accepted a name taken")
	}
	if err := etcd.PromoteMember(ctx, a.Client(), "x"); !errors.Is(err, etcd.ErrNoMember) {
		t.Fatalf("promote a member that does not exist: %v, want ErrNoMember", err)
	}

	bc := etcdtest.Config(t, "b")
	initial, err := etcd.AddMember(ctx, a.Client(), "b", bc.PeerURL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(initial, "a=") || !strings.Contains(initial, "b="+bc.PeerURL) {
		t.Fatalf("initial cluster %q, want both members", initial)
	}
	// b is added and not running: a learner does not count in the quorum,
	// so a still writes.
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = a.Client().Put(wctx, "/k2", "v2")
	wcancel()
	if err != nil {
		t.Fatalf("write with a member added and not started: %v", err)
	}
	// Asked again (b's server died before starting it): the same answer,
	// no second member.
	again, err := etcd.AddMember(ctx, a.Client(), "b", bc.PeerURL)
	if err != nil || again != initial {
		t.Fatalf("AddMember again: %q, %v; want %q", again, err, initial)
	}
	bc.InitialCluster, bc.ClusterState = initial, etcd.ClusterStateExisting
	b := etcdtest.StartWith(t, bc)
	if !b.IsLearner() {
		t.Fatal("b votes before it was promoted")
	}
	if err := etcd.PromoteMember(ctx, a.Client(), "b"); err != nil {
		t.Fatal(err)
	}
	if err := etcd.PromoteMember(ctx, a.Client(), "b"); err != nil {
		t.Fatalf("promote a voting member: %v, want no error", err)
	}
	if err := b.WaitPromoted(ctx); err != nil {
		t.Fatal(err)
	}
	if got := memberNames(t, b); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("members = %v", got)
	}
	got, err := b.Client().Get(ctx, "/k")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v" {
		t.Fatalf("get through the new member: %v, %v", got, err)
	}

	// etcd refuses a reconfiguration until every member has been connected
	// for a few seconds (strict reconfig check): "unhealthy cluster".
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		err := etcd.RemoveMember(ctx, a.Client(), "b")
		return err == nil, fmt.Sprintf("remove member b: %v", err)
	})
	b.Stop()
	b.Stop() // safe twice
	if got := memberNames(t, a); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("members after remove = %v", got)
	}
	if err := etcd.RemoveMember(ctx, a.Client(), "b"); !errors.Is(err, etcd.ErrNoMember) {
		t.Fatalf("RemoveMember of a member gone: %v, want ErrNoMember", err)
	}
}

// Two members join one after the other, as fast as etcd takes them, while
// a client writes and reads through the first: every request succeeds
// (the cluster never loses its majority), and the three vote.
func TestJoinKeepsQuorum(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := etcdtest.Start(t, "a")
	var ok atomic.Int64
	errs := make(chan error, 1)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			key := fmt.Sprintf("/load/%d", i)
			_, err := a.Client().Put(rctx, key, "v")
			if err == nil {
				_, err = a.Client().Get(rctx, key)
			}
			rcancel()
			if err != nil {
				errs <- fmt.Errorf("request %d: %w", i, err)
				return
			}
			ok.Add(1)
		}
	}()
	before := ok.Load()
	b := join(t, ctx, a.Client(), "b")
	c := join(t, ctx, a.Client(), "c")
	close(stop)
	<-done
	select {
	case err := <-errs:
		t.Fatalf("a write or read failed while members joined: %v", err)
	default:
	}
	if ok.Load() == before {
		t.Fatal("no request went through while the members joined")
	}
	t.Logf("%d writes and reads while b and c joined", ok.Load()-before)
	list, err := c.Client().MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var voters []string
	for _, m := range list.Members {
		if !m.IsLearner {
			voters = append(voters, m.Name)
		}
	}
	slices.Sort(voters)
	if !slices.Equal(voters, []string{"a", "b", "c"}) {
		t.Fatalf("voting members %v, want a b c", voters)
	}
	if b.IsLearner() || c.IsLearner() {
		t.Fatal("a joined member is still a learner")
	}
	// Three voters: a majority survives b's loss.
	b.Stop()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if _, err := c.Client().Put(wctx, "/after", "v"); err != nil {
		t.Fatalf("write with b down: %v", err)
	}
}
