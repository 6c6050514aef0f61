package membership

import (
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"skiff.dev/skiff/internal/testwait"
)

func start(t testing.TB, name, token, role string, join ...string) *Membership {
	t.Helper()
	cfg := DefaultConfig(name, token)
	cfg.BindAddr, cfg.BindPort, cfg.Fast = "127.0.0.1", 0, true
	cfg.Meta = Meta{Role: role, Node: name}
	if role == RoleServer {
		cfg.Meta.APIServer = "https://127.0.0.1:7443"
	}
	cfg.Join = join
	m, err := Start(cfg)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(m.Stop)
	return m
}

func stateOf(m *Membership, name string) State {
	for _, mem := range m.Members() {
		if mem.Name == name {
			return mem.State
		}
	}
	return ""
}

func TestJoinAnyMemberAndDiscoverAPIServer(t *testing.T) {
	srv := start(t, "server", "tok", RoleServer)
	a1 := start(t, "a1", "tok", RoleAgent, srv.LocalAddr())
	// a2 joins through a1, not the server: it still learns the API address.
	a2 := start(t, "a2", "tok", RoleAgent, a1.LocalAddr())
	testwait.For(t, 5*time.Second, "three members everywhere", func() bool {
		return len(srv.Members()) == 3 && len(a1.Members()) == 3 && len(a2.Members()) == 3
	})
	api, ok := a2.APIServer()
	if !ok || api != "https://127.0.0.1:7443" {
		t.Fatalf("a2 APIServer() = %q, %v; want the server's advertised URL", api, ok)
	}
	if _, ok := a1.APIServer(); !ok {
		t.Fatal("a1 did not learn the API server")
	}
}

func TestWrongTokenCannotJoin(t *testing.T) {
	srv := start(t, "server", "right", RoleServer)
	cfg := DefaultConfig("intruder", "wrong")
	cfg.BindAddr, cfg.BindPort, cfg.Fast = "127.0.0.1", 0, true
	cfg.Meta = Meta{Role: RoleAgent}
	cfg.Join = []string{srv.LocalAddr()}
	m, err := Start(cfg)
	if err == nil {
		m.Stop()
		t.Fatal("join with a wrong token succeeded")
	}
	if !errors.Is(err, ErrWrongToken) {
		t.Fatalf("error = %v; want ErrWrongToken", err)
	}
	testwait.For(t, 5*time.Second, "server to report the rejected member", func() bool { return srv.RejectedJoins() > 0 })
	if n := len(srv.Members()); n != 1 {
		t.Fatalf("server sees %d members after a rejected join; want 1", n)
	}
}

func TestKilledMemberTurnsDead_LeftMemberTurnsLeft(t *testing.T) {
	srv := start(t, "server", "tok", RoleServer)
	a1 := start(t, "a1", "tok", RoleAgent, srv.LocalAddr())
	a2 := start(t, "a2", "tok", RoleAgent, srv.LocalAddr())
	testwait.For(t, 5*time.Second, "three members", func() bool { return len(srv.Members()) == 3 })
	a1.Kill()
	testwait.For(t, 10*time.Second, "a1 dead", func() bool { return stateOf(srv, "a1") == Dead })
	a2.Stop()
	// Left when the Leaving flag arrived before the leave message (the
	// usual case); gossip over UDP does not promise that order, so a
	// loaded machine may see Dead. Either way a2 is gone at once, without
	// a suspicion timeout; TestLeaveVersusFailure checks the flag's logic.
	testwait.For(t, 10*time.Second, "a2 gone", func() bool { st := stateOf(srv, "a2"); return st == Left || st == Dead })
	select {
	case <-srv.Changed():
	default:
		t.Fatal("Changed() not signalled after membership changes")
	}
}

