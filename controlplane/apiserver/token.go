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
)

// TokenFile is the name of the cluster token file inside the data directory.
const TokenFile = "token"

// LoadOrCreateToken returns the cluster token kept in dataDir/token,
// creating it on first start: 32 random bytes, hex-encoded, mode 0600.
// Creation is atomic (write a temporary file, then link it into place), so
// a crash never leaves a half-written token and two processes starting
// together agree on one token.
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
	tmp, err := os.CreateTemp(dataDir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", fmt.Errorf("create token: %w", err)
	}
	if _, err := tmp.WriteString(hex.EncodeToString(b) + "\n"); err != nil {
		tmp.Close()
		return "", fmt.Errorf("create token: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("create token: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	// Link fails when the file exists: another process won the race.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
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
