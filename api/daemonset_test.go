package api

import (
	"strings"
	"testing"
)

func decodeDaemonSet(tb testing.TB, y string) *DaemonSet {
	tb.Helper()
	o, _, err := DecodeAny([]byte(y))
	if err != nil {
		tb.Fatalf("decode: %v", err)
	}
	ds := o.(*DaemonSet)
	ds.Namespace = "default"
	SetDefaults(ds)
	return ds
}

const baseDaemonSet = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: busybox}]
`

func TestDaemonSetDefaults(t *testing.T) {
	ds := decodeDaemonSet(t, baseDaemonSet)
	s := ds.Spec
	if s.UpdateStrategy.Type != RollingUpdate || s.UpdateStrategy.RollingUpdate.MaxUnavailable.String() != "1" ||
		s.UpdateStrategy.RollingUpdate.MaxSurge.String() != "0" || *s.RevisionHistoryLimit != 10 {
		t.Errorf("defaults %+v %+v", s.UpdateStrategy, s.UpdateStrategy.RollingUpdate)
	}
	od := decodeDaemonSet(t, baseDaemonSet+"  updateStrategy: {type: OnDelete}\n")
	if od.Spec.UpdateStrategy.RollingUpdate != nil {
		t.Errorf("OnDelete got rollingUpdate defaults %+v", od.Spec.UpdateStrategy.RollingUpdate)
	}
}

func TestValidateDaemonSet(t *testing.T) {
	tests := []struct {
		name string
		spec string // appended under spec:
		want []string
	}{
		{"valid", "", nil},
		{"surge alone is invalid with the default maxUnavailable", "  updateStrategy: {rollingUpdate: {maxSurge: 1}}\n",
			[]string{`spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: "1": may not be set when maxUnavailable is non-zero`}},
		{"surge with maxUnavailable 0", "  updateStrategy: {rollingUpdate: {maxSurge: 25%, maxUnavailable: 0}}\n", nil},
		{"both zero", "  updateStrategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 0%}}\n",
			[]string{"spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"}},
		{"over 100%", "  updateStrategy: {rollingUpdate: {maxUnavailable: 150%}}\n",
			[]string{`spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: "150%": must not be greater than 100%`}},
		{"unknown strategy", "  updateStrategy: {type: Recreate}\n",
			[]string{`spec.updateStrategy.type: Unsupported value: "Recreate": supported values: "OnDelete", "RollingUpdate"`}},
		{"negative", "  minReadySeconds: -1\n  revisionHistoryLimit: -1\n",
			[]string{"spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0", "spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := Validate(decodeDaemonSet(t, baseDaemonSet+tc.spec))
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	// activeDeadlineSeconds is named for the kind.
	ds := decodeDaemonSet(t, baseDaemonSet)
	ds.Spec.Template.Spec.ActiveDeadlineSeconds = ptr[int64](5)
	if errs := Validate(ds); len(errs) != 1 || errs[0].Error() != "spec.template.spec.activeDeadlineSeconds: Invalid value: 5: activeDeadlineSeconds in DaemonSet is not Supported" {
		t.Errorf("activeDeadlineSeconds: %v", errs)
	}
}

func TestDaemonSetUpdateAndTemplateGeneration(t *testing.T) {
	old := decodeDaemonSet(t, baseDaemonSet)
	PrepareDaemonSet(old, nil)
	if g := DaemonSetTemplateGeneration(old); g != 1 {
		t.Fatalf("generation at create %d, want 1", g)
	}
	same := Clone(old)
	same.Labels = map[string]string{"team": "a"}
	PrepareDaemonSet(same, old)
	if g := DaemonSetTemplateGeneration(same); g != 1 {
		t.Errorf("generation after a metadata change %d, want 1", g)
	}
	changed := Clone(old)
	changed.Spec.Template.Spec.Containers[0].Image = "busybox:2"
	PrepareDaemonSet(changed, old)
	if g := DaemonSetTemplateGeneration(changed); g != 2 {
		t.Errorf("generation after a template change %d, want 2", g)
	}
	changed.Spec.Selector = &LabelSelector{MatchLabels: map[string]string{"app": "agent", "v": "2"}}
	changed.Spec.Template.Labels["v"] = "2"
	if errs := ValidateUpdate(changed, old); len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "spec.selector: Invalid value:") || !strings.HasSuffix(errs[0].Error(), "field is immutable") {
		t.Errorf("selector change: %v", errs)
	}
}

func TestValidateControllerRevision(t *testing.T) {
	r := &ControllerRevision{ObjectMeta: ObjectMeta{Name: "agent-5d8f", Namespace: "default"}, Revision: -1}
	errs := Validate(r)
	if len(errs) != 2 || errs[0].Error() != "data: Required value: data is mandatory" || errs[1].Error() != "revision: Invalid value: -1: must be greater than or equal to 0" {
		t.Errorf("errors %v", errs)
	}
	r.Data, r.Revision = []byte(`{"spec":{"template":{"$patch":"replace"}}}`), 1
	n := Clone(r)
	n.Data = []byte(`{"spec": {"template": {"$patch": "replace"}}}`) // same value, other spacing
	if errs := ValidateUpdate(n, r); len(errs) != 0 {
		t.Errorf("same data refused: %v", errs)
	}
	n.Data = []byte(`{"spec":{}}`)
	if errs := ValidateUpdate(n, r); len(errs) != 1 || errs[0].Error() != `data: Invalid value: "<value omitted>": field is immutable` {
		t.Errorf("changed data: %v", errs)
	}
}
