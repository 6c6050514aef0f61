package kubectl

import (
	"strings"
	"testing"

	"skiff.dev/skiff/api"
)

// AccessList builds kubectl auth can-i --list's rows as kubectl does:
// broken down per resource, name and URL, merged per resource and name
// (verbs in first-seen order), sorted by the rule's protobuf String(),
// in which "" prints as [], and a space and '/' sort before ']'.
func TestAccessList(t *testing.T) {
	st := api.SubjectRulesReviewStatus{
		ResourceRules: []api.ResourceRule{
			{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}},
			{Verbs: []string{"watch", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}},
			{Verbs: []string{"get"}, APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{"web", "api"}},
			{Verbs: []string{"get"}, APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}},
		},
		NonResourceRules: []api.NonResourceRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/version", "/healthz"}}},
	}
	var rows []string
	for _, r := range AccessList(st) {
		rows = append(rows, AccessRow(r))
	}
	want := []string{
		"pods\t[]\t[]\t[get list watch]",
		"pods/log\t[]\t[]\t[get list]",
		"\t[/healthz]\t[]\t[get]",
		"\t[/version]\t[]\t[get]",
		"deployments.apps/scale\t[]\t[]\t[get]",
		"deployments.apps\t[]\t[api]\t[get]",
		"deployments.apps\t[]\t[web]\t[get]",
	}
	if got := strings.Join(rows, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if got := AccessList(api.SubjectRulesReviewStatus{}); len(got) != 0 {
		t.Errorf("no rules: %v", got)
	}
}
