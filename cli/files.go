package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"skiff.dev/skiff/api"
)

// manifest is one input of -f: a file, or stdin ("-"), with its documents.
type manifest struct {
	// Source names the input in messages: the path, or "STDIN".
	Source string
	Docs   []api.Document
	// Data is the input as read (apply compares the fields it sets).
	Data []byte
}

// manifestExts are the files a directory contributes, as kubectl.
var manifestExts = [...]string{".yaml", ".yml", ".json"}

// expandFiles turns -f values into file paths ("-" stays): directories
// contribute their *.yaml, *.yml and *.json files in name order, and their
// subdirectories too when recursive.
func expandFiles(values []string, recursive bool) ([]string, error) {
	if len(values) == 0 {
		return nil, errors.New("must specify -f FILENAME (a file, a directory or - for stdin)")
	}
	var out []string
	for _, v := range values {
		if v == "-" {
			out = append(out, v)
			continue
		}
		info, err := os.Stat(v)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("the path %q does not exist", v)
			}
			return nil, err
		}
		if !info.IsDir() {
			out = append(out, v)
			continue
		}
		var found []string
		err = filepath.WalkDir(v, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != v && !recursive {
					return filepath.SkipDir
				}
				return nil
			}
			ext := strings.ToLower(filepath.Ext(path))
			for _, e := range manifestExts {
				if ext == e {
					found = append(found, path)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(found)
		if len(found) == 0 {
			return nil, fmt.Errorf("error reading %s: no manifest files (*.yaml, *.yml, *.json) found", v)
		}
		out = append(out, found...)
	}
	return out, nil
}

// readManifests reads and decodes every input.
func readManifests(paths []string, stdin io.Reader) ([]manifest, error) {
	var out []manifest
	for _, p := range paths {
		var data []byte
		var err error
		src := p
		if p == "-" {
			src = "STDIN"
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(p)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", src, err)
		}
		out = append(out, manifest{Source: src, Docs: api.DecodeStream(data), Data: data})
	}
	return out, nil
}

// describeDoc names a document in messages: `document 2 (Deployment "web")`.
func describeDoc(d api.Document) string {
	s := fmt.Sprintf("document %d", d.Index+1)
	if d.Path != "" {
		s += " " + d.Path
	}
	switch {
	case d.Object != nil:
		kind := d.Object.GetTypeMeta().Kind
		if kind == "" && d.Kind != nil {
			kind = d.Kind.Kind
		}
		s += fmt.Sprintf(" (%s %q)", kind, d.Object.GetObjectMeta().Name)
	case d.Kind != nil:
		s += fmt.Sprintf(" (%s)", d.Kind.Kind)
	}
	return s
}

// prepareObject sets the namespace of a decoded object as kubectl does:
// from the document, else -n; it fails when an explicit -n disagrees.
func (r *Root) prepareObject(k *api.Kind, obj api.Object) error {
	m := obj.GetObjectMeta()
	if !k.Namespaced {
		m.Namespace = ""
		return nil
	}
	switch {
	case m.Namespace == "":
		m.Namespace = r.Namespace
	case r.namespaceFlagSet() && m.Namespace != r.Namespace:
		return fmt.Errorf("the namespace from the provided object %q does not match the namespace %q. You must pass '--namespace=%s' to perform this operation", m.Namespace, r.Namespace, m.Namespace)
	}
	return nil
}
