package devices

import (
	"testing"
	"time"
)

// The log keeps the registration of each resource and its maxLen most
// recent other calls.
func TestCallLogBounded(t *testing.T) {
	l := newCallLog()
	l.maxLen = 3
	t0 := time.Unix(1000, 0)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	l.add(Call{Resource: "r/a", Method: "GetDevicePluginOptions", Start: at(1)})
	l.add(Call{Resource: "r/a", Method: "Register", Start: at(0)})
	l.add(Call{Resource: "r/a", Method: "ListAndWatch", Start: at(2)})
	for i := range 10 {
		l.add(Call{Resource: "r/a", Method: "Allocate", Start: at(10 + i)})
	}
	l.add(Call{Resource: "r/b", Method: "Register", Start: at(5)})
	got := l.calls()
	var want = []struct {
		method string
		start  time.Time
	}{
		{"Register", at(0)}, {"GetDevicePluginOptions", at(1)}, {"ListAndWatch", at(2)},
		{"Register", at(5)}, {"Allocate", at(17)}, {"Allocate", at(18)}, {"Allocate", at(19)},
	}
	if len(got) != len(want) {
		t.Fatalf("%d calls kept, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Method != w.method || !got[i].Start.Equal(w.start) {
			t.Errorf("call %d: %s at %v, want %s at %v", i, got[i].Method, got[i].Start, w.method, w.start)
		}
	}
}
