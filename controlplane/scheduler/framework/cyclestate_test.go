package framework

import (
	"fmt"
	"testing"
)

// num is StateData for the tests: an int, copied by Clone.
type num struct{ n int }

func (d *num) Clone() StateData { c := *d; return &c }

func TestCycleState(t *testing.T) {
	c := NewCycleState()
	if _, ok := c.Read("PreFilterNodePorts"); ok {
		t.Fatal("empty state: read found an entry")
	}
	keys := []StateKey{"PreFilterNodeResourcesFit", "PreFilterNodePorts", "PreScoreNodeResourcesBalancedAllocation", "HAMi", "PreFilterNodeAffinity", "PreFilterVolumeBinding", "PreFilterDynamicResources", "PreFilterPodTopologySpread", "PreScorePodTopologySpread", "skiff.dev/cycle"}
	for i, k := range keys {
		c.Write(k, &num{i})
	}
	c.Write("HAMi", &num{100}) // replaces
	if len(c.data) != len(keys) {
		t.Fatalf("%d entries after %d keys and one replacement", len(c.data), len(keys))
	}
	for i, k := range keys {
		want := i
		if k == "HAMi" {
			want = 100
		}
		// A key built at run time, not the constant: read compares bytes.
		d, ok := c.Read(StateKey(fmt.Sprint(string(k))))
		if !ok || d.(*num).n != want {
			t.Errorf("Read(%s) = %v, %v; want %d", k, d, ok, want)
		}
	}
	cp := c.Clone()
	cp.Write("HAMi", &num{7})
	d, _ := cp.Read("PreFilterNodePorts")
	d.(*num).n = -1
	cp.Write("PreFilterInterPodAffinity", &num{8})
	if d, _ := c.Read("HAMi"); d.(*num).n != 100 {
		t.Errorf("a write to the clone changed the original: HAMi = %d", d.(*num).n)
	}
	if d, _ := c.Read("PreFilterNodePorts"); d.(*num).n != 1 {
		t.Errorf("a change to the clone's data changed the original: %d", d.(*num).n)
	}
	if _, ok := c.Read("PreFilterInterPodAffinity"); ok {
		t.Error("an entry added to the clone is in the original")
	}
}

// BenchmarkCycleStateRead: what Filter and Score pay for every node, per
// plugin: a read from a state of a plain pod's ten entries (the scan),
// against the map the state used to be.
func BenchmarkCycleStateRead(b *testing.B) {
	keys := []StateKey{"skiff.dev/cycle", "PreFilterNodeResourcesFit", "PreFilterNodePorts", "PreFilterNodeAffinity", "PreFilterVolumeBinding", "PreFilterDynamicResources", "HAMi", "PreFilterPodTopologySpread", "PreFilterInterPodAffinity", "PreScoreNodeResourcesBalancedAllocation"}
	c := NewCycleState()
	m := map[StateKey]StateData{}
	for i, k := range keys {
		c.Write(k, &num{i})
		m[k] = &num{i}
	}
	read := []StateKey{"PreFilterNodeResourcesFit", "PreFilterVolumeBinding", "PreFilterDynamicResources", "HAMi", "PreScoreNodeResourcesBalancedAllocation"}
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			for _, k := range read {
				if _, ok := c.Read(k); !ok {
					b.Fatal(k)
				}
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		for b.Loop() {
			for _, k := range read {
				if _, ok := m[k]; !ok {
					b.Fatal(k)
				}
			}
		}
	})
}
