package portforward

import (
	"net/url"
	"strconv"
	"testing"
)

// FuzzParsePort: a port-forward query gives a port from 1 to 65535 or an
// error; the port Dial would send for it parses back to the same port.
func FuzzParsePort(f *testing.F) {
	for _, s := range []string{"port=80", "port=65535", "port=65536", "port=0", "port=-1", "port=+80", "port=080", "port=8080&port=9090", "port=", "port=1e3", "x=1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if len(raw) > 4<<10 {
			t.Skip("input too large")
		}
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		p, err := ParsePort(q)
		if err != nil {
			return
		}
		if p < 1 || p > 65535 {
			t.Fatalf("%q: port %d accepted", raw, p)
		}
		again, err := ParsePort(url.Values{"port": {strconv.Itoa(p)}})
		if err != nil || again != p {
			t.Fatalf("%q: port %d sent as %q parses to %d (%v)", raw, p, strconv.Itoa(p), again, err)
		}
	})
}
