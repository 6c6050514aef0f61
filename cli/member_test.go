package cli

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/controlplane/etcd"
	"skiff.dev/skiff/controlplane/etcd/etcdtest"
)

// startEtcdServer starts a control plane on embedded etcd named name: the
// first of a cluster (join "") or one joining the server at join, its CA
// pinned by caHash. It returns the server, a kubeconfig for it and an
// etcd client of its member.
func startEtcdServer(t *testing.T, name, join, token, caHash string) (*controlplane.ControlPlane, string, *clientv3.Client) {
	t.Helper()
	cfg := controlplane.DefaultConfig(t.TempDir())
	cfg.API.Listen = "127.0.0.1:0"
	cfg.API.Token = token
	cfg.Scheduler = false
	ec := controlplane.DefaultEtcdConfig()
	ec.Name, ec.ClusterInit, ec.JoinServer, ec.CACertHash = name, join == "", join, caHash
	ec.PeerListen, ec.ClientListen = "https://"+etcdtest.FreeAddr(t), "https://"+etcdtest.FreeAddr(t)
	cfg.Etcd = ec
	cp, err := controlplane.Start(context.Background(), cfg) // its ctx is its life: Stop ends it
	if err != nil {
		t.Fatalf("start server %s: %v", name, err)
	}
	t.Cleanup(func() { cp.Stop() })
	conf := filepath.Join(t.TempDir(), "config")
	if err := client.WriteKubeconfig(conf, cp.ClientConfig()); err != nil {
		t.Fatal(err)
	}
	tlsc, err := etcd.ServerTLS(cfg.DataDir, cp.CA(), ec.PeerListen, ec.ClientListen) // the server's own etcd certificate
	if err != nil {
		t.Fatal(err)
	}
	tc, err := (transport.TLSInfo{CertFile: tlsc.CertFile, KeyFile: tlsc.KeyFile, TrustedCAFile: tlsc.CAFile}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ec.ClientListen}, DialTimeout: 5 * time.Second, TLS: tc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cp, conf, cli
}

// members is the names of the voting members and of the learners.
func members(t *testing.T, cli *clientv3.Client) (voters, learners []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Members {
		if m.IsLearner {
			learners = append(learners, m.Name)
		} else {
			voters = append(voters, m.Name)
		}
	}
	slices.Sort(voters)
	return voters, learners
}

// TestServerRemoveMember: three servers on embedded etcd (the second and
// third join as learners and are promoted), one is lost, and `skiff server
// remove-member` takes its member out through a live server; what cannot
// be removed is refused and changes nothing.
func TestServerRemoveMember(t *testing.T) {
	a, confA, cliA := startEtcdServer(t, "a", "", "", "")
	token := a.Token()
	startEtcdServer(t, "b", a.URL(), token, a.CA().Hash())
	c, _, _ := startEtcdServer(t, "c", a.URL(), token, a.CA().Hash())
	if voters, learners := members(t, cliA); !slices.Equal(voters, []string{"a", "b", "c"}) || len(learners) != 0 {
		t.Fatalf("after the joins: voters %v, learners %v; want a b c voting", voters, learners)
	}

	refused := []struct {
		name, member, want string
	}{
		{"the answering server's own member", "a", "the member of the server that answered"},
		{"no such member", "x", "no member of that name"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI(t, "server", "remove-member", tt.member, "--kubeconfig", confA, "--timeout", "20s")
			if res.code == 0 || !strings.Contains(res.err, tt.want) {
				t.Fatalf("code %d, out %q, err %q; want a refusal saying %q", res.code, res.out, res.err, tt.want)
			}
			if voters, _ := members(t, cliA); !slices.Equal(voters, []string{"a", "b", "c"}) {
				t.Fatalf("a refused removal changed the members: %v", voters)
			}
		})
	}

	c.Stop() // c's machine is lost
	res := runCLI(t, "server", "remove-member", "c", "--kubeconfig", confA, "--timeout", "25s")
	if res.code != 0 || !strings.Contains(res.out, "etcd member c removed") {
		t.Fatalf("remove c: code %d, out %q, err %q", res.code, res.out, res.err)
	}
	if voters, learners := members(t, cliA); !slices.Equal(voters, []string{"a", "b"}) || len(learners) != 0 {
		t.Fatalf("after removing c: voters %v, learners %v; want a b", voters, learners)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cliA.Put(ctx, "/after-remove", "v"); err != nil {
		t.Fatalf("write after the removal: %v", err)
	}
}
