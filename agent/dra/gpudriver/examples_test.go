package gpudriver_test

import (
	"os"
	"path/filepath"
	"testing"

	"skiff.dev/skiff/api"
)

// TestExamplesDecodeAndValidate: every file of examples/dra decodes
// (v1beta1 included) and validates.
func TestExamplesDecodeAndValidate(t *testing.T) {
	files, err := filepath.Glob("../../../examples/dra/*.yaml")
	if err != nil || len(files) < 6 {
		t.Fatalf("examples/dra: %v files, %v", len(files), err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs := api.DecodeStream(data)
			if len(docs) == 0 {
				t.Fatal("no objects")
			}
			for _, d := range docs {
				if d.Err != nil {
					t.Fatalf("document %d: %v", d.Index, d.Err)
				}
				api.SetDefaults(d.Object)
				if err := api.Validate(d.Object); err != nil {
					t.Errorf("document %d (%s): %v", d.Index, d.Kind.Kind, err)
				}
			}
		})
	}
}
