//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// giveToDirOwner hands a file that root wrote to the owner of its directory: the
// bootstrap of a compose stack runs as root to write into a host directory and a
// volume, and its files must be readable by the user who made that directory and by
// the non-root roles that own the volume. Run as anyone else, it changes nothing.
func giveToDirOwner(path string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Stat(filepath.Dir(path))
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner to give it to", path)
	}
	return os.Lchown(path, int(st.Uid), int(st.Gid))
}
