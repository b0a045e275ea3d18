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
// it with mode 0600. It reports whether the secret is new. The file appears whole or
// not at all, so a process waiting for it (an edge waiting for the bootstrap) never
// reads half a secret; when two processes make it at once, the first one's wins.
func loadOrCreateSecret(path string, gen func() string) (secret string, created bool, err error) {
	s, err := readSecretFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return s, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, err
	}
	tmp, err := writeTemp(path, gen())
	if err != nil {
		return "", false, err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); errors.Is(err, fs.ErrExist) {
		s, err := readSecretFile(path)
		return s, false, err
	} else if err != nil {
		return "", false, err
	}
	s, err = readSecretFile(path)
	return s, err == nil, err
}

// writeSecretFile writes secret to path with mode 0600, replacing what is there in
// one step.
func writeSecretFile(path, secret string) error {
	tmp, err := writeTemp(path, secret)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// writeTemp writes secret and a newline to a new file of mode 0600 beside path, and
// returns the new file's name.
func writeTemp(path, secret string) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(secret + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
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
