package cli

import (
	"slices"
	"strings"
	"testing"
)

func TestNodeGPUSpecs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    string
		nodes   int
		want    []string
		wantErr bool
	}{
		{"one per node", "sim:dgxa100,sim:dgxa100,none", 3, []string{"sim:dgxa100", "sim:dgxa100", "none"}, false},
		{"one for all", "sim:dgxh100", 3, []string{"sim:dgxh100", "sim:dgxh100", "sim:dgxh100"}, false},
		{"real GPUs go to the first node only", "auto", 2, []string{"auto", "none"}, false},
		{"auto-sim: real (or simulated) on the first node, simulated on the rest", "auto-sim", 3, []string{"auto-sim", "sim:dgxa100", "sim:dgxa100"}, false},
		{"spaces", "sim:dgxa100, none", 2, []string{"sim:dgxa100", "none"}, false},
		{"too few", "sim:dgxa100,none", 3, nil, true},
		{"nvml twice", "nvml,nvml", 2, nil, true},
		{"auto twice", "auto,auto", 2, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := nodeGPUSpecs(tc.spec, tc.nodes)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	if got := localNodeNames("lab", 3); !slices.Equal(got, []string{"lab-1", "lab-2", "lab-3"}) {
		t.Errorf("localNodeNames = %q", got)
	}
}

// Bad cluster flags are all reported before anything starts.
func TestClusterFlagsValidate(t *testing.T) {
	good := clusterFlags{runtime: "auto", network: "auto", nodes: 1, gpus: "auto-sim"}
	if err := good.validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := clusterFlags{runtime: "docker", network: "flannel", nodes: 2, gpus: "none,none,none"}
	err := bad.validate()
	for _, want := range []string{`--runtime "docker"`, `--network "flannel"`, "3 values for 2 nodes"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate() = %v; want it to mention %s", err, want)
		}
	}
}
