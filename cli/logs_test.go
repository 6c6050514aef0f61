package cli

import (
	"context"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"

	"skiff.dev/skiff/client/fake"
)

// streamingFake is the fake client with the log stream of an HTTP client:
// it records the query of every log request.
type streamingFake struct {
	*fake.Client
	mu      sync.Mutex
	queries []url.Values
}

func (s *streamingFake) Stream(_ context.Context, path string) (io.ReadCloser, error) {
	u, err := url.Parse(path)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.queries = append(s.queries, u.Query())
	s.mu.Unlock()
	return io.NopCloser(strings.NewReader("a line\n")), nil
}

func TestLogsTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // tailLines sent; "" for none (all lines)
	}{
		{"one pod: all lines", []string{"logs", "web-1"}, ""},
		{"one pod, --tail 5", []string{"logs", "web-1", "--tail", "5"}, "5"},
		{"selector: 10 lines per pod", []string{"logs", "-l", "app=web"}, "10"},
		{"selector, --tail=-1: all lines", []string{"logs", "-l", "app=web", "--tail=-1"}, ""},
		{"selector, --tail=3", []string{"logs", "-l", "app=web", "--tail=3"}, "3"},
		{"selector, --tail=0", []string{"logs", "-l", "app=web", "--tail=0"}, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sf := &streamingFake{Client: newFake(runningPod("default", "web-1", "node-1", "10.0.0.5", 0), runningPod("default", "web-2", "node-1", "10.0.0.6", 0))}
			res := runNode(t, sf, tc.args...)
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.err)
			}
			if len(sf.queries) == 0 {
				t.Fatal("no log request")
			}
			for _, q := range sf.queries {
				if got := q.Get("tailLines"); got != tc.want || q.Has("tailLines") != (tc.want != "") {
					t.Errorf("tailLines = %q (set %v), want %q", got, q.Has("tailLines"), tc.want)
				}
			}
		})
	}
}
