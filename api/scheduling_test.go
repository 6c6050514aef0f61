package api

import (
	"strings"
	"testing"
)

func TestPriorityClass(t *testing.T) {
	pc := mustDecode(t, `apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
globalDefault: true
description: important
`).(*PriorityClass)
	if pc.Value != 1000 || !pc.GlobalDefault || pc.Description != "important" {
		t.Fatalf("decoded %+v", pc)
	}
	if k := MustKindOf(pc); k.Namespaced || k.APIVersion() != "scheduling.k8s.io/v1" {
		t.Errorf("kind %+v", k)
	}
	if k, err := LookupResource("pc"); err != nil || k.Kind != "PriorityClass" {
		t.Errorf("LookupResource(pc) = %v, %v", k, err)
	}
	SetDefaults(pc)
	if pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != PreemptLowerPriority {
		t.Errorf("preemptionPolicy not defaulted: %v", pc.PreemptionPolicy)
	}
	if errs := Validate(pc); len(errs) > 0 {
		t.Errorf("valid class: %v", errs)
	}

	never := PreemptNever
	tests := []struct {
		name string
		edit func(n *PriorityClass)
		want string // "" = valid
	}{
		{"same", func(*PriorityClass) {}, ""},
		{"description", func(n *PriorityClass) { n.Description = "x" }, ""},
		{"value", func(n *PriorityClass) { n.Value = 5 }, "value: Forbidden: may not be changed in an update."},
		{"policy", func(n *PriorityClass) { n.PreemptionPolicy = &never }, `preemptionPolicy: Invalid value: "Never": field is immutable`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := Clone(pc)
			tc.edit(n)
			errs := ValidateUpdate(n, pc)
			if tc.want == "" && len(errs) > 0 || tc.want != "" && !strings.Contains(errs.Error(), tc.want) {
				t.Errorf("errors %v, want %q", errs, tc.want)
			}
		})
	}

	for _, s := range SystemPriorityClasses() {
		if errs := Validate(s); len(errs) > 0 {
			t.Errorf("%s: %v", s.Name, errs)
		}
	}
}
