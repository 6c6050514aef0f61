package kubectl

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// StudentNames are prefix-01 .. prefix-N (two digits at least, as many as
// N has), for a room whose students have no names yet.
func StudentNames(prefix string, n int) []string {
	width := max(2, len(fmt.Sprint(n)))
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("%s-%0*d", prefix, width, i+1)
	}
	return out
}

// ParseRoster reads a roster: one student per line, the name a user and
// a namespace (a DNS label: lowercase letters, digits and '-'). Blank
// lines and lines starting with '#' are skipped, and so is what follows a
// '#' on a line. An error names source and the line (`roster.txt:3:`);
// a roster without a student is an error too.
func ParseRoster(r io.Reader, source string) ([]string, error) {
	var out []string
	first := map[string]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		name := strings.TrimSpace(line)
		if name == "" {
			continue
		}
		if err := checkStudent(name); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", source, n, err)
		}
		if at, ok := first[name]; ok {
			return nil, fmt.Errorf("%s:%d: student %q is on line %d already", source, n, name, at)
		}
		first[name] = n
		out = append(out, name)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read roster %s: %w", source, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("roster %s: no students (one name a line)", source)
	}
	return out, nil
}

// checkStudent says why name cannot be a student: it must be a
// namespace's name, in Kubernetes' words.
func checkStudent(name string) error {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("student %q: not a valid namespace name: %s", name, strings.Join(msgs, "; "))
	}
	return nil
}
