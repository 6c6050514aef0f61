package apiserver

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
)

func TestAdmitPriority(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	never := api.PreemptNever
	for _, pc := range []*api.PriorityClass{
		{ObjectMeta: api.ObjectMeta{Name: "high"}, Value: 1000},
		{ObjectMeta: api.ObjectMeta{Name: "batch"}, Value: -5, PreemptionPolicy: &never},
	} {
		if _, err := e.local.Create(ctx, pc); err != nil {
			t.Fatal(err)
		}
	}
	create := func(name, class string, edit func(*api.Pod)) (*api.Pod, error) {
		p := pod(name, nil)
		p.Spec.PriorityClassName = class
		if edit != nil {
			edit(p)
		}
		out, err := e.local.Create(ctx, p)
		if err != nil {
			return nil, err
		}
		return out.(*api.Pod), nil
	}
	i32 := func(v int32) *int32 { return &v }

	tests := []struct {
		name, class string
		edit        func(*api.Pod)
		wantPrio    int32
		wantPolicy  string
		wantErr     string
	}{
		{name: "named", class: "high", wantPrio: 1000, wantPolicy: api.PreemptLowerPriority},
		{name: "never", class: "batch", wantPrio: -5, wantPolicy: api.PreemptNever},
		{name: "none", wantPrio: 0, wantPolicy: api.PreemptLowerPriority},
		{name: "system", class: api.SystemNodeCritical, wantPrio: 2000001000, wantPolicy: api.PreemptLowerPriority},
		{name: "same-priority", class: "high", edit: func(p *api.Pod) { p.Spec.Priority = i32(1000) }, wantPrio: 1000, wantPolicy: api.PreemptLowerPriority},
		{name: "unknown", class: "nope", wantErr: `pods "unknown" is forbidden: no PriorityClass with name nope was found`},
		{name: "own-priority", class: "high", edit: func(p *api.Pod) { p.Spec.Priority = i32(7) },
			wantErr: "the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name"},
		{name: "own-policy", class: "high", edit: func(p *api.Pod) { p.Spec.PreemptionPolicy = &never },
			wantErr: "the string value of PreemptionPolicy (Never) must not be provided in pod spec"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := create(tc.name, tc.class, tc.edit)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || api.CodeOf(err) != http.StatusForbidden {
					t.Fatalf("err = %v (code %d), want 403 %q", err, api.CodeOf(err), tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Spec.Priority == nil || *p.Spec.Priority != tc.wantPrio || p.Spec.PreemptionPolicy == nil || *p.Spec.PreemptionPolicy != tc.wantPolicy {
				t.Errorf("priority %v policy %v, want %d %s", p.Spec.Priority, p.Spec.PreemptionPolicy, tc.wantPrio, tc.wantPolicy)
			}
		})
	}

	// A global default applies to pods that name no class; only one may exist.
	if _, err := e.local.Create(ctx, &api.PriorityClass{ObjectMeta: api.ObjectMeta{Name: "default-prio"}, Value: 10, GlobalDefault: true}); err != nil {
		t.Fatal(err)
	}
	p, err := create("defaulted", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.PriorityClassName != "default-prio" || *p.Spec.Priority != 10 {
		t.Errorf("default class: %q %d", p.Spec.PriorityClassName, *p.Spec.Priority)
	}
	_, err = e.local.Create(ctx, &api.PriorityClass{ObjectMeta: api.ObjectMeta{Name: "second"}, Value: 11, GlobalDefault: true})
	if err == nil || !strings.Contains(err.Error(), "PriorityClass default-prio is already marked as default. Only one default can exist") {
		t.Errorf("second default: %v", err)
	}

	// Over HTTP the refusal is a 403 Status, as kubectl shows it.
	code, body := e.do("POST", "/api/v1/namespaces/default/pods", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"h"},"spec":{"priorityClassName":"nope","containers":[{"name":"c","image":"nginx"}]}}`)
	if code != http.StatusForbidden || !strings.Contains(string(body), "no PriorityClass with name nope was found") {
		t.Errorf("HTTP: %d %s", code, body)
	}
}
