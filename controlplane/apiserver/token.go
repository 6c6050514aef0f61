package apiserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"skiff.dev/skiff/internal/atomicfile"
)

// TokenFile is the name of the cluster token file inside the data directory.
const TokenFile = "token"

// LoadOrCreateToken returns the cluster token kept in dataDir/token,
// creating it on first start: 32 random bytes, hex-encoded, mode 0600.
// Creation is atomic (atomicfile.WriteNew: a temporary file linked into
// place), so a crash never leaves a half-written token and two processes
// starting together agree on one token.
func LoadOrCreateToken(dataDir string) (string, error) {
	return LoadOrCreateTokenFile(filepath.Join(dataDir, TokenFile))
}

// LoadOrCreateTokenFile is LoadOrCreateToken for any file (the join
// token, DATA-DIR/join-token, is made the same way).
func LoadOrCreateTokenFile(path string) (string, error) {
	dataDir := filepath.Dir(path)
	if tok, err := readToken(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	// WriteNew fails when the file exists: another process won the race.
	if err := atomicfile.WriteNew(path, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("create token: %w", err)
	}
	return readToken(path)
}

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("read token %s: file is empty", path)
	}
	return tok, nil
}
