package api

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
)

// fuzzLabelSets are the label sets a parsed selector is matched against.
var fuzzLabelSets = []labels.Set{
	{},
	{"app": "web"},
	{"app": "web", "tier": "a"},
	{"app": "db", "tier": "b", "legacy": "true"},
	{"skiff.dev/gpu": "true", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
	{"env": "", "x": "1"},
}

// FuzzLabelSelector: a selector that parses prints (String) a selector that
// parses to the same printed form and matches exactly the same label sets.
func FuzzLabelSelector(f *testing.F) {
	for _, s := range []string{
		"", "app=web", "app==web,tier!=b", "tier in (a,b),!legacy", "app notin (db)", "legacy",
		"skiff.dev/gpu=true,nvidia.com/gpu.product in (NVIDIA-A100-SXM4-80GB)", "x>0", "x<2",
		"a in (b", "app = web", "!", "a=b,,c=d", "env=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4<<10 {
			t.Skip("input too large")
		}
		sel, err := ParseSelector(s)
		if err != nil {
			return
		}
		printed := sel.String()
		again, err := ParseSelector(printed)
		if err != nil {
			t.Fatalf("%q parses, its form %q does not: %v", s, printed, err)
		}
		if again.String() != printed {
			t.Fatalf("%q prints %q, which prints %q", s, printed, again.String())
		}
		for _, set := range fuzzLabelSets {
			if sel.Matches(set) != again.Matches(set) {
				t.Fatalf("%q and its form %q disagree on %v", s, printed, set)
			}
		}
	})
}

// FuzzFieldSelector: a field selector accepted for a kind names only fields
// the kind supports, prints a selector accepted again with the same
// printed form, and both match the same objects.
func FuzzFieldSelector(f *testing.F) {
	for _, s := range []string{
		"", "metadata.name=a", "status.phase=Pending,spec.nodeName!=n1", "spec.nodeName=",
		"involvedObject.kind=Pod,reason=FailedScheduling", "spec.unschedulable=true", "type=Opaque",
		"metadata.name==a", "a\\,b=c", "metadata.name=a\\=b", "status.phase in (a)", "=", "x",
	} {
		f.Add(s, uint8(0))
	}
	pod := &Pod{ObjectMeta: ObjectMeta{Name: "a", Namespace: "default"}}
	pod.Spec.NodeName, pod.Status.Phase = "n1", PodPending
	objs := []Object{
		pod,
		&Event{ObjectMeta: ObjectMeta{Name: "e", Namespace: "default"}, Reason: "FailedScheduling", InvolvedObject: ObjectReference{Kind: "Pod", Name: "a"}},
		&Node{ObjectMeta: ObjectMeta{Name: "n1"}},
		&Secret{ObjectMeta: ObjectMeta{Name: "s", Namespace: "default"}, Type: "Opaque"},
		&ConfigMap{ObjectMeta: ObjectMeta{Name: "a=b", Namespace: "default"}},
	}
	f.Fuzz(func(t *testing.T, s string, which uint8) {
		if len(s) > 4<<10 {
			t.Skip("input too large")
		}
		o := objs[int(which)%len(objs)]
		k := MustKindOf(o)
		sel, err := ParseFieldSelector(k, s)
		if err != nil {
			return
		}
		allowed := map[string]bool{}
		for _, f := range append(SupportedFieldSelectors[""], SupportedFieldSelectors[k.Kind]...) {
			allowed[f] = true
		}
		for _, r := range sel.Requirements() {
			if !allowed[r.Field] {
				t.Fatalf("%q accepted for %s with field %q", s, k.Kind, r.Field)
			}
		}
		printed := sel.String()
		again, err := ParseFieldSelector(k, printed)
		if err != nil {
			t.Fatalf("%q parses, its form %q does not: %v", s, printed, err)
		}
		if again.String() != printed {
			t.Fatalf("%q prints %q, which prints %q", s, printed, again.String())
		}
		if Matches(o, nil, sel) != Matches(o, nil, again) {
			t.Fatalf("%q and its form %q disagree on %s %s", s, printed, k.Kind, o.GetObjectMeta().Name)
		}
	})
}

// FuzzQuantity: a quantity that does not fit an amount fails validation;
// one that fits prints a form that parses to an equal quantity, and its
// amount, when not negative (refused too), is the smallest whole number
// of skiff's unit not below it (ResourceAmount rounds up).
func FuzzQuantity(f *testing.F) {
	for _, s := range []string{
		"0", "250m", "2", "0.1m", "64Mi", "8", "1e400", "-1e400", "9223372036854775807", "9223372036854775808",
		"9223372036854775807m", "9Ei", "1.5", "1e-3", "+1", ".5", "1E3", "100Ki", "1.000000001", "-0",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, cpu bool) {
		if len(s) > 256 {
			t.Skip("input too large")
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return
		}
		name := ResourceNvidiaGPU
		if cpu {
			name = ResourceCPU
		}
		amount, ok := ResourceAmount(name, q)
		if !ok {
			// Past an amount: refused. (Past 10^21 apimachinery v0.36 also
			// prints it wrong, "1000E" as "1": kubernetes/kubernetes#140459.)
			if errs := validateResourceQuantity(name, q, "q"); len(errs) == 0 {
				t.Fatalf("%s of %s does not fit an amount but validates", s, name)
			}
			return
		}
		again, err := resource.ParseQuantity(q.String())
		if err != nil {
			t.Fatalf("%q parses, its form %q does not: %v", s, q.String(), err)
		}
		if again.Cmp(q) != 0 {
			t.Fatalf("%q is %s, its form parses to %s", s, q.String(), again.String())
		}
		if q.Sign() < 0 {
			if errs := validateResourceQuantity(name, q, "q"); len(errs) == 0 {
				t.Fatalf("negative %s of %s validates", s, name)
			}
			return // apimachinery rounds negatives away from zero
		}
		back := AmountQuantity(name, amount, "")
		if back.Cmp(q) < 0 {
			t.Fatalf("%s of %s: amount %d (%s) is below it", s, name, amount, back.String())
		}
		if a2, ok := ResourceAmount(name, back); !ok || a2 != amount {
			t.Fatalf("%s of %s: amount %d gives back %d (%v)", s, name, amount, a2, ok)
		}
		if amount > minUnits.Value() {
			below := AmountQuantity(name, amount-1, "")
			if below.Cmp(q) >= 0 {
				t.Fatalf("%s of %s: amount %d is not the smallest (%d is not below it)", s, name, amount, amount-1)
			}
		}
	})
}
