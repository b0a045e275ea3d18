package install

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// newFileMode is the mode of a configuration file toolgate creates: the entry's
// link carries a secret, so only the user reads it.
const newFileMode fs.FileMode = 0o600

// Target is one client's configuration file in one scope.
type Target struct {
	Client Client
	Scope  Scope
	Path   string
}

// NewTarget finds the file c keeps scope's servers in.
func NewTarget(c Client, scope Scope, env Env) (Target, error) {
	p, err := c.Path(env, scope)
	if err != nil {
		return Target{}, fmt.Errorf("install: %s, scope %s: %w", c.Name(), scope, err)
	}
	return Target{Client: c, Scope: scope, Path: p}, nil
}

// Change is what installing or uninstalling does to a target's file. It is
// computed first, so that a dry run can show it and nothing is written when the
// file is malformed or already as wanted.
type Change struct {
	// Path is the configuration file as the client names it.
	Path string
	// Before is the file's content; nil when there is no file.
	Before []byte
	// After is the content to write.
	After []byte

	real   string      // Path with symbolic links resolved: the file written
	exists bool        // whether the file exists
	mode   fs.FileMode // the existing file's permissions
}

// Empty reports whether applying c would leave the file as it is.
func (c *Change) Empty() bool {
	if !c.exists {
		return c.After == nil
	}
	return bytes.Equal(c.Before, c.After)
}

// Install computes the change that puts e into the target's file.
func (t Target) Install(e Entry) (*Change, error) {
	return t.plan(func(b []byte) ([]byte, error) { return t.Client.Add(b, e) }, true)
}

// Uninstall computes the change that takes the entry called name out of the
// target's file.
func (t Target) Uninstall(name string) (*Change, error) {
	return t.plan(func(b []byte) ([]byte, error) { return t.Client.Remove(b, name) }, false)
}

func (t Target) plan(edit func([]byte) ([]byte, error), create bool) (*Change, error) {
	c := &Change{Path: t.Path, real: t.Path}
	if r, err := filepath.EvalSymlinks(t.Path); err == nil {
		c.real = r
	}
	info, err := os.Stat(c.real)
	switch {
	case err == nil:
		if !info.Mode().IsRegular() {
			return nil, fmt.Errorf("install: %s is not a regular file", t.Path)
		}
		c.exists, c.mode = true, info.Mode().Perm()
		if c.Before, err = os.ReadFile(c.real); err != nil {
			return nil, fmt.Errorf("install: %w", err)
		}
	case errors.Is(err, fs.ErrNotExist):
		if !create {
			return c, nil
		}
	default:
		return nil, fmt.Errorf("install: %w", err)
	}
	after, err := edit(c.Before)
	if err != nil {
		var merr *MalformedError
		if errors.As(err, &merr) {
			merr.Path = t.Path
			return nil, fmt.Errorf("install: %w", merr)
		}
		return nil, fmt.Errorf("install: %s: %w", t.Path, err)
	}
	c.After = after
	return c, nil
}

// Apply writes the change: the previous file is kept as <file>.bak, and the new
// content replaces it atomically with the same permissions. It returns the backup's
// path, empty when there was no previous file. An empty change writes nothing.
func (c *Change) Apply() (backup string, err error) {
	if c.Empty() {
		return "", nil
	}
	mode := newFileMode
	if c.exists {
		mode = c.mode
		now, err := os.ReadFile(c.real)
		if err != nil {
			return "", fmt.Errorf("install: %w", err)
		}
		if !bytes.Equal(now, c.Before) {
			return "", fmt.Errorf("install: %s changed while it was being edited; nothing was written, try again", c.Path)
		}
		backup = c.real + ".bak"
		if err := writeAtomic(backup, c.Before, mode); err != nil {
			return "", err
		}
	} else if err := os.MkdirAll(filepath.Dir(c.real), 0o755); err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	if err := writeAtomic(c.real, c.After, mode); err != nil {
		return "", err
	}
	return backup, nil
}

// writeAtomic writes data to a temporary file beside name and renames it over
// name, so that a reader sees the old file or the new one, never half of one.
func writeAtomic(name string, data []byte, mode fs.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("install: write %s: %w", name, err)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}
