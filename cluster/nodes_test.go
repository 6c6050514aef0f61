package cluster

import (
	"slices"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/api/fabric"
	"skiff.dev/skiff/pki/pkitest"
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
	for _, tc := range []struct {
		spec, want string
		nodes      int
	}{
		{"external", "external external", 2},
		{"builtin, external", "builtin external", 2},
		{"", " ", 2}, // the built-in one: "" is builtin
		{"pod", `--device-plugin "pod": want builtin`, 1},
		{"builtin,pod", `--device-plugin "pod": want builtin`, 2},
		{"builtin,external", "2 values for 3 nodes", 3},
	} {
		got, err := nodeDevicePlugins(tc.spec, tc.nodes)
		if s := strings.Join(got, " "); err == nil && s != tc.want || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("nodeDevicePlugins(%q, %d) = %q, %v; want %q", tc.spec, tc.nodes, got, err, tc.want)
		}
	}
	if got := localNodeNames("lab", 3); !slices.Equal(got, []string{"lab-1", "lab-2", "lab-3"}) {
		t.Errorf("localNodeNames = %q", got)
	}
}

// Bad cluster flags are all reported before anything starts.
func TestConfigValidate(t *testing.T) {
	good := Config{Runtime: "auto", Network: "auto", Nodes: 1, GPUs: "auto-sim"}
	if err := good.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if def := DefaultConfig(); def.Validate() != nil {
		t.Fatalf("DefaultConfig: %v", def.Validate())
	}
	bad := Config{Runtime: "docker", Network: "flannel", Nodes: 2, GPUs: "none,none,none", DevicePlugin: "builtin,builtin,external"}
	err := bad.Validate()
	for _, want := range []string{`--runtime "docker"`, `--network "flannel"`, `--gpus "none,none,none": 3 values for 2 nodes`,
		`--device-plugin "builtin,builtin,external": 3 values for 2 nodes`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate() = %v; want it to mention %s", err, want)
		}
	}
}

// --nodes N: each node has its own name, data dir, bridge and GPUs; only
// the first runs the machine's service proxy. One node keeps the flags'
// name and data dir.
func TestLocalNodeConfigs(t *testing.T) {
	f := Config{DataDir: "/d", NodeName: "lab", Runtime: "auto", Network: "auto", ContainerdAddress: "/c.sock", ContainerdNamespace: "ns", GPUs: "sim:dgxa100,none", Nodes: 2,
		DevicePlugin: "external, builtin"}
	ca := pkitest.CA(t)
	cfgs, err := localNodeConfigs(f, ca.IssueNode)
	if err != nil {
		t.Fatal(err)
	}
	type want struct{ name, dir, bridge, gpus, plugin string }
	wants := []want{{"lab-1", "/d/nodes/lab-1", "skiff0", "sim:dgxa100", "external"}, {"lab-2", "/d/nodes/lab-2", "skiff1", "none", "builtin"}}
	if len(cfgs) != len(wants) {
		t.Fatalf("%d configs, want %d", len(cfgs), len(wants))
	}
	for i, w := range wants {
		c := cfgs[i]
		if (want{c.Name, c.DataDir, c.Bridge, c.GPUs, c.DevicePlugin}) != w || c.NoServiceProxy != (i > 0) || c.ContainerdAddress != "/c.sock" || c.ContainerdNamespace != "ns" || c.Credentials == nil {
			t.Errorf("node %d: %+v; want %+v, service proxy on the first only", i, c, w)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("node %d: %v", i, err)
		}
		// Issued for this node by the CA, with the node's address.
		if c.Credentials != nil {
			if err := c.Credentials.Check(c.Name, []string{agent.DefaultConfig().NodeIP}, time.Now()); err != nil {
				t.Errorf("node %d credentials: %v", i, err)
			}
		}
	}
	f.Nodes, f.GPUs, f.DevicePlugin = 1, "none", "builtin"
	cfgs, err = localNodeConfigs(f, ca.IssueNode)
	if err != nil || len(cfgs) != 1 || cfgs[0].Name != "lab" || cfgs[0].DataDir != "/d" {
		t.Fatalf("one node: %+v, %v; want lab in /d", cfgs, err)
	}
}

// --cluster FILE: the nodes get the file's GPUs and their NVLink domain as
// labels; a node count that differs from --nodes is refused, naming the file.
func TestLocalNodeConfigsClusterFile(t *testing.T) {
	path := "../examples/homework/task3/cluster-4x-a100.yaml"
	f := Config{DataDir: "/d", NodeName: "hw", Runtime: "auto", Network: "auto", GPUs: "auto-sim", Nodes: 4, ClusterFile: path}
	ca := pkitest.CA(t)
	cfgs, err := localNodeConfigs(f, ca.IssueNode)
	if err != nil {
		t.Fatal(err)
	}
	wantDomain := []string{"nvl-a", "nvl-a", "nvl-b", "nvl-b"}
	for i, c := range cfgs {
		if c.GPUs != "sim:dgxa100" || c.Labels[fabric.LabelDomain] != wantDomain[i] || !strings.HasSuffix(c.Labels[fabric.LabelClique], []string{".1", ".1", ".2", ".2"}[i]) {
			t.Errorf("node %s: gpus %q labels %v; want sim:dgxa100 in %s", c.Name, c.GPUs, c.Labels, wantDomain[i])
		}
	}
	f.Nodes = 3
	if _, err := localNodeConfigs(f, ca.IssueNode); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "--nodes is 3") {
		t.Errorf("3 nodes with a 4-node file: %v", err)
	}
}

func TestAdvertiseURL(t *testing.T) {
	cases := []struct{ url, advertise, want string }{
		{"http://127.0.0.1:7443", "", "http://127.0.0.1:7443"},
		{"http://0.0.0.0:7443", "10.1.2.3", "http://10.1.2.3:7443"},
		{"http://10.0.0.5:7443", "10.1.2.3", "http://10.0.0.5:7443"},
		{"http://:7443", "10.1.2.3", "http://10.1.2.3:7443"},
	}
	for _, tc := range cases {
		if got := advertiseURL(tc.url, tc.advertise); got != tc.want {
			t.Errorf("advertiseURL(%q, %q) = %q, want %q", tc.url, tc.advertise, got, tc.want)
		}
	}
}

// --pod-security-default sets every mode (enforce, warn, audit) of the
// API server's default level; unset, the server keeps its own default.
func TestPodSecurityDefault(t *testing.T) {
	for _, level := range []string{"", "baseline", "privileged", "restricted"} {
		t.Run(level, func(t *testing.T) {
			c := DefaultConfig()
			c.PodSecurityDefault = level
			cfg := c.controlPlaneConfig("m")
			switch {
			case level == "" && cfg.API.PodSecurity != nil:
				t.Errorf("config set for the default: %+v", cfg.API.PodSecurity)
			case level != "" && (cfg.API.PodSecurity == nil || cfg.API.PodSecurity.Defaults.Enforce != level || cfg.API.PodSecurity.Defaults.Warn != level || cfg.API.PodSecurity.Defaults.Audit != level):
				t.Errorf("config = %+v, want every mode %s", cfg.API.PodSecurity, level)
			}
		})
	}
}
