package cli

import (
	"fmt"
	"io"
	"sync"
)

// warningPrinter prints the API server's warnings as kubectl does:
// "Warning: TEXT" on w, each text once per command line (kubectl's
// deduplicating warning writer). It is safe for concurrent use.
func warningPrinter(w io.Writer) func(text string) {
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	return func(text string) {
		mu.Lock()
		defer mu.Unlock()
		if seen[text] {
			return
		}
		seen[text] = true
		fmt.Fprintf(w, "Warning: %s\n", text)
	}
}
