package etcd_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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

// A second member joins the first's cluster, sees its data, then leaves.
func TestJoinAndRemove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := etcdtest.Start(t, "a")
	select {
	case <-a.ReadyNotify():
	default:
		t.Fatal("ReadyNotify not closed after StartEmbedded")
	}
	if _, err := a.Client().Put(ctx, "/k", "v"); err != nil {
		t.Fatal(err)
	}

	// (Before b is added: from then until b runs, a has no quorum.)
	if _, err := etcd.AddMember(ctx, a.Client(), "a", "http://"+etcdtest.FreeAddr(t)); err == nil {
		t.Fatal("AddMember accepted a name taken")
	}

	bc := etcdtest.Config(t, "b")
	initial, err := etcd.AddMember(ctx, a.Client(), "b", bc.PeerURL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(initial, "a=") || !strings.Contains(initial, "b="+bc.PeerURL) {
		t.Fatalf("initial cluster %q, want both members", initial)
	}
	bc.InitialCluster, bc.ClusterState = initial, etcd.ClusterStateExisting
	b := etcdtest.StartWith(t, bc)
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
	if err := etcd.RemoveMember(ctx, a.Client(), "b"); err == nil {
		t.Fatal("RemoveMember of a member gone: no error")
	}
}
