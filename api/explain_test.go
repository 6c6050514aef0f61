package api

import (
	"strings"
	"testing"
)

func TestExplain(t *testing.T) {
	tests := []struct {
		path string
		want []string
		err  string
	}{
		{"pod", []string{"KIND:       Pod\nVERSION:    v1\n", "DESCRIPTION:\n    Pod is the smallest deployable unit", "  spec\t<PodSpec>"}, ""},
		{"pod.spec.containers", []string{"FIELD: containers <[]Container> -required-", "Containers run in the pod", "  image\t<string>", "  resources\t<ResourceRequirements>"}, ""},
		{"deploy.spec.replicas", []string{"GROUP:      apps", "FIELD: replicas <integer>", "default 1"}, ""},
		{"svc.spec.ports.targetPort", []string{"FIELD: targetPort <IntOrString>"}, ""},
		{"po.spec.containers.resources.limits", []string{"FIELD: limits <map[string]Quantity>", "nvidia.com/gpu"}, ""},
		{"pods.metadata.labels", []string{"FIELD: labels <map[string]string>"}, ""},
		{"pod.apiVersion", []string{"FIELD: apiVersion <string>"}, ""},
		{"pod.spec.nfs", nil, `field "spec.nfs" does not exist`},
		{"pod.spec.nodeName.x", nil, `field "spec.nodeName.x" does not exist`},
		{"ingress", nil, `the server doesn't have a resource type "ingress"`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			out, err := Explain(tt.path)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("missing %q in:\n%s", w, out)
				}
			}
		})
	}
}

// TestEveryFieldDocumented keeps `skiff explain` useful: every field of
// every served kind has a doc comment, or at least its type has one.
func TestEveryFieldDocumented(t *testing.T) {
	docs, err := loadDocs()
	if err != nil {
		t.Fatal(err)
	}
	missing := 0
	for _, k := range Kinds {
		for _, f := range fieldTree(k.Type, "") {
			if docs.fields[f.field.Owner.Name()][f.field.GoName] == "" && docs.types[structName(f.field.Type)] == "" {
				missing++
				t.Logf("%s.%s (%s.%s) has no doc comment", k.Kind, f.path, f.field.Owner.Name(), f.field.GoName)
			}
		}
	}
	if missing > 0 {
		t.Logf("%d fields without documentation (explain prints <no description>)", missing)
	}
}

// TestDocsWithoutGeneratorTags: the +k8s:deepcopy-gen lines above the
// kinds' structs (hack/deepcopy.sh) never reach `skiff explain` or the
// OpenAPI descriptions, which both read loadDocs.
func TestDocsWithoutGeneratorTags(t *testing.T) {
	docs, err := loadDocs()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(must(sources.ReadFile("pod.go"))), "+k8s:deepcopy-gen:interfaces") {
		t.Fatal("pod.go has no generator tag: nothing to check")
	}
	for name, text := range docs.types {
		if strings.Contains(text, "+k8s:") {
			t.Errorf("the doc of %s shows a generator tag: %q", name, text)
		}
	}
	for _, k := range Kinds {
		out, err := Explain(k.Resource)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, "+k8s:") {
			t.Errorf("skiff explain %s shows a generator tag:\n%s", k.Resource, out)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
