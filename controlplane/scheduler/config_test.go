package scheduler

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/controlplane/scheduler/plugins"
)

func TestDefaultConfigValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestLoadConfigTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatal("no testdata", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cfg, err := LoadConfig(path)
			valid := strings.HasPrefix(filepath.Base(path), "valid-")
			if valid != (err == nil) {
				t.Fatalf("valid=%v, err=%v", valid, err)
			}
			if valid {
				if _, err := New(nopClient{}, cfg, Options{Recorder: &events{}}); err != nil {
					t.Fatalf("New: %v", err)
				}
			}
		})
	}
}

func TestLoadConfigValues(t *testing.T) {
	cfg, err := LoadConfig("testdata/valid-default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	def := DefaultConfig()
	def.APIVersion, def.Kind = ConfigAPIVersion, ConfigKind
	if !reflect.DeepEqual(cfg, def) {
		t.Errorf("valid-default.yaml differs from DefaultConfig:\n%+v\n%+v", cfg, def)
	}
	cfg, err = LoadConfig("testdata/valid-binpack-gpu.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ScoringStrategy.Type != plugins.MostAllocated || cfg.PodMaxBackoff.Duration != 5*time.Second || len(cfg.Plugins) != len(def.Plugins) {
		t.Errorf("binpack config: %+v", cfg)
	}
}

func TestValidateReportsEverything(t *testing.T) {
	_, err := LoadConfig("testdata/invalid-many.yaml")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`plugins[1].name: "NodeResourcesFit" given twice`,
		`plugins[2].name: unknown plugin "PodTopologySpread"`,
		"plugins[2].weight: 500 is not in 0..100",
		"plugins: DefaultBinder is required",
		`scoringStrategy.type: "Balanced" is not supported`,
		"scoringStrategy.resources[0].weight: 0 is not in 1..100",
		"podMaxBackoff: 1s is less than podInitialBackoff 10s",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "nope.yaml")); !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("err = %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}
