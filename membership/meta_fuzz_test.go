package membership

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"testing"

	"github.com/hashicorp/memberlist"
)

// FuzzNodeMeta delivers any gossip metadata for a peer that joins,
// updates and leaves: a peer counts as an API server (APIServer,
// APIServers) only while it is alive and its metadata is a Meta of role
// server with an address; it is Left after a leave exactly when its last
// metadata said it was leaving, else Dead.
func FuzzNodeMeta(f *testing.F) {
	enc := func(m Meta) []byte { b, _ := json.Marshal(m); return b }
	server := enc(Meta{Role: RoleServer, APIServer: "https://10.0.0.1:7443"})
	f.Add(server, enc(Meta{Role: RoleServer, APIServer: "https://10.0.0.1:7443", Leaving: true}), true)
	f.Add(enc(Meta{Role: RoleAgent, Node: "gpu-1"}), server, false)
	f.Add([]byte(`{"r":"server","a":"https://x:7443","l":5}`), []byte(`{"r":"server","a":"https://x:7443"`), true)
	f.Add([]byte(`{"r":"server","a":""}`), []byte(`null`), true)
	f.Add([]byte(`{"r":"server","a":"https://y","r":"agent"}`), []byte(`[]`), false)
	f.Add([]byte{}, []byte("\xff"), true)
	m := start(f, "me", "token", RoleAgent)
	peer := 0
	f.Fuzz(func(t *testing.T, meta1, meta2 []byte, leave bool) {
		if len(meta1) > 512 || len(meta2) > 512 {
			t.Skip("input too large") // memberlist's metadata limit
		}
		peer++
		name := fmt.Sprintf("peer-%d", peer)
		t.Cleanup(func() {
			m.d.mu.Lock()
			delete(m.d.members, name)
			m.d.mu.Unlock()
		})
		node := &memberlist.Node{Name: name, Addr: net.IPv4(10, 0, 0, 2), Port: 7946}
		check := func(step string, meta []byte, alive bool) {
			t.Helper()
			var want Meta
			parsed := json.Unmarshal(meta, &want) == nil
			isServer := alive && parsed && want.Role == RoleServer && want.APIServer != ""
			var got *Member
			for _, mem := range m.Members() {
				if mem.Name == name {
					got = &mem
				}
			}
			if got == nil {
				t.Fatalf("%s: %s is not a member", step, name)
			}
			if parsed && got.Meta.Role != want.Role || parsed && got.Meta.APIServer != want.APIServer {
				t.Fatalf("%s: metadata %q read as %+v", step, meta, got.Meta)
			}
			servers := m.APIServers()
			counted := got.State == Alive && got.Meta.Role == RoleServer && got.Meta.APIServer != "" && slices.Contains(servers, got.Meta.APIServer)
			if counted != isServer {
				t.Fatalf("%s: metadata %q (parses: %v), state %s: counted as an API server %v, want %v", step, meta, parsed, got.State, counted, isServer)
			}
		}
		node.Meta = meta1
		m.d.NotifyJoin(node)
		check("join", meta1, true)
		node.Meta = meta2
		m.d.NotifyUpdate(node)
		check("update", meta2, true)
		if !leave {
			return
		}
		m.d.NotifyLeave(node)
		var last Meta
		leaving := json.Unmarshal(meta2, &last) == nil && last.Leaving
		want := Dead
		if leaving {
			want = Left
		}
		for _, mem := range m.Members() {
			if mem.Name == name && mem.State != want {
				t.Fatalf("leave with metadata %q: %s, want %s", meta2, mem.State, want)
			}
		}
		check("leave", meta2, false)
	})
}