func TestValidateReportsAll(t *testing.T) {
	err := Config{BindPort: 70000}.Validate()
	for _, want := range []string{"name is required", "token is required", "out of range", "role"} {
		if err == nil || !contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to mention %q", err, want)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// The delegate tells a graceful leave from a failure by the Leaving flag a
// member gossips before it leaves.
func TestLeaveVersusFailure(t *testing.T) {
	d := &delegate{members: map[string]*Member{}, changed: make(chan struct{}, 1)}
	node := func(name string, meta Meta) *memberlist.Node {
		b, _ := json.Marshal(meta)
		return &memberlist.Node{Name: name, Addr: net.IPv4(127, 0, 0, 1), Port: 7946, Meta: b}
	}
	d.NotifyJoin(node("leaver", Meta{Role: RoleAgent}))
	d.NotifyJoin(node("crasher", Meta{Role: RoleAgent}))
	d.NotifyUpdate(node("leaver", Meta{Role: RoleAgent, Leaving: true}))
	d.NotifyLeave(node("leaver", Meta{Role: RoleAgent, Leaving: true}))
	d.NotifyLeave(node("crasher", Meta{Role: RoleAgent}))
	if st := d.members["leaver"].State; st != Left {
		t.Errorf("graceful leave: state %s, want left", st)
	}
	if st := d.members["crasher"].State; st != Dead {
		t.Errorf("failure: state %s, want dead", st)
	}
	// A member that comes back after leaving is alive, not leaving.
	d.NotifyJoin(node("leaver", Meta{Role: RoleAgent}))
	if m := d.members["leaver"]; m.State != Alive || m.Meta.Leaving {
		t.Errorf("rejoined member: %+v, want alive and not leaving", m)
	}
}

// A second member with a name the cluster already has is refused by
// memberlist; Start says so, with the holder's address, instead of
// running as a member nobody sees.
func TestNameTakenCannotJoin(t *testing.T) {
	tests := []struct {
		name   string
		holder string // the role of the member that has the name
	}{
		{"name of the server member", RoleServer},
		{"name of another agent", RoleAgent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := start(t, "server", "tok", RoleServer)
			holder := srv
			if tt.holder == RoleAgent {
				holder = start(t, "node-a", "tok", RoleAgent, srv.LocalAddr())
				// The cluster has the name once the server knows it: its
				// side of node-a's join may merge node-a's state just after
				// node-a's Join returns.
				testwait.For(t, 10*time.Second, "the server to see node-a alive", func() bool { return stateOf(srv, "node-a") == Alive })
			}
			taken := holder.ml.LocalNode().Name
			cfg := DefaultConfig(taken, "tok")
			cfg.BindAddr, cfg.BindPort, cfg.Fast = "127.0.0.1", 0, true
			cfg.Meta = Meta{Role: RoleAgent, Node: taken}
			cfg.Join = []string{srv.LocalAddr()}
			m, err := Start(cfg)
			if err == nil {
				m.Stop()
				t.Fatalf("a second member named %q joined", taken)
			}
			if !errors.Is(err, ErrNameTaken) {
				t.Fatalf("error = %v; want ErrNameTaken", err)
			}
			var nt *NameTakenError
			if !errors.As(err, &nt) || nt.Name != taken || nt.Addr != holder.LocalAddr() {
				t.Fatalf("error = %#v; want the name %q held by %s", nt, taken, holder.LocalAddr())
			}
		})
	}
}

// Every alive server's advertised URL is listed once, in member-name
// order; agents, dead servers and servers without a URL are not.
func TestAPIServersListsAliveServers(t *testing.T) {
	srv := start(t, "s0", "tok", RoleServer)
	node := func(name string, meta Meta) *memberlist.Node {
		b, _ := json.Marshal(meta)
		return &memberlist.Node{Name: name, Addr: net.IPv4(127, 0, 0, 1), Port: 7946, Meta: b}
	}
	d := srv.d
	d.NotifyJoin(node("s2", Meta{Role: RoleServer, APIServer: "http://10.0.0.2:7443"}))
	d.NotifyJoin(node("s1", Meta{Role: RoleServer, APIServer: "http://10.0.0.1:7443"}))
	d.NotifyJoin(node("s3", Meta{Role: RoleServer, APIServer: "http://10.0.0.3:7443"}))
	d.NotifyJoin(node("s4", Meta{Role: RoleServer, APIServer: "http://10.0.0.1:7443"})) // same URL as s1
	d.NotifyJoin(node("s5", Meta{Role: RoleServer}))
	d.NotifyJoin(node("agent", Meta{Role: RoleAgent, APIServer: "http://10.0.0.9:7443"}))
	d.NotifyLeave(node("s3", Meta{Role: RoleServer, APIServer: "http://10.0.0.3:7443"}))
	got := strings.Join(srv.APIServers(), ",")
	want := "https://127.0.0.1:7443,http://10.0.0.1:7443,http://10.0.0.2:7443"
	if got != want {
		t.Errorf("APIServers() = %s, want %s", got, want)
	}
}
