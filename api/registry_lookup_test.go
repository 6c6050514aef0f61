package api

import "testing"

func TestKindForResource(t *testing.T) {
	tests := []struct {
		name                     string
		group, version, resource string
		want                     string // Kind, "" for none
	}{
		{name: "core", resource: "pods", version: "v1", want: "Pod"},
		{name: "any version", group: "apps", resource: "deployments", want: "Deployment"},
		{name: "stored version", group: "apps", version: "v1", resource: "deployments", want: "Deployment"},
		{name: "further served version", group: KueueGroup, version: "v1beta1", resource: "clusterqueues", want: "ClusterQueue"},
		{name: "version not served", group: "apps", version: "v1beta1", resource: "deployments"},
		{name: "wrong group", group: "apps", version: "v1", resource: "pods"},
		{name: "unknown resource", version: "v1", resource: "widgets"},
		{name: "review kind", group: "authorization.k8s.io", version: "v1", resource: "selfsubjectaccessreviews", want: "SelfSubjectAccessReview"},
		{name: "singular is no resource", version: "v1", resource: "pod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := KindForResource(tt.group, tt.version, tt.resource)
			got := ""
			if k != nil {
				got = k.Kind
			}
			if got != tt.want {
				t.Errorf("KindForResource(%q, %q, %q) = %q, want %q", tt.group, tt.version, tt.resource, got, tt.want)
			}
		})
	}
}
