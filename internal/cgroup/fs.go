package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FS makes, removes and writes cgroup groups: the host's cgroup mounts
// (Host), or in tests a model of the kernel's rules over a plain
// directory. It holds only what changes the tree, where the kernel has
// rules of its own (which controllers a group may enable, where a process
// may go); reads go to the files directly, which a model keeps on disk as
// the kernel would show them.
type FS interface {
	// Mkdir creates group dir, whose parent exists. An existing dir is
	// an error wrapping fs.ErrExist, a missing parent one wrapping
	// fs.ErrNotExist.
	Mkdir(dir string) error
	// Rmdir removes group dir, as rmdir(2) does: it fails (EBUSY) while
	// a process or a child group is in it.
	Rmdir(dir string) error
	// WriteFile writes value to interface file name of group dir in one
	// write, as the kernel wants it; it never creates the file. The
	// error carries the kernel's errno for errors.Is.
	WriteFile(dir, name, value string) error
}

// Host is the FS of this host's cgroup mounts.
var Host FS = hostFS{}

type hostFS struct{}

func (hostFS) Mkdir(dir string) error                  { return os.Mkdir(dir, 0o755) }
func (hostFS) Rmdir(dir string) error                  { return removeDir(dir) }
func (hostFS) WriteFile(dir, name, value string) error { return WriteFile(dir, name, value) }

// MkdirAll creates group dir and every missing group on the way to it
// through fsys, and returns the ones it created, parents first. An
// existing dir is no error.
func MkdirAll(fsys FS, dir string) ([]string, error) {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) || d == filepath.Dir(d) {
			return nil, err
		}
		missing = append(missing, d)
	}
	var created []string
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		if err := fsys.Mkdir(d); err != nil && !errors.Is(err, fs.ErrExist) {
			return created, fmt.Errorf("creating group %s: %w", d, err)
		} else if err == nil {
			created = append(created, d)
		}
	}
	return created, nil
}
