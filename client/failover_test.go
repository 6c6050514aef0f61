package client_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// deadAddr is a loopback address nothing listens on.
func deadAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// echoServer answers every request with the object it was sent (or a
// Pod "web" for a GET) and counts requests.
func echoServer(t testing.TB, code int) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		b, _ := io.ReadAll(r.Body)
		if code != http.StatusOK {
			writeStatus(w, api.NewStatusError(code, api.ReasonInternal, "broken"))
			return
		}
		if len(b) == 0 {
			b = []byte(`{"metadata":{"name":"web","namespace":"default"}}`)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestFailover(t *testing.T) {
	podKind := kind(t, &api.Pod{})
	t.Run("unreachable server passes a create with its body to the next", func(t *testing.T) {
		live, n := echoServer(t, http.StatusOK)
		dead := deadAddr(t)
		c, err := client.New(client.Config{Server: dead, Servers: []string{live.URL}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := client.Create(t.Context(), c, &api.Pod{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default"}})
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != "web" {
			t.Errorf("created %q, want web (the body reached the second server)", got.Name)
		}
		if c.Server() != live.URL {
			t.Errorf("Server() = %s, want %s: the server that answered stays current", c.Server(), live.URL)
		}
		if _, err := c.Get(t.Context(), podKind, "default", "web"); err != nil {
			t.Fatal(err)
		}
		if n.Load() != 2 {
			t.Errorf("live server saw %d requests, want 2", n.Load())
		}
	})
	t.Run("an error answer is the answer: no failover", func(t *testing.T) {
		broken, nb := echoServer(t, http.StatusInternalServerError)
		live, nl := echoServer(t, http.StatusOK)
		c, err := client.New(client.Config{Server: broken.URL, Servers: []string{live.URL}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Get(t.Context(), podKind, "default", "web")
		if api.ReasonOf(err) != api.ReasonInternal {
			t.Errorf("err = %v, want the first server's 500", err)
		}
		if nb.Load() != 1 || nl.Load() != 0 {
			t.Errorf("requests: broken %d, live %d; want 1, 0", nb.Load(), nl.Load())
		}
	})
	t.Run("all unreachable names every server", func(t *testing.T) {
		a, b := deadAddr(t), deadAddr(t)
		c, err := client.New(client.Config{Server: a, Servers: []string{b}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Get(t.Context(), podKind, "default", "web")
		var ue *client.UnreachableError
		if !errors.As(err, &ue) {
			t.Fatalf("err = %v, want *UnreachableError", err)
		}
		want := "cannot reach any skiff API server (" + a + ", " + b + "): is `skiff server` running?"
		if err.Error() != want {
			t.Errorf("err = %q, want %q", err, want)
		}
	})
}

func TestSetServers(t *testing.T) {
	live, _ := echoServer(t, http.StatusOK)
	dead := deadAddr(t)
	c, err := client.New(client.Config{Server: dead, Servers: []string{live.URL}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(t.Context(), kind(t, &api.Pod{}), "default", "web"); err != nil {
		t.Fatal(err)
	}
	other := deadAddr(t)
	tests := []struct {
		name    string
		servers []string
		want    []string // Servers() after, current first
		wantErr bool
	}{
		{"current stays current", []string{other, live.URL}, []string{live.URL, other}, false},
		{"empty list changes nothing", nil, []string{live.URL, other}, true},
		{"bad URL changes nothing", []string{"ftp://x"}, []string{live.URL, other}, true},
		{"current gone: first listed", []string{other}, []string{other}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := c.SetServers(tc.servers)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if got := c.Servers(); !slices.Equal(got, tc.want) {
				t.Errorf("Servers() = %v, want %v", got, tc.want)
			}
		})
	}
}
