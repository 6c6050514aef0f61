package fabric

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatal("no testdata", err)
	}
	home, _ := filepath.Glob("../../examples/homework/task3/cluster-*.yaml")
	for _, path := range append(files, home...) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			_, err := Load(path)
			valid := !strings.HasPrefix(filepath.Base(path), "invalid-")
			if valid != (err == nil) {
				t.Fatalf("valid=%v, err=%v", valid, err)
			}
			if err != nil && !strings.Contains(err.Error(), path) {
				t.Errorf("error does not name the file: %v", err)
			}
		})
	}
}

func TestValidateNamesEveryField(t *testing.T) {
	_, err := Load("testdata/invalid-many.yaml")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`apiVersion: "skiff.dev/v1" is not supported`,
		`clusterUUID: "not-a-uuid" is not a UUID`,
		`interconnect: "Ethernet" is not supported (InfiniBand)`,
		`nvlinkDomains[0].name: "NVL_A": a lowercase RFC 1123 label`,
		`nvlinkDomains[0].nodes[1]: node 3 is not in 1..2`,
		`nvlinkDomains[1].nodes[0]: node 1 is already in domain "NVL_A"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := Load("testdata/invalid-unknown-field.yaml"); err == nil || !strings.Contains(err.Error(), `unknown field "nvlinkDomain"`) {
		t.Errorf("unknown field: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestNodeLabels(t *testing.T) {
	c, err := Load("testdata/valid-homework3.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		node           int
		clique, domain string
	}{
		{1, DefaultClusterUUID + ".1", "nvl-a"},
		{2, DefaultClusterUUID + ".1", "nvl-a"},
		{3, DefaultClusterUUID + ".2", "nvl-b"},
		{4, DefaultClusterUUID + ".2", "nvl-b"},
		{5, "", ""},
	}
	for _, tc := range cases {
		l := c.NodeLabels(tc.node)
		if l[LabelClique] != tc.clique || l[LabelDomain] != tc.domain || l[LabelInterconnect] != InfiniBand {
			t.Errorf("node %d: %v, want clique %q domain %q", tc.node, l, tc.clique, tc.domain)
		}
	}
}
