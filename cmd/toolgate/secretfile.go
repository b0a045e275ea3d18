package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// loadOrCreateSecret reads a secret kept in a file, or makes one with gen and writes
// it with mode 0600. It reports whether the secret is new.
func loadOrCreateSecret(path string, gen func() string) (secret string, created bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", false, fmt.Errorf("%s: empty", path)
		}
		return s, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, err
	}
	s := gen()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, err
	}
	if _, err := f.WriteString(s + "\n"); err != nil {
		f.Close()
		return "", false, err
	}
	return s, true, f.Close()
}

// readSecretFile reads a secret that must already exist.
func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s: empty", path)
	}
	return s, nil
}
